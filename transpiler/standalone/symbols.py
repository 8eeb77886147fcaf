"""What a global name means across the stripped packages: follows re-exports, `__init__` aliases, star imports
and `module.attr` chains to the one module-level binding that defines it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from npu_port.transpiler.core.files import ReadError, read_text, too_deep_for_this_process
from npu_port.transpiler.standalone.graph import (
    BUILTIN_NAMES,
    MODULE_DUNDERS,
    ModuleAnalyzer,
    ModuleInfo,
    ProjectImport,
)
from npu_port.transpiler.standalone.resolver import SourceResolver


@dataclass(frozen=True, order=True)
class Sym:
    """A module-level binding: all top-level statements of `module` that bind `name`."""

    module: str
    name: str


@dataclass(frozen=True)
class ModRef:
    module: str


@dataclass(frozen=True)
class Builtin:
    name: str


@dataclass(frozen=True)
class Dunder:
    module: str
    name: str


@dataclass(frozen=True)
class PublicStar:
    """A name assumed to come from `from <public module> import *` in `module`."""

    module: str
    stmt: int


@dataclass(frozen=True)
class Unresolved:
    reason: str
    hint: str = ""


Target = Union[Sym, ModRef, Builtin, Dunder, PublicStar, Unresolved]


class ModuleLoadError(Exception):
    def __init__(self, reason: str, hint: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# Parsed modules, shared by the scripts of one run (a folder of scripts reuses the package's analysis).
# Keyed by everything the analysis depends on, so an edited file is parsed again.
_ANALYSED: dict[tuple, ModuleInfo] = {}


class Project:
    """Loads stripped modules on demand (parsed, never imported) and resolves names across them."""

    def __init__(self, resolver: SourceResolver):
        self.resolver = resolver
        self.modules: dict[str, ModuleInfo] = {}
        self._errors: dict[str, ModuleLoadError] = {}
        # Globals that code assigns from outside their module (`cfg.DEBUG = True`), found by the closure.
        self.stored: set[Sym] = set()

    def add_script(self, info: ModuleInfo) -> None:
        self.modules[info.name] = info

    def module(self, name: str) -> ModuleInfo:
        if name in self.modules:
            return self.modules[name]
        if name in self._errors:
            raise self._errors[name]
        try:
            info = self._load(name)
        except ModuleLoadError as exc:
            self._errors[name] = exc
            raise
        self.modules[name] = info
        return info

    def _load(self, name: str) -> ModuleInfo:
        src = self.resolver.find(name)
        if src is None:
            raise ModuleLoadError(f"cannot find the source of module {name}",
                                  f"searched {self.resolver.searched()}; add the folder that holds "
                                  f"{name.split('.')[0]}/ with --path")
        if src.is_extension:
            raise ModuleLoadError(f"{name} is a compiled extension ({display_path(src.path)}) and cannot be "
                                  "inlined as source",
                                  "keep that package out of --strip, or ship the extension with the script")
        if src.path.is_dir():
            text = ""  # namespace package: no code of its own
        else:
            try:
                text = read_text(src.path)
            except ReadError as exc:
                raise ModuleLoadError(f"cannot read {display_path(src.path)}: {exc}") from None
            if too_deep_for_this_process(text.encode("utf-8")):
                raise ModuleLoadError(f"cannot parse {display_path(src.path)}: nested too deeply for the parser")
        stat = src.path.stat()
        key = (str(src.path), stat.st_mtime_ns, stat.st_size, name, display_path(src.path), self.resolver.packages)
        if key in _ANALYSED:
            return _ANALYSED[key]
        try:
            info = ModuleAnalyzer(name, display_path(src.path), src.package, text,
                                  self.resolver.is_stripped).analyze()
            _ANALYSED[key] = info
            return info
        except SyntaxError as exc:
            raise ModuleLoadError(f"cannot parse {display_path(src.path)}: {exc}") from None
        except Exception as exc:  # LibCST parser errors
            raise ModuleLoadError(f"cannot parse {display_path(src.path)}: {exc}") from None

    def is_rebound(self, sym: Sym) -> bool:
        """Whether the global `sym` gets a new value after its module ran (a function's `global`, or a store
        from outside such as `cfg.DEBUG = True`)."""
        if sym in self.stored:
            return True
        try:
            return sym.name in self.module(sym.module).rebound
        except ModuleLoadError:
            return False

    def snapshot_import(self, module: str, name: str) -> Optional[ProjectImport]:
        """The module-level `from m import name` that gives `module` its own copy of a rebound global."""
        try:
            info = self.module(module)
        except ModuleLoadError:
            return None
        aliases = info.alias_bindings.get(name)
        if not aliases or len({a.target for a in aliases}) > 1:
            return None
        imp = aliases[0]
        if imp.kind != "attr" or _is_self_import(module, imp):
            return None
        target = self.resolve_attr(imp.module, imp.imported_name)
        return imp if isinstance(target, Sym) and self.is_rebound(target) else None

    def submodule_exists(self, module: str, attr: str) -> bool:
        return self.resolver.find(f"{module}.{attr}") is not None

    def imports_submodule(self, module: str, attr: str) -> bool:
        """Whether `from module import attr` loads the submodule: the package binds `attr` no other way
        than by importing that very submodule (`from . import attr` in its __init__)."""
        if not self.submodule_exists(module, attr):
            return False
        try:
            info = self.module(module)
        except ModuleLoadError:
            return False
        if attr in info.local_bindings:
            return False
        return all(_is_self_import(module, imp) for imp in info.alias_bindings.get(attr, []))

    # -- resolution ----------------------------------------------------------------------------------

    def resolve(self, module: str, name: str, _seen: Optional[set] = None) -> Target:
        seen = _seen if _seen is not None else set()
        if (module, name) in seen:
            return Unresolved(f"circular re-export of {name!r} through {module}")
        seen.add((module, name))
        try:
            info = self.module(module)
        except ModuleLoadError as exc:
            return Unresolved(exc.reason, exc.hint)
        if name in info.local_bindings:
            return Sym(module, name)
        aliases = info.alias_bindings.get(name)
        if aliases:
            targets = {a.target for a in aliases}
            if len(targets) > 1:
                return Sym(module, name)  # rebound by several imports: each becomes an assignment
            imp = aliases[0]
            if imp.kind == "module":
                return ModRef(imp.module)
            if _is_self_import(module, imp):
                return ModRef(f"{module}.{imp.attr}")
            target = self.resolve_attr(imp.module, imp.imported_name, seen)
            if isinstance(target, Sym) and self.is_rebound(target):
                return Sym(module, name)  # `from m import x` copies x; m rebinds it later: one state each
            return target
        for stmt, star_imp, star_module in reversed(info.star_imports):
            if star_imp is None:
                return PublicStar(module, stmt)
            if name in self.star_names(star_module):
                return self.resolve(star_module, name, seen)
        if name in MODULE_DUNDERS:
            return Dunder(module, name)
        if name in BUILTIN_NAMES:
            return Builtin(name)
        return Unresolved(f"name {name!r} is not defined in {module}" if module != "__main__"
                          else f"name {name!r} is not defined")

    def resolve_attr(self, module: str, attr: str, seen: Optional[set] = None) -> Target:
        """`from module import attr` / `module.attr`: a binding of the module, else its submodule."""
        try:
            info = self.module(module)
        except ModuleLoadError as exc:
            return Unresolved(exc.reason, exc.hint)
        if self.imports_submodule(module, attr):
            return ModRef(f"{module}.{attr}")
        if info.binds(attr) or any(imp is not None and attr in self.star_names(m)
                                   for _, imp, m in info.star_imports):
            return self.resolve(module, attr, seen)
        if self.submodule_exists(module, attr):
            return ModRef(f"{module}.{attr}")
        if any(imp is None for _, imp, _m in info.star_imports):
            return self.resolve(module, attr, seen)
        return Unresolved(f"module {module} has no name {attr!r}", f"see {info.path}")

    def resolve_chain(self, module: str, name: str, chain: tuple[str, ...]) -> tuple[Target, int]:
        """Resolve `name.chain...` as far as modules go; returns the target and how many attributes it used."""
        target = self.resolve(module, name)
        used = 0
        while isinstance(target, ModRef) and used < len(chain):
            target = self.resolve_attr(target.module, chain[used])
            used += 1
        return target, used

    def resolve_import(self, imp) -> Target:
        if imp.kind == "module":
            return ModRef(imp.module)
        return self.resolve_attr(imp.module, imp.attr)

    def star_names(self, module: str, _seen: Optional[set] = None) -> frozenset[str]:
        """The names `from module import *` binds: `__all__`, else every public global name."""
        seen = _seen if _seen is not None else set()
        if module in seen:
            return frozenset()
        seen.add(module)
        try:
            info = self.module(module)
        except ModuleLoadError:
            return frozenset()
        if info.all_names is not None:
            return frozenset(info.all_names)
        names = set(info.local_bindings) | set(info.alias_bindings)
        for _, imp, star_module in info.star_imports:
            if imp is not None:
                names |= self.star_names(star_module, seen)
        return frozenset(n for n in names if n and not n.startswith("_"))


def _is_self_import(module: str, imp) -> bool:
    """`from . import sub` (or `from pkg import sub`) inside pkg itself: binds the submodule."""
    return imp.kind == "attr" and imp.module == module and imp.attr == imp.local

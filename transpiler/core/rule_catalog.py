"""Rule metadata without importing the rules: what `rules`, `explain` and the prefilter read.

Importing the rules imports LibCST and every rule's tables (about 0.3 s of CPU, most of a small
run's cost) only to read an id, a few words, the triggers and a docstring. Two sources answer here
instead, nothing of the rules executed:

- the index, `core/rule_index.py`: every rule's id, module, class, LANGUAGE, GROUP, SAFETY, TRIGGERS,
  TRIGGER_PATTERNS, FOLLOWS_CHANGES and docstring, generated from the imported classes by
  `python -m tools.docgen` and checked in. It carries a digest of the sources the metadata is
  computed from (the rule package's code and tables, the rule framework, the text engines and the
  tables' loaders); where the files on disk digest otherwise (a rule edited, the index not
  regenerated), `indexed()` returns None and the registry imports the rules, as it always did:
  correct, only slower. `tests/test_docs_current.py` holds the checked-in index current, `tests/test_rule_index.py` what it holds.
- the rule modules' source, read with `ast` (`catalog()`'s fallback for `rules` and `explain`): each
  rule module of `npu_port.codemods` is parsed, its classes' literal class attributes (ID, LANGUAGE,
  GROUP, SAFETY) are merged along their bases (within this package, through its `from ... import`
  lines) and the docstring is the class's own, as `Rule.description` reads it. A rule whose
  attributes are not literals, or whose bases cannot be followed, makes it return None: the callers
  then ask the registry, which imports the rules.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import os
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Optional, Union

import npu_port
from npu_port import codemods

if TYPE_CHECKING:
    from npu_port.transpiler.core.rules import Rule

_ATTRIBUTES = ("ID", "LANGUAGE", "GROUP", "SAFETY")
_RULE_BASE = ("npu_port.transpiler.core.rules", "Rule")


@dataclass(frozen=True)
class RuleInfo:
    """A rule as `rules` and `explain` show it: the attributes `output/rule_docs.py` reads."""

    ID: str
    LANGUAGE: str
    GROUP: str
    SAFETY: str
    doc: str

    def description(self) -> str:
        return inspect.cleandoc(self.doc)

    def summary(self) -> str:
        return self.description().split("\n", 1)[0]


@dataclass(frozen=True)
class RuleSpec:
    """A rule as the prefilter and the listings see it, before (or without) importing it: its metadata
    and where its class lives. `load()` imports the class, once."""

    ID: str
    LANGUAGE: str
    GROUP: str
    SAFETY: str
    TRIGGERS: tuple[str, ...]
    TRIGGER_PATTERNS: tuple[str, ...]
    FOLLOWS_CHANGES: bool
    module: str
    qualname: str
    doc: str
    loaded: Any = field(default=None, compare=False, repr=False)  # the class, once imported

    @classmethod
    def of(cls, rule: Any) -> RuleSpec:
        """The spec of an imported rule class (a test's, a plugin's, or the registry's own)."""
        return cls(rule.ID, rule.LANGUAGE, rule.GROUP, rule.SAFETY, tuple(rule.TRIGGERS),
                   tuple(rule.TRIGGER_PATTERNS), bool(rule.FOLLOWS_CHANGES), rule.__module__, rule.__qualname__,
                   rule.__doc__ or "", rule)

    def load(self) -> Any:
        """The rule class (`type[Rule]`), imported on first use."""
        if self.loaded is None:
            found: Any = importlib.import_module(self.module)
            for part in self.qualname.split("."):
                found = getattr(found, part)
            if getattr(found, "ID", None) != self.ID:
                raise RuntimeError(f"rule index: {self.module}.{self.qualname} is not rule {self.ID}: "
                                   "run `python -m tools.docgen`")
            object.__setattr__(self, "loaded", found)  # a cache, not part of the value
        return self.loaded

    def description(self) -> str:
        return inspect.cleandoc(self.doc)

    def summary(self) -> str:
        return self.description().split("\n", 1)[0]


RuleLike = Union[RuleSpec, "type[Rule]"]  # a rule class, or its spec before it is imported


def as_spec(rule: RuleLike) -> RuleSpec:
    return rule if isinstance(rule, RuleSpec) else RuleSpec.of(rule)


# What rule metadata is computed from: the rules' modules and tables (TRIGGERS = env_triggers()), the
# framework's defaults and bases (Rule.TRIGGER_PATTERNS, ShellRule.LANGUAGE, CUDA_WORD) and the tables'
# loaders. Paths are relative to the npu_port package, the same in a checkout and in the wheel.
_DIGESTED = (("codemods", (".py", ".yaml", ".yml")), ("transpiler/core/rules.py", ()),
             ("transpiler/text", (".py",)), ("transpiler/tables", (".py",)))
# Generated from the tables' YAML, which is digested itself (docgen writes it beside the index, and
# tables/mapping.py checks each of its tables against its YAML file).
_NOT_DIGESTED = frozenset({"transpiler/tables/builtin_tables.py"})


def source_digest() -> str:
    """A digest of the files the rules' metadata comes from (about 4 ms: 0.4 MB read)."""
    from npu_port import transpiler

    roots = {"codemods": codemods.__path__[0], "transpiler": transpiler.__path__[0]}
    h = hashlib.blake2b(digest_size=16)
    for rel, suffixes in _DIGESTED:
        top, _, rest = rel.partition("/")
        path = os.path.join(roots[top], *rest.split("/")) if rest else roots[top]
        files = [path] if not suffixes else sorted(
            os.path.join(folder, f) for folder, dirs, names in os.walk(path)
            if "__pycache__" not in folder for f in names if f.endswith(suffixes))
        for file in files:
            name = os.path.relpath(file, roots[top]).replace(os.sep, "/")
            if f"{top}/{name}" in _NOT_DIGESTED:
                continue
            with open(file, "rb") as fh:
                data = fh.read()
            h.update(name.encode() + b"\0")
            h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


@cache
def indexed() -> Optional[dict[str, RuleSpec]]:
    """Every rule by id, sorted, from the checked-in index; None where the sources digest otherwise than
    when it was generated (or it is missing): then only importing the rules tells."""
    try:
        from npu_port.transpiler.core import rule_index
    except ImportError:
        return None
    try:
        if rule_index.DIGEST != source_digest():
            return None
    except OSError:
        return None
    rows: Any = rule_index.RULES  # generated literals, checked by tests/test_rule_index.py
    return {row["ID"]: RuleSpec(**row) for row in rows}


def index_source(rules: dict) -> str:
    """The text of `core/rule_index.py` for these imported rule classes (tools/docgen.py writes it)."""
    rows = []
    for spec in (RuleSpec.of(rule) for rule in rules.values()):
        rows.append("    {" + ", ".join(f"{name!r}: {getattr(spec, name)!r}" for name in _INDEXED) + "},")
    return "\n".join([
        '"""Generated by `python -m tools.docgen` from the rule classes: do not edit."""',
        "",
        "# What the registry and the prefilter know of each rule without importing it (core/rule_catalog.py);",
        "# DIGEST is rule_catalog.source_digest() of the sources it was generated from.",
        "",
        f"DIGEST = {source_digest()!r}",
        "",
        "RULES = (",
        *rows,
        ")",
        "",
    ])


_INDEXED = ("ID", "LANGUAGE", "GROUP", "SAFETY", "TRIGGERS", "TRIGGER_PATTERNS", "FOLLOWS_CHANGES", "module",
            "qualname", "doc")


class _Unreadable(Exception):
    """Something the source alone does not tell: the registry must be asked."""


@dataclass
class _Class:
    bases: list[tuple[str, str]]  # (module, name) of each base, resolved through the imports
    attributes: dict[str, object]  # literal class-level assignments
    doc: str
    unknown: set[str]  # class-level names assigned something that is not a literal


def _module_file(module: str) -> Optional[str]:
    """The source file of a module of this package, found from the package folders alone."""
    parts = module.split(".")
    if parts[0] != "npu_port" or len(parts) < 2:
        return None
    for folder in npu_port.__path__:
        base = os.path.join(folder, *parts[1:])
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


@cache
def _classes(module: str) -> dict[str, _Class]:
    path = _module_file(module)
    if path is None:
        raise _Unreadable(module)
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    package = module.rpartition(".")[0]
    names: dict[str, tuple[str, str]] = {}  # local name -> (module, name) it was imported as
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            source = node.module if node.level == 0 else ".".join(
                [*package.split(".")[:len(package.split(".")) - node.level + 1], node.module])
            for alias in node.names:
                names[alias.asname or alias.name] = (source, alias.name)
    local = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    found: dict[str, _Class] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = []
        for base in node.bases:
            if isinstance(base, ast.Name):
                # Imported, defined here, or a builtin (Exception): the last is never a rule.
                bases.append(names.get(base.id) or ((module, base.id) if base.id in local else ("?", base.id)))
            elif isinstance(base, (ast.Attribute, ast.Subscript)):
                bases.append(("?", ast.unparse(base)))  # cst.CSTVisitor, Generic[T]: never a rule
            else:
                raise _Unreadable(f"{module}.{node.name}")
        attributes: dict[str, object] = {}
        unknown: set[str] = set()
        for stmt in node.body:
            targets: list[ast.expr] = []
            value: Optional[ast.expr] = None
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            for target in targets:
                if isinstance(target, ast.Name) and target.id in _ATTRIBUTES and value is not None:
                    try:
                        attributes[target.id] = ast.literal_eval(value)
                    except ValueError:
                        unknown.add(target.id)
            if isinstance(stmt, ast.FunctionDef) and stmt.name in ("description", "summary"):
                unknown.add(stmt.name)
        found[node.name] = _Class(bases, attributes, ast.get_docstring(node, clean=False) or "", unknown)
    return found


def _resolve(module: str, name: str, seen: frozenset = frozenset()) -> Optional[tuple[dict[str, object], set[str]]]:
    """(attributes, names that are not literals) of the class along its bases, nearest first; None when
    it is not a rule class (its bases never reach Rule)."""
    if (module, name) == _RULE_BASE:
        return {"GROUP": "default"}, set()
    if module == "?" or (module, name) in seen or not module.startswith("npu_port."):
        return None
    cls = _classes(module).get(name)
    if cls is None:
        # Imported again from elsewhere (a re-export): follow it there.
        raise _Unreadable(f"{module}.{name}")
    merged: Optional[dict[str, object]] = None
    unknown: set[str] = set()
    for base in cls.bases:
        got = _resolve(*base, seen=seen | {(module, name)})
        if got is None:
            continue
        inherited, inherited_unknown = got
        merged = {**inherited, **(merged or {})}  # an earlier base wins, as in a simple MRO
        unknown |= inherited_unknown - set(merged)
    if merged is None:
        return None
    return {**merged, **cls.attributes}, (unknown | cls.unknown) - set(cls.attributes)


@cache
def catalog() -> Optional[dict[str, Any]]:
    """Every rule by id, sorted, as the registry would list them (a RuleSpec from the index, else a
    RuleInfo read from the source); None where neither tells."""
    found = indexed()
    if found is not None:
        return found
    try:
        return _read_all()
    except (_Unreadable, OSError, SyntaxError, UnicodeDecodeError):
        return None


def _read_all() -> Optional[dict[str, RuleInfo]]:
    found: dict[str, RuleInfo] = {}
    for folder in codemods.__path__:
        for file in sorted(os.listdir(folder)):
            if not file.endswith(".py") or file.startswith("_"):
                continue
            module = f"{codemods.__name__}.{file[:-3]}"
            for name, cls in _classes(module).items():
                got = _resolve(module, name)
                if got is None:
                    continue
                attributes, unknown = got
                if unknown & {*_ATTRIBUTES, "description", "summary"}:
                    return None
                if not attributes.get("ID"):
                    continue
                if any(not isinstance(attributes.get(a), str) for a in _ATTRIBUTES):
                    return None
                rule_id = str(attributes["ID"])
                if rule_id in found:
                    return None  # the registry says what is wrong
                found[rule_id] = RuleInfo(rule_id, str(attributes["LANGUAGE"]), str(attributes["GROUP"]),
                                          str(attributes["SAFETY"]), cls.doc)
    return dict(sorted(found.items()))


def rule_infos() -> dict:
    """The catalog, or the registry's rules where the catalog cannot be read from the source."""
    found = catalog()
    if found is not None:
        return found
    from npu_port.transpiler.core.registry import all_rules

    return all_rules()

"""Modules the original imports lazily (inside a function or method), and which of them must stay lazy.

A module is *eager* when the script's own top-level imports run it, directly or through other modules'
top-level imports (parents first): its code is inlined at the top, in the order Python runs it. Every other
module that a function imports is *lazy*: Python runs it when that function first runs, or never.

A lazy module whose inlined statements are all quiet (definitions, constants: nothing observable happens when
they run) is inlined at the top like an eager one; nobody can tell the difference. A lazy module with an
effect (a decorator that registers into a shared registry, a print, a call) is *deferred*: its code goes
into a loader function that runs it on first use, once, and every import of it (a function's, or another
deferred module's top-level import) becomes a call of that loader. A module whose top-level imports run a
deferred module is deferred too, so its effects keep their place between the ones of the modules it imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.standalone.graph import ModuleInfo, ProjectImport, Ref, Statement
from npu_port.transpiler.standalone.quiet import decorator_ids, quiet_code, quiet_definition
from npu_port.transpiler.standalone.symbols import ModuleLoadError, Sym, Target

if TYPE_CHECKING:
    from npu_port.transpiler.standalone.closure import Closure

class LazyPlan:
    """Which lazily imported modules are deferred, and which loaders an import statement must call."""

    def __init__(self, closure: Closure, eager: set[str]):
        self.closure = closure
        self.project = closure.project
        self.eager = eager
        self.lazy = [m for m in closure.executed if m not in eager]
        self.deferred: set[str] = set()
        changed = True
        while changed:  # a module that runs a deferred one at import time is deferred as well
            changed = False
            for name in self.lazy:
                if name not in self.deferred and self._must_defer(name):
                    self.deferred.add(name)
                    changed = True

    def _info(self, name: str) -> ModuleInfo | None:
        try:
            return self.project.module(name)
        except ModuleLoadError:
            return None

    def _must_defer(self, name: str) -> bool:
        info = self._info(name)
        if info is None:
            return False
        for st in info.statements:
            if (name, st.index) in self.closure.included and not self._quiet(name, info, st):
                return True
            if any(self.import_triggers(imp) for imp in st.imports
                   if not imp.function_level and not imp.type_checking):
                return True
        return False

    # -- loaders to call -------------------------------------------------------------------------------

    def triggers(self, name: str) -> list[str]:
        """The loaders to call when `import name` runs lazily: its own when it is deferred (that loader runs
        the parent packages first, as Python does), else those of its deferred parent packages."""
        while name and name not in self.eager:
            if name in self.deferred:
                return [name]
            name = name.rpartition(".")[0]
        return []

    def parent_triggers(self, name: str) -> list[str]:
        """The loaders a deferred module's loader calls before its own code: its parent packages'."""
        return self.triggers(name.rpartition(".")[0])

    def import_triggers(self, imp: ProjectImport) -> list[str]:
        """The loaders one project import calls (none for an eager module or a `TYPE_CHECKING` import)."""
        if imp.type_checking:
            return []
        names = [imp.module]
        if imp.kind == "attr" and imp.attr and self.project.imports_submodule(imp.module, imp.attr):
            names.append(f"{imp.module}.{imp.attr}")
        out: list[str] = []
        for name in names:
            out.extend(m for m in self.triggers(name) if m not in out)
        return out

    # -- quiet statements ------------------------------------------------------------------------------

    def _target(self, module: str, ref: Ref) -> Target:
        if ref.local_import is not None:
            return self.project.resolve_import(ref.local_import) if ref.local_import.kind != "conflict" \
                else Sym(module, ref.name)
        return self.project.resolve_chain(module, ref.name, ref.chain)[0]

    def _quiet(self, module: str, info: ModuleInfo, st: Statement) -> bool:
        """Whether running `st` has no effect anyone could observe, besides binding its names."""
        if st.kind in ("docstring", "future", "main-guard", "import"):
            return True
        if st.kind == "assign":
            value = st.assigned_value  # None for a bare `x: T`, which the closure also counts as no effect
            return st.literal_value or value is None or quiet_code(value)
        if st.kind == "def":
            # A decorator that records into project state (a registry), a base class that registers its
            # subclasses: effects. A project decorator runs project code when applied: not quiet either.
            if self.closure._effect(module, info, st) is not None:
                return False
            ids = decorator_ids(st.node)
            if any(id(r.node) in ids and isinstance(self._target(module, r), Sym) for r in st.refs):
                return False
            return quiet_definition(st.node)
        if isinstance(st.node, cst.If) and (dotted_name(st.node.test) or "").split(".")[-1] == "TYPE_CHECKING":
            return True
        return False

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
from npu_port.transpiler.standalone.graph import ModuleInfo, ProjectImport, Ref, Statement, node_ids
from npu_port.transpiler.standalone.symbols import ModuleLoadError, Sym, Target

if TYPE_CHECKING:
    from npu_port.transpiler.standalone.closure import Closure

# Calls that only build a value when a module runs, with nothing observable: a lazy module made of such
# statements can be inlined at the top. Any other call (a print, a registration, a logger set-up, a call
# into the project) keeps the module lazy.
QUIET_CALLS = frozenset({
    "field", "namedtuple", "NamedTuple", "TypedDict", "TypeVar", "NewType", "ParamSpec", "cast",
    "dict", "list", "set", "frozenset", "tuple", "object", "defaultdict", "OrderedDict", "deque", "Counter",
    "partial", "property", "staticmethod", "classmethod",
    # decorators that wrap, built by a call
    "dataclass", "lru_cache", "cache", "wraps", "total_ordering",
})


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
            return st.literal_value or _quiet_code(st.node.body[0].value)  # type: ignore[attr-defined]
        if st.kind == "def":
            # A decorator that records into project state (a registry), a base class that registers its
            # subclasses: effects. A project decorator runs project code when applied: not quiet either.
            if self.closure._effect(module, info, st) is not None:
                return False
            ids = _decorator_ids(st.node)
            if any(id(r.node) in ids and isinstance(self._target(module, r), Sym) for r in st.refs):
                return False
            return _quiet_definition(st.node)
        if isinstance(st.node, cst.If) and (dotted_name(st.node.test) or "").split(".")[-1] == "TYPE_CHECKING":
            return True
        return False


def _decorator_ids(node: cst.CSTNode) -> set[int]:
    """Ids of the nodes of every decorator applied when `node` (a def or class) runs: its own, and those
    of the methods and classes in a class body (function bodies run later)."""
    ids: set[int] = set()
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        for deco in node.decorators:
            ids |= node_ids(deco)
    if isinstance(node, cst.ClassDef) and isinstance(node.body, cst.IndentedBlock):
        for inner in node.body.body:
            ids |= _decorator_ids(inner)
    return ids


def _quiet_code(node: cst.CSTNode) -> bool:
    """No call runs (lambda bodies do not run), other than the QUIET_CALLS constructors."""
    finder = _Calls()
    node.visit(finder)
    return not finder.loud


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.loud = False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Await(self, node: cst.Await) -> None:
        self.loud = True

    def visit_Yield(self, node: cst.Yield) -> None:
        self.loud = True

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted_name(node.func) or ""
        if name.rsplit(".", 1)[-1] not in QUIET_CALLS:
            self.loud = True


def _quiet_definition(node: cst.CSTNode) -> bool:
    """A def whose defaults and decorators call nothing, or a class whose bases and body are quiet."""
    if isinstance(node, cst.FunctionDef):
        return all(_quiet_code(d.decorator) for d in node.decorators) and _quiet_code(node.params)
    if isinstance(node, cst.ClassDef):
        heads = [d.decorator for d in node.decorators] + [a.value for a in (*node.bases, *node.keywords)]
        if not all(_quiet_code(h) for h in heads):
            return False
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
        return all(_quiet_class_statement(s) for s in body)
    return False


def _quiet_class_statement(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return _quiet_definition(stmt)
    if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return all(isinstance(s, (cst.Pass, cst.Expr, cst.Assign, cst.AnnAssign)) and _quiet_code(s)
                   for s in stmt.body)
    return False


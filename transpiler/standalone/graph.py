"""Per-module facts the inliner needs: for each top-level statement, the global names it binds, the global
names it reads (through which attribute chain), and the stripped-package imports it contains.

LibCST's scope analysis decides what a name refers to (class scopes, comprehensions, `global`); this module
turns its answers into plain records keyed by top-level statement.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Optional, TypeGuard, Union

import libcst as cst
from libcst.metadata import (
    Assignment,
    BuiltinScope,
    CodeRange,
    GlobalScope,
    ImportAssignment,
    MetadataWrapper,
    PositionProvider,
)

from npu_port.transpiler.analysis.import_policy import dynamic_imports
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.literals import is_main_guard
from npu_port.transpiler.standalone.resolver import absolute_module
from npu_port.transpiler.standalone.scopes import BindingScopeProvider

BUILTIN_NAMES = frozenset(dir(builtins))
# Names every module has; LibCST resolves some of them to builtins and some to nothing.
MODULE_DUNDERS = frozenset({
    "__name__", "__file__", "__doc__", "__package__", "__spec__", "__loader__", "__path__", "__builtins__",
    "__annotations__", "__dict__", "__cached__",
})


# A statement of a module's body (what `Module.body` holds).
BodyStatement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


@dataclass
class ProjectImport:
    """One name a stripped-package import binds."""

    local: str  # the name it binds
    kind: str  # "module" (`import a.b as m`, or `import a.b` binding `a`), "attr" (`from a import b`), "star"
    module: str  # absolute module name
    attr: Optional[str]  # for kind "attr"
    node: cst.CSTNode  # the Import / ImportFrom statement
    line: int
    col: int
    function_level: bool  # inside a def or lambda: runs at call time and binds a local name
    type_checking: bool = False  # under `if TYPE_CHECKING:`: never runs


    @property
    def target(self) -> tuple:
        return (self.kind, self.module, self.attr)

    @property
    def imported_name(self) -> str:
        """The name a kind "attr" import takes from its module (`b` of `from a import b`)."""
        if self.attr is None:
            raise ValueError(f"a {self.kind!r} import takes no name from {self.module}")
        return self.attr


@dataclass
class Ref:
    """A read of a name that is global in its module (or a local bound by a function-level project import)."""

    name: str
    node: cst.CSTNode  # the Name; for string annotations the SimpleString
    chain: tuple[str, ...]  # attribute names that follow the Name, outermost last
    chain_nodes: tuple[cst.CSTNode, ...]  # the Attribute node for each prefix of the chain
    line: int
    col: int
    local_import: Optional[ProjectImport] = None  # set when the name is a function-local project import
    string_inner: Optional[cst.CSTNode] = None  # the Name inside a parsed string annotation
    string_expr: Optional[cst.BaseExpression] = None  # that annotation, parsed
    shadow_names: frozenset[str] = frozenset()  # names bound in enclosing function scopes
    # The attribute node of `chain` that is assigned or deleted (`cfg.DEBUG = True`), if any: a store into
    # another module's global, which must stay a store into that one global once inlined.
    store_node: Optional[cst.CSTNode] = None
    # The innermost def or class around the read (None at module level): where a `global` goes.
    scope_node: Optional[cst.CSTNode] = None

    @property
    def text(self) -> str:
        return ".".join((self.name,) + self.chain)


@dataclass
class Statement:
    index: int
    node: BodyStatement
    line: int
    binds: set[str] = field(default_factory=set)  # global names bound here, other than by project imports
    refs: list[Ref] = field(default_factory=list)
    imports: list[ProjectImport] = field(default_factory=list)  # stripped-package imports anywhere inside
    public_import: bool = False  # a plain top-level import of a non-stripped module
    kind: str = "other"  # "import", "def", "assign", "docstring", "future", "main-guard", "other"
    binding_nodes: list[cst.Name] = field(default_factory=list)  # Name nodes binding a global name
    decorator_ids: frozenset[int] = frozenset()  # ids of nodes inside this def/class's decorators
    dynamic_imports: list[tuple[int, int, str]] = field(default_factory=list)
    literal_value: bool = False  # an assignment whose value is a literal constant (not mutable state)
    # Global names a public import binds here (`import random`, `from os import environ`, also in a try):
    # objects outside the project, so a call or store on them is an effect, never project state.
    import_binds: set[str] = field(default_factory=set)

    @property
    def assigned_value(self) -> Optional[cst.BaseExpression]:
        """The value of a kind "assign" statement (`x = v`, `x: T = v`; None for a bare `x: T`)."""
        small = self.node.body[0] if isinstance(self.node, cst.SimpleStatementLine) else None
        if not isinstance(small, (cst.Assign, cst.AnnAssign)):
            raise ValueError(f"statement {self.index} is a {self.kind!r} statement, not an assignment")
        return small.value


@dataclass
class ModuleInfo:
    name: str  # "__main__" for the script
    path: str  # for messages
    package: str  # what relative imports are relative to
    module: cst.Module
    statements: list[Statement]
    local_bindings: dict[str, list[int]]  # global name -> statements binding it locally
    alias_bindings: dict[str, list[ProjectImport]]  # global name -> module-level project imports binding it
    star_imports: list[tuple[int, Optional[ProjectImport], str]]  # (stmt, project import or None, module)
    all_names: Optional[tuple[str, ...]]  # static __all__, None when absent or not a literal
    mixed: set[str]  # names bound both by a project import and otherwise: each import becomes an assignment
    # Module globals that functions rebind (`global _counter; _counter += 1`): an importer's
    # `from m import _counter` holds its own snapshot, not the live value.
    rebound: frozenset[str]
    future_annotations: bool
    positions: Mapping[cst.CSTNode, CodeRange]
    parents: dict[cst.CSTNode, cst.CSTNode]
    nodes_of_stmt: list[set[int]]

    def binds(self, name: str) -> bool:
        return name in self.local_bindings or name in self.alias_bindings


class _Walk(cst.CSTVisitor):
    """Each node's parent, and which top-level statement each node belongs to, in one walk."""

    def __init__(self) -> None:
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.owner: dict[int, int] = {}
        self.nodes_of_stmt: list[set[int]] = []
        self._stack: list[cst.CSTNode] = []
        self._current: Optional[int] = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._stack:
            self.parents[node] = self._stack[-1]
            if len(self._stack) == 1:  # a statement of the module's body, or its header/footer lines
                self._current = len(self.nodes_of_stmt) if isinstance(node, cst.BaseStatement) else None
                if self._current is not None:
                    self.nodes_of_stmt.append(set())
            if self._current is not None:
                self.nodes_of_stmt[self._current].add(id(node))
                self.owner[id(node)] = self._current
        self._stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()


class _NodeIds(cst.CSTVisitor):
    def __init__(self) -> None:
        self.ids: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.ids.add(id(node))
        return True


def node_ids(node: cst.CSTNode) -> set[int]:
    v = _NodeIds()
    node.visit(v)
    return v.ids


def _is_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, cst.UnaryOperation):
        return _is_literal(node.expression)
    if isinstance(node, cst.Tuple):
        return all(_is_literal(e.value) for e in node.elements)
    return False


def _static_all(tree: ast.Module) -> tuple[Optional[tuple[str, ...]], bool]:
    """`__all__` when it is built from string literals (=, +=, .extend, .append); (None, False) if absent."""
    names: list[str] = []
    seen = False
    for node in tree.body:
        value = None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names, value, seen = [], node.value, True
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
            names, value, seen = [], node.value, True
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
            value = node.value
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, ast.Name) \
                and node.value.func.value.id == "__all__" and node.value.func.attr in ("extend", "append") \
                and node.value.args:
            value = node.value.args[0]
            if node.value.func.attr == "append":
                value = ast.List([value])
        if value is None:
            continue
        strings = _string_literals(value)
        if strings is None:
            return None, True
        names.extend(strings)
    return (tuple(names) if seen else None), seen


def _string_literals(node: ast.expr) -> Optional[list[str]]:
    """The strings of a list or tuple display made of string literals only, else None."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return strings if len(strings) == len(node.elts) else None


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 \
        and isinstance(stmt.body[0], cst.Expr) \
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _is_future(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, cst.ImportFrom) and s.module is not None and dotted_name(s.module) == "__future__"
        for s in stmt.body)


def _import_kind(stmt: cst.CSTNode) -> TypeGuard[cst.SimpleStatementLine]:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


class ModuleAnalyzer:
    """Builds a ModuleInfo for one source file; `is_stripped` says which absolute modules are project ones."""

    def __init__(self, name: str, path: str, package: str, source: str, is_stripped: Callable[[str], bool]):
        self.name = name
        self.path = path
        self.package = package
        self.source = source
        self.is_stripped = is_stripped

    def analyze(self) -> ModuleInfo:
        tree = ast.parse(self.source)  # refuses pathological nesting before LibCST's native parser sees it
        # Freshly parsed: no copy needed. Parents come from one plain walk below: LibCST's batched
        # ParentNodeProvider costs more than the walk itself (it inspects every visitor method per module).
        wrapper = MetadataWrapper(cst.parse_module(self.source), unsafe_skip_copy=True)
        module = wrapper.module
        wrapper.resolve_many([BindingScopeProvider, PositionProvider])  # one pass for both
        scopes = wrapper.resolve(BindingScopeProvider)  # resolved above: read back, typed
        self.positions = wrapper.resolve(PositionProvider)
        walk = _Walk()
        module.visit(walk)
        self.parents = walk.parents
        self.owner = walk.owner
        nodes_of_stmt = walk.nodes_of_stmt
        stmts = [Statement(i, node, self.positions[node].start.line) for i, node in enumerate(module.body)]
        self.project_imports: dict[int, list[ProjectImport]] = {}  # id(Import node) -> names it binds
        dynamic = dynamic_imports(tree)
        for st in stmts:
            self._collect_imports(st, dynamic)
            self._classify(st)
        global_scope = next((s for s in set(scopes.values()) if isinstance(s, GlobalScope)), None)
        local_bindings: dict[str, list[int]] = {}
        alias_bindings: dict[str, list[ProjectImport]] = {}
        rebound: set[str] = set()
        star_imports: list[tuple[int, Optional[ProjectImport], str]] = []
        for st in stmts:
            for imp in st.imports:
                if imp.function_level:
                    continue
                if imp.kind == "star":
                    star_imports.append((st.index, imp, imp.module))
                elif imp.local:
                    alias_bindings.setdefault(imp.local, []).append(imp)
            if _import_kind(st.node):
                for small in st.node.body:
                    if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar) \
                            and id(small) not in self.project_imports:
                        module_name = dotted_name(small.module) if small.module is not None else None
                        star_imports.append((st.index, None, module_name or ""))
        if global_scope is not None:
            for assignment in global_scope.assignments:
                if "." in assignment.name or not isinstance(assignment, Assignment):
                    continue  # (a global scope holds Assignments only: builtins live in theirs)
                node = assignment.node
                if id(node) in self.project_imports:
                    continue  # recorded as an alias binding
                idx = self.owner.get(id(node))
                if idx is None:
                    continue
                st = stmts[idx]
                st.binds.add(assignment.name)
                if not isinstance(node, (cst.FunctionDef, cst.ClassDef)) and self._in_function(node):
                    rebound.add(assignment.name)
                if isinstance(node, (cst.Import, cst.ImportFrom)):
                    st.import_binds.add(assignment.name)
                if isinstance(node, cst.Name):
                    st.binding_nodes.append(node)
                elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                    st.binding_nodes.append(node.name)
                local_bindings.setdefault(assignment.name, [])
                if idx not in local_bindings[assignment.name]:
                    local_bindings[assignment.name].append(idx)
        mixed = {n for n, imps in alias_bindings.items()
                 if n in local_bindings or len({i.target for i in imps}) > 1}
        for name in sorted(mixed):
            for imp in alias_bindings.pop(name):
                idx = self.owner[id(imp.node)]
                stmts[idx].binds.add(name)
                local_bindings.setdefault(name, [])
                if idx not in local_bindings[name]:
                    local_bindings[name].append(idx)
        for lst in local_bindings.values():
            lst.sort()
        self._collect_refs(scopes, stmts)
        for st in stmts:
            st.refs.sort(key=lambda r: (r.line, r.col))
        all_names, _ = _static_all(tree)
        future = any(_is_future(s.node) and "annotations" in code_of(s.node) for s in stmts)
        return ModuleInfo(self.name, self.path, self.package, module, stmts, local_bindings, alias_bindings,
                          star_imports, all_names, mixed, frozenset(rebound), future, self.positions,
                          self.parents, nodes_of_stmt)

    # -- imports ---------------------------------------------------------------------------------------

    def _ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The nodes around `node`, innermost first."""
        cur = self.parents.get(node)
        while cur is not None:
            yield cur
            cur = self.parents.get(cur)

    def _in_function(self, node: cst.CSTNode) -> bool:
        return any(isinstance(cur, (cst.FunctionDef, cst.Lambda)) for cur in self._ancestors(node))

    def _collect_imports(self, st: Statement, dynamic: list[tuple[int, int, str]]) -> None:
        analyzer = self

        class Visitor(cst.CSTVisitor):
            def visit_Import(self, node: cst.Import) -> None:
                analyzer._import(st, node)

            def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
                analyzer._import_from(st, node)

            def visit_Expr(self, node: cst.Expr) -> None:
                analyzer._import_call(st, node)

        st.node.visit(Visitor())
        span = self.positions[st.node]
        handled = {(imp.line, imp.col) for imp in st.imports if isinstance(imp.node, cst.Expr)}
        st.dynamic_imports = [(line, col, arg) for line, col, arg in dynamic
                              if span.start.line <= line <= span.end.line and (line, col) not in handled]

    def _under_type_checking(self, node: cst.CSTNode) -> bool:
        return any(isinstance(cur, cst.If) and (dotted_name(cur.test) or "").split(".")[-1] == "TYPE_CHECKING"
                   for cur in self._ancestors(node))

    def _pos(self, node: cst.CSTNode) -> tuple[int, int]:
        p = self.positions[node].start
        return p.line, p.column + 1

    def _import(self, st: Statement, node: cst.Import) -> None:
        out = []
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            if not self.is_stripped(full):
                continue
            line, col = self._pos(node)
            fn = self._in_function(node)
            if alias.asname is not None:
                local = cst.ensure_type(alias.asname.name, cst.Name).value  # `import a as <Name>`
                out.append(ProjectImport(local, "module", full, None, node, line, col, fn))
            else:
                top = full.split(".")[0]
                out.append(ProjectImport(top, "module", top, None, node, line, col, fn))
                # `import a.b.c` also runs a.b and a.b.c: record what must execute, binding nothing new.
                parts = full.split(".")
                for i in range(2, len(parts) + 1):
                    out.append(ProjectImport("", "module", ".".join(parts[:i]), None, node, line, col, fn))
        if out:
            self._record(st, node, out)

    def _import_call(self, st: Statement, node: cst.Expr) -> None:
        """`importlib.import_module("pkg.mod")` (or `__import__`) as a statement of its own: an import run for
        its effects, with a constant absolute name, so it is inlined as `import pkg.mod` would be."""
        call = node.value
        if not isinstance(call, cst.Call) or len(call.args) != 1 or call.args[0].keyword is not None \
                or call.args[0].star:
            return
        fn = dotted_name(call.func) or ""
        arg = call.args[0].value
        if fn not in ("importlib.import_module", "import_module", "__import__") \
                or not isinstance(arg, cst.SimpleString) or not isinstance(arg.evaluated_value, str):
            return
        name = arg.evaluated_value
        if not name or name.startswith(".") or not self.is_stripped(name):
            return
        line, col = self._pos(call)
        self._record(st, node, [ProjectImport("", "module", name, None, node, line, col, self._in_function(node))])

    def _record(self, st: Statement, node: cst.CSTNode, out: list[ProjectImport]) -> None:
        tc = self._under_type_checking(node)
        for imp in out:
            imp.type_checking = tc
        self.project_imports[id(node)] = out
        st.imports.extend(out)

    def _import_from(self, st: Statement, node: cst.ImportFrom) -> None:
        level = len(node.relative)
        mod = dotted_name(node.module) if node.module is not None else ""
        if mod == "__future__":
            return
        line, col = self._pos(node)
        absolute = absolute_module(self.package, level, mod or "")
        if absolute is None:
            raise SyntaxError(f"{self.path}:{line}: relative import beyond the top-level package"
                              if self.name != "__main__" else
                              f"{self.path}:{line}: relative import in a script run directly")
        if not self.is_stripped(absolute):
            return
        fn = self._in_function(node)
        out = []
        if isinstance(node.names, cst.ImportStar):
            out.append(ProjectImport("*", "star", absolute, None, node, line, col, fn))
        else:
            for alias in node.names:
                name = alias.name.value if isinstance(alias.name, cst.Name) else dotted_name(alias.name) or ""
                local = cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname is not None else name
                out.append(ProjectImport(local, "attr", absolute, name, node, line, col, fn))
        self._record(st, node, out)

    # -- statement kinds ---------------------------------------------------------------------------------

    def _classify(self, st: Statement) -> None:
        node = st.node
        if _is_docstring(node):
            st.kind = "docstring"
        elif _is_future(node):
            st.kind = "future"
        elif is_main_guard(node):
            st.kind = "main-guard"
        elif _import_kind(node):
            st.kind = "import"
            st.public_import = all(id(s) not in self.project_imports for s in node.body)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            st.kind = "def"
            ids: set[int] = set()
            for deco in node.decorators:
                ids |= node_ids(deco)
            st.decorator_ids = frozenset(ids)
        elif isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 \
                and isinstance(node.body[0], (cst.Assign, cst.AnnAssign)):
            small = node.body[0]
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            if all(isinstance(t, cst.Name) for t in targets):
                st.kind = "assign"
                st.literal_value = small.value is not None and _is_literal(small.value)

    # -- references --------------------------------------------------------------------------------------

    def _collect_refs(self, scopes, stmts: list[Statement]) -> None:
        seen_strings: set[int] = set()
        for scope in sorted(set(scopes.values()), key=lambda s: id(s)):
            if isinstance(scope, BuiltinScope):
                continue
            for access in scope.accesses:
                node = access.node
                idx = self.owner.get(id(node))
                if idx is None:
                    continue
                st = stmts[idx]
                referents = list(access.referents)
                local = [r for r in referents if not isinstance(r.scope, (GlobalScope, BuiltinScope))]
                if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
                    if id(node) not in seen_strings:
                        seen_strings.add(id(node))
                        st.refs.extend(self._string_refs(node))
                    continue
                root = node
                while isinstance(root, cst.Attribute):
                    root = root.value
                if not isinstance(root, cst.Name):
                    continue
                local_import = None
                if local:
                    imports = [self._binding_import(r, root.value) for r in local]
                    if not any(imports):
                        continue  # an ordinary local variable
                    found = [i for i in imports if i is not None]
                    if len(found) == len(imports) and len({i.target for i in found}) == 1:
                        local_import = found[0]
                    else:
                        local_import = ProjectImport(root.value, "conflict", "", None, node, 0, 0, True)
                st.refs.append(self._ref(root.value, root, scope, local_import))

    def _binding_import(self, assignment, name: str) -> Optional[ProjectImport]:
        if not isinstance(assignment, ImportAssignment):
            return None
        for imp in self.project_imports.get(id(assignment.node), []):
            if imp.local == name and imp.kind != "star":
                return imp
        return None

    def _ref(self, name: str, root: cst.Name, scope, local_import=None) -> Ref:
        chain, chain_nodes = [], []
        cur: cst.CSTNode = root
        parent = self.parents.get(cur)
        while isinstance(parent, cst.Attribute) and parent.value is cur:
            chain.append(parent.attr.value)
            chain_nodes.append(parent)
            cur = parent
            parent = self.parents.get(cur)
        line, col = self._pos(root)
        store = chain_nodes[-1] if chain_nodes and self._is_store_target(chain_nodes[-1]) else None
        return Ref(name, root, tuple(chain), tuple(chain_nodes), line, col, local_import,
                   shadow_names=_enclosing_local_names(scope), store_node=store, scope_node=self._scope_of(root))

    def _is_store_target(self, node: cst.CSTNode) -> bool:
        """Whether `node` is what an assignment, augmented assignment, `del` or `for` stores into."""
        cur, parent = node, self.parents.get(node)
        while isinstance(parent, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
            cur, parent = parent, self.parents.get(parent)
        if isinstance(parent, cst.AssignTarget):
            return parent.target is cur
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
            return parent.target is cur
        if isinstance(parent, cst.Del):
            return parent.target is cur
        return False

    def _scope_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return next((cur for cur in self._ancestors(node) if isinstance(cur, (cst.FunctionDef, cst.ClassDef))), None)

    def _string_refs(self, node: cst.CSTNode) -> list[Ref]:
        """Names read by a string annotation such as "Config" or "Optional[cfg.Config]"."""
        value = node.evaluated_value if isinstance(node, cst.SimpleString) else None
        if not isinstance(value, str):
            return []
        try:
            expr = cst.parse_expression(value.strip())
        except Exception:
            return []
        line, col = self._pos(node)
        refs = []

        class Names(cst.CSTVisitor):
            def visit_Attribute(self, attr: cst.Attribute) -> bool:
                base: cst.BaseExpression = attr
                attrs: list[cst.Attribute] = []
                while isinstance(base, cst.Attribute):
                    attrs.append(base)
                    base = base.value
                if isinstance(base, cst.Name):
                    inner_first = tuple(reversed(attrs))
                    refs.append(Ref(base.value, node, tuple(a.attr.value for a in inner_first), inner_first,
                                    line, col, string_inner=base, string_expr=expr))
                    return False
                return True

            def visit_Name(self, name: cst.Name) -> None:
                refs.append(Ref(name.value, node, (), (), line, col, string_inner=name, string_expr=expr))

        expr.visit(Names())
        return refs


def _enclosing_local_names(scope) -> frozenset[str]:
    names: set[str] = set()
    while scope is not None and not isinstance(scope, (GlobalScope, BuiltinScope)):
        names.update(a.name for a in scope.assignments)
        scope = getattr(scope, "parent", None)
    return frozenset(names)

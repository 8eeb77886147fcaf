"""Which statements of the stripped packages the script needs, and in which order Python would run them.

A statement is needed when it binds a name a needed statement reads (transitively, starting from every
statement of the script). Module-level statements with side effects are kept too, so registries and other
import-time effects still happen: those that only change project state (a registry dict, a decorator that
records a class) are kept when that state is needed; those with effects outside the project (print,
logging setup, seeding) are kept whenever their module is imported.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import iter_scope_statements
from npu_port.transpiler.standalone.errors import Problem
from npu_port.transpiler.standalone.graph import ModuleInfo, ProjectImport, Ref, Statement, code_of, node_ids
from npu_port.transpiler.standalone.quiet import quiet_code
from npu_port.transpiler.standalone.symbols import (
    Builtin,
    Dunder,
    ModRef,
    ModuleLoadError,
    Project,
    PublicStar,
    Sym,
    Target,
    Unresolved,
)

SCRIPT = "__main__"
# Module attributes that point at the package's files: wrong, or missing, once the code is inlined.
LOCATION_DUNDERS = frozenset({"__file__", "__path__", "__spec__", "__loader__", "__cached__"})

StmtKey = tuple[str, int]


class Closure:
    def __init__(self, project: Project, script: ModuleInfo, stored_before: Optional[set[Sym]] = None):
        self.project = project
        self.stored_before = stored_before if stored_before is not None else set(project.stored)
        self.script = script
        self.included: set[StmtKey] = set()
        self.needed: set[Sym] = set()
        self.executed: list[str] = []
        self.targets: dict[int, tuple[Target, int]] = {}  # id(Ref) -> (target, attributes used)
        self.sym_refs: dict[Sym, list[Ref]] = {}
        # (problem, module, node at fault: None where the source has no node for it)
        self.problems: list[tuple[Problem, str, Optional[cst.CSTNode]]] = []
        self.builtins_used: set[str] = set()
        self.public_stars: set[StmtKey] = set()
        self.stores: dict[StmtKey, list[Ref]] = {}  # statement -> its stores into another module's global
        self._pending: dict[Sym, list[StmtKey]] = {}
        self.eager: set[str] = set()  # set by execution_order
        self._queue: deque[StmtKey] = deque()

    # -- driving ---------------------------------------------------------------------------------------

    def run(self) -> None:
        for st in self.script.statements:
            self._include((SCRIPT, st.index))
        while self._queue:
            self._process(*self._queue.popleft())

    def info(self, module: str) -> ModuleInfo:
        return self.project.module(module)

    def _include(self, key: StmtKey) -> None:
        if key not in self.included:
            self.included.add(key)
            self._queue.append(key)

    def _problem(self, module: str, node: Optional[cst.CSTNode], line: int, col: int, construct: str, reason: str,
                 hint: str = "") -> None:
        info = self.info(module)
        self.problems.append((Problem(info.path, line, col, construct, reason, hint), module, node))

    # -- one statement -----------------------------------------------------------------------------------

    def _process(self, module: str, index: int) -> None:
        info = self.info(module)
        st = info.statements[index]
        if module != SCRIPT and st.kind in ("docstring", "future", "main-guard"):
            return
        for ref in st.refs:
            self._use(module, st, ref)
        for imp in st.imports:
            if imp.function_level or module == SCRIPT:
                self._execute_import(module, imp)
            if self.becomes_assignment(module, imp):
                target = self.project.resolve_import(imp)
                if isinstance(target, ModRef):
                    self._module_rebound(module, imp, target)
                else:
                    self._depend(module, imp.node, imp.line, imp.col, _import_text(imp), target)
        for line, col, arg in st.dynamic_imports:
            pkg = self.names_stripped(arg)
            if pkg:
                call = _call_at(info, st, line, col)
                self._problem(module, call, line, col, code_of(call) if call is not None else arg,
                              f"dynamic import of the stripped package {pkg} cannot be resolved statically",
                              f"replace it with a plain `import` or `from {pkg}... import ...` statement; "
                              "a call with a constant name, as a statement of its own, is inlined as an import")

    def _module_rebound(self, module: str, imp: ProjectImport, target: ModRef) -> None:
        """`try: import pkg.fast as impl / except ImportError: impl = None`, or if/else imports of two
        modules under one name: the name would have to hold a module object, which is not inlined."""
        info = self.info(module)
        others: set[int] = set()
        for index in info.local_bindings.get(imp.local, []):
            st = info.statements[index]
            others |= {info.positions[n].start.line for n in st.binding_nodes if n.value == imp.local}
            others |= {i.line for i in st.imports if i.local == imp.local and i is not imp and not i.function_level}
        lines = sorted(others - {imp.line})
        where = f" (line {', '.join(map(str, lines))})" if lines else ""
        self._problem(module, imp.node, imp.line, imp.col, _import_text(imp),
                      f"binds {imp.local!r} to the module {target.module}, and {imp.local!r} is bound another "
                      f"way too{where}: a name that may hold a stripped module object cannot be inlined",
                      f"import the names you use instead (`from {target.module} import ...`) in every branch, "
                      f"or keep {target.module.split('.')[0]} out of --strip")

    def becomes_assignment(self, module: str, imp: ProjectImport) -> bool:
        """A module-level import whose name the module must hold on its own: rebound there too (mixed), or
        a copy of a global its module rebinds later."""
        if imp.function_level or imp.kind == "star" or not imp.local:
            return False
        info = self.info(module)
        return imp.local in info.mixed or self.project.snapshot_import(module, imp.local) is imp

    def names_stripped(self, arg_source: str) -> Optional[str]:
        """The stripped package a dynamic import's argument names by a literal prefix, if any."""
        text = arg_source.lstrip("rRbBuUfF")
        if text[:1] not in ("'", '"'):
            return None
        body = text.strip("'\"")
        for pkg in self.project.resolver.packages:
            if body == pkg or body.startswith(pkg + ".") or body.startswith(pkg + "'") or body.startswith(
                    pkg + '"'):
                return pkg
        return None

    def _use(self, module: str, st: Statement, ref: Ref) -> None:
        if ref.local_import is not None:
            if ref.local_import.kind == "conflict":
                self._problem(module, ref.node, ref.line, ref.col, ref.name,
                              "bound both by an import of a stripped package and by a local assignment in "
                              "the same function", "give the imported name its own local name")
                return
            target, used = self.project.resolve_import(ref.local_import), 0
            while isinstance(target, ModRef) and used < len(ref.chain):
                target = self.project.resolve_attr(target.module, ref.chain[used])
                used += 1
        else:
            target, used = self.project.resolve_chain(module, ref.name, ref.chain)
        self.targets[id(ref)] = (target, used)
        if isinstance(target, Sym) and used and used == len(ref.chain) and ref.store_node is ref.chain_nodes[-1]:
            self.stores.setdefault((module, st.index), []).append(ref)
            self.project.stored.add(target)
        text = ".".join((ref.name,) + ref.chain[:used]) if used else ref.name
        self._depend(module, ref.node, ref.line, ref.col, text, target, ref)

    def _depend(self, module: str, node, line: int, col: int, text: str, target: Target,
                ref: Optional[Ref] = None) -> None:
        if isinstance(target, Sym):
            if ref is not None:
                self.sym_refs.setdefault(target, []).append(ref)
            self._need(target)
        elif isinstance(target, ModRef):
            self._problem(module, node, line, col, text,
                          f"the module object {target.module} is used as a value, which cannot be inlined",
                          f"use its attributes ({text}.name) or import the names it needs")
        elif isinstance(target, Builtin):
            self.builtins_used.add(target.name)
        elif isinstance(target, Dunder):
            if module != SCRIPT and target.name in LOCATION_DUNDERS:
                self._problem(module, node, line, col, target.name,
                              f"refers to the location of {module}, which the standalone script does not have",
                              "pass the path in explicitly, or keep this module out of --strip")
        elif isinstance(target, PublicStar):
            self.public_stars.add((target.module, target.stmt))
        elif isinstance(target, Unresolved):
            self._problem(module, node, line, col, text, target.reason, target.hint)

    def _need(self, sym: Sym) -> None:
        if sym in self.needed:
            return
        self.needed.add(sym)
        if sym.module == SCRIPT:
            return
        info = self.info(sym.module)
        for index in info.local_bindings.get(sym.name, []):
            self._include((sym.module, index))
        snapshot = self.project.snapshot_import(sym.module, sym.name)
        if snapshot is not None and sym.name not in info.local_bindings:
            self._include((sym.module, statement_of_import(info, snapshot)))
        for key in self._pending.pop(sym, []):
            self._include(key)

    # -- module execution and side effects ---------------------------------------------------------------

    def _execute_import(self, module: str, imp: ProjectImport) -> None:
        if imp.type_checking:
            return
        self._execute(imp.module, module, imp)
        if imp.kind == "attr" and self.project.imports_submodule(imp.module, imp.imported_name):
            self._execute(f"{imp.module}.{imp.attr}", module, imp)

    def _execute(self, name: str, importer: str, imp: ProjectImport) -> None:
        if name in self.executed:
            return
        try:
            info = self.info(name)
        except ModuleLoadError as exc:
            self._problem(importer, imp.node, imp.line, imp.col, _import_text(imp), exc.reason, exc.hint)
            return
        parent = name.rpartition(".")[0]
        if parent:
            self._execute(parent, importer, imp)
            if name in self.executed:
                return  # the parent's __init__ imported it
        self.executed.append(name)
        for st in info.statements:
            for sub in st.imports:
                if not sub.function_level:
                    self._execute_import(name, sub)
            effect = self._effect(name, info, st)
            if effect is None:
                continue
            key = (name, st.index)
            if effect == "external" or effect & self.needed:
                self._include(key)
            else:
                for sym in effect:
                    self._pending.setdefault(sym, []).append(key)

    def _effect(self, module: str, info: ModuleInfo, st: Statement):
        """None (no effect kept), "external", or the set of project state the statement changes."""
        if st.kind == "assign":
            value = st.assigned_value
            if value is None or st.literal_value or quiet_code(value):
                return None
            return "external"  # `SEED = seed_everything(0)`: the call runs with its module, read or not
        if st.kind in ("docstring", "future", "main-guard", "import"):
            return None
        if st.kind == "def":
            if self.hooks_class_creation(module, st):
                return "external"  # registers itself through its base class: kept with its module
            if not st.decorator_ids:
                return None
            return self._reach(module, [r for r in st.refs if id(r.node) in st.decorator_ids]) or None
        if isinstance(st.node, cst.If) and (code_of(st.node.test).strip().split(".")[-1] == "TYPE_CHECKING"):
            return None
        touched: set[Sym] = set()
        for small in iter_scope_statements([st.node]):
            kind, roots = _small_effect(small)
            if kind is None:
                continue
            ids = node_ids(small)
            refs = [r for r in st.refs if id(r.node) in ids]
            root_syms = []
            for root in roots:
                ref = next((r for r in refs if r.node is root), None)
                target = self.project.resolve_chain(module, ref.name, ref.chain)[0] if ref else None
                if not isinstance(target, Sym) or self._public_object(target):
                    return "external"  # changes a public object (random.seed, os.environ[...]), prints...
                root_syms.append(target)
            reached = self._reach(module, refs)
            if kind == "mutation":
                reached |= set(root_syms)
            if not reached:
                return "external"
            touched |= reached
        return touched or None

    def hooks_class_creation(self, module: str, st: Statement) -> bool:
        """A class whose creation runs project code: a project metaclass, or a project base class (at any
        depth) with `__init_subclass__` or a project metaclass; the usual self-filling registry of plugins."""
        node = st.node
        if not isinstance(node, cst.ClassDef):
            return False
        return self._hooked(module, st, node, set())

    def _hooked(self, module: str, st: Statement, node: cst.ClassDef, seen: set[Sym]) -> bool:
        for arg in (*node.bases, *node.keywords):
            ids = node_ids(arg.value)
            for ref in (r for r in st.refs if id(r.node) in ids and r.local_import is None):
                target, _ = self.project.resolve_chain(module, ref.name, ref.chain)
                if not isinstance(target, Sym) or target in seen:
                    continue
                seen.add(target)
                if arg.keyword is not None and arg.keyword.value == "metaclass":
                    return True
                info = self.info(target.module)
                for index in info.local_bindings.get(target.name, []):
                    base = info.statements[index]
                    if not isinstance(base.node, cst.ClassDef):
                        continue
                    body = base.node.body.body if isinstance(base.node.body, cst.IndentedBlock) else ()
                    if any(isinstance(b, cst.FunctionDef) and b.name.value == "__init_subclass__" for b in body):
                        return True
                    if self._hooked(target.module, base, base.node, seen):
                        return True
        return False

    def _reach(self, module: str, refs: Iterable[Ref]) -> set[Sym]:
        """The project state (non-constant module-level values) these reads can reach through definitions."""
        state: set[Sym] = set()
        seen: set[Sym] = set()
        stack = [(module, r) for r in refs]
        while stack:
            mod, ref = stack.pop()
            if ref.local_import is not None:
                if ref.local_import.kind == "conflict":
                    continue
                target = self.project.resolve_import(ref.local_import)
            else:
                target, _ = self.project.resolve_chain(mod, ref.name, ref.chain)
            if not isinstance(target, Sym) or target in seen or target.module == SCRIPT:
                continue
            seen.add(target)
            info = self.info(target.module)
            if self._is_state(info, target):
                state.add(target)
            for index in info.local_bindings.get(target.name, []):
                stack.extend((target.module, r) for r in info.statements[index].refs)
        return state

    def _public_object(self, sym: Sym) -> bool:
        """Whether a module-level name holds something a public import bound (a module such as `random` or
        `logging`, a function such as `os.environ`): a call or store on it is seen outside the project."""
        info = self.info(sym.module)
        return any(sym.name in info.statements[i].import_binds for i in info.local_bindings.get(sym.name, []))

    @staticmethod
    def _is_state(info: ModuleInfo, sym: Sym) -> bool:
        for index in info.local_bindings.get(sym.name, []):
            st = info.statements[index]
            if st.kind == "other" or (st.kind == "assign" and not st.literal_value):
                return True
            if st.kind == "def" and isinstance(st.node, (cst.FunctionDef, cst.ClassDef)) \
                    and st.node.name.value != sym.name:
                return True  # assigned through `global` inside a function
        return False

    # -- order -------------------------------------------------------------------------------------------

    def execution_order(self) -> dict[StmtKey, int]:
        """Position of each statement in the order Python runs them, starting from the script's imports."""
        order: dict[StmtKey, int] = {}
        visited: set[str] = set()

        def visit(name: str) -> None:
            if name in visited:
                return
            parent = name.rpartition(".")[0]
            if parent:
                visit(parent)  # Python runs the parent package first; its __init__ may import `name` itself
                if name in visited:
                    return
            visited.add(name)
            try:
                info = self.info(name)
            except ModuleLoadError:
                return
            for st in info.statements:
                for imp in st.imports:
                    if not imp.function_level and not imp.type_checking:
                        visit(imp.module)
                        if imp.kind == "attr" and self.project.imports_submodule(imp.module, imp.imported_name):
                            visit(f"{imp.module}.{imp.attr}")
                order[(name, st.index)] = len(order)

        for index in leading_statements(self.script):
            for imp in self.script.statements[index].imports:
                if not imp.type_checking:
                    visit(imp.module)
                    if imp.kind == "attr" and self.project.submodule_exists(imp.module, imp.attr or ""):
                        visit(f"{imp.module}.{imp.attr}")
        # What the script's leading imports run: inlined at the top. The rest runs later (a function's import,
        # an import after other statements), if at all.
        self.eager = set(visited)
        for name in list(self.executed) + sorted({m for m, _ in self.included if m != SCRIPT}):
            visit(name)
        return order


def leading_statements(script: ModuleInfo) -> list[int]:
    """Indices of the script's docstring, __future__ imports and the import block right after them."""
    out = []
    for st in script.statements:
        if st.kind in ("docstring", "future", "import") and (st.kind != "docstring" or st.index == 0):
            out.append(st.index)
        else:
            break
    return out


def statement_of_import(info: ModuleInfo, imp: ProjectImport) -> int:
    return next(st.index for st in info.statements if any(i is imp for i in st.imports))


def _import_text(imp: ProjectImport) -> str:
    return code_of(imp.node).strip()


def _call_at(info: ModuleInfo, st: Statement, line: int, col: int) -> Optional[cst.CSTNode]:
    found = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            pos = info.positions[node].start
            if pos.line == line and pos.column + 1 == col:
                found.append(node)

    st.node.visit(Calls())
    return found[0] if found else None


def _target_roots(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [r for e in target.elements for r in _target_roots(e.value)]
    if isinstance(target, cst.StarredElement):
        return _target_roots(target.value)
    if isinstance(target, (cst.Subscript, cst.Attribute)):
        base = target.value
        while isinstance(base, (cst.Subscript, cst.Attribute, cst.Call)):
            base = base.func if isinstance(base, cst.Call) else base.value
        return [base] if isinstance(base, cst.Name) else []
    return []


def _small_effect(small: cst.CSTNode) -> tuple[Optional[str], list[cst.Name]]:
    """("call", roots) for a bare call, ("mutation", roots) for item/attribute stores and deletes."""
    if isinstance(small, cst.Expr):
        value = small.value
        if isinstance(value, cst.Await):
            value = value.expression
        if not isinstance(value, cst.Call):
            return None, []
        base = value.func
        while isinstance(base, (cst.Attribute, cst.Call, cst.Subscript)):
            base = base.func if isinstance(base, cst.Call) else base.value
        mutation = isinstance(value.func, cst.Attribute)  # REGISTRY.update(...), HOOKS.append(...)
        return ("mutation" if mutation else "call"), [base] if isinstance(base, cst.Name) else []
    if isinstance(small, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
        roots = [r for t in targets for r in _target_roots(t)]
        return ("mutation", roots) if roots else (None, [])
    if isinstance(small, cst.Del):
        roots = _target_roots(small.target) if not isinstance(small.target, cst.Name) else []
        return ("mutation", roots) if roots else (None, [])
    if isinstance(small, (cst.Raise, cst.Assert)):
        return "call", []
    return None, []

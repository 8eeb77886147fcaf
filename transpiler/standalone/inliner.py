"""Assembles the standalone script: header, public imports, inlined blocks in execution order, the script.

Names: the script keeps every name it defines; an inlined definition keeps its own name unless that name is
taken (by the script, a builtin the code uses, or an earlier inlined definition) or would be shadowed at a
use site, and is then renamed `<name>_<module>` (then `_2`, `_3`...), with every use rewritten.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, TypeVar, Union

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.core.files import ReadError, read_text, too_deep_for_this_process
from npu_port.transpiler.standalone.closure import SCRIPT, Closure, leading_statements
from npu_port.transpiler.standalone.errors import Problem, StandaloneError
from npu_port.transpiler.standalone.graph import (
    BodyStatement,
    ModuleAnalyzer,
    ModuleInfo,
    ProjectImport,
    Ref,
    Statement,
    code_of,
)
from npu_port.transpiler.standalone.lazy import LazyPlan
from npu_port.transpiler.standalone.renamed import NAMED_HELPER, restored
from npu_port.transpiler.standalone.resolver import SourceResolver
from npu_port.transpiler.standalone.symbols import Dunder, Project, Sym, display_path
from npu_port.transpiler.standalone.verify import verify_standalone


@dataclass
class StandaloneResult:
    code: str
    changed: bool
    modules: list[str] = field(default_factory=list)  # inlined modules, in order
    findings: list[Problem] = field(default_factory=list)  # problems downgraded by --allow-unresolved


@dataclass(frozen=True)
class _PublicImport:
    """One name a public top-level import binds, in a form that can be re-emitted under another name."""

    kind: str  # "import" (`import a.b` binding a), "import-as" (`import a.b as x`), "from"
    module: str
    attr: Optional[str]
    bound: str

    @property
    def identity(self) -> tuple:
        """What object the name holds: two imports with the same identity can share one name."""
        if self.kind == "import":
            return ("module", self.module.split(".")[0])
        if self.kind == "import-as":
            return ("module", self.module)
        return ("from", self.module, self.attr)


def make_standalone(script: Path, packages: Sequence[str], search_paths: Iterable[Path] = (),
                    allow_unresolved: bool = False, source: Optional[str] = None) -> StandaloneResult:
    """Inline everything `script` uses from `packages`. Raises StandaloneError (nothing to write) on problems."""
    script = Path(script)
    display = display_path(script)
    text = source if source is not None else _read_script(script, display)
    if too_deep_for_this_process(text.encode("utf-8")):
        raise StandaloneError([Problem(display, 1, 1, "script", "nested too deeply for the parser "
                                                                "(Python itself cannot compile it)")])
    roots = [script.resolve().parent, *search_paths, Path.cwd()]
    resolver = SourceResolver(roots, packages)
    try:
        info = ModuleAnalyzer(SCRIPT, display, "", text, resolver.is_stripped).analyze()
    except (SyntaxError, ValueError) as exc:  # NUL bytes: ValueError before Python 3.11.4, then SyntaxError
        line = getattr(exc, "lineno", None) or 1
        raise StandaloneError([Problem(display, line, 1, "script", f"cannot parse: {exc}")]) from None
    project = Project(resolver)
    project.add_script(info)
    closure = Closure(project, info)
    closure.run()
    while closure.project.stored - closure.stored_before:
        # A store into another module's global (`cfg.X = 1`) found late: its importers' copies are separate.
        closure = Closure(project, info, stored_before=set(project.stored))
        closure.run()
    problems = [p for p, _, _ in closure.problems]
    if problems and not allow_unresolved:
        raise StandaloneError(problems)
    if not any(st.imports for st in info.statements) and not problems:
        return StandaloneResult(text, False)
    code, modules = _Assembler(project, closure, info, allow_unresolved).assemble()
    verify_standalone(code, packages, display)
    return StandaloneResult(code, code != text, modules, sorted(set(problems)))


def _read_script(script: Path, display: str) -> str:
    """Like every input: a regular file within the size limit (a FIFO would hang, /dev/zero fill memory)."""
    try:
        return read_text(script)
    except ReadError as exc:
        raise StandaloneError([Problem(display, 1, 1, "script", f"cannot read: {exc}")]) from None


class _Assembler:
    def __init__(self, project: Project, closure: Closure, script: ModuleInfo, allow_unresolved: bool):
        self.project = project
        self.closure = closure
        self.script = script
        self.allow_unresolved = allow_unresolved
        self.order = closure.execution_order()
        self.keys = sorted((k for k in closure.included if k[0] != SCRIPT), key=lambda k: self.order[k])
        self.plan = LazyPlan(closure, closure.eager)
        self.final: dict[Sym, str] = {}
        self.loaders: dict[str, str] = {}  # deferred module -> its loader function
        self.generated_assigns: set[int] = set()  # ids of the assignments that replace imports

    # -- names -----------------------------------------------------------------------------------------

    def _public_entries(self, module: str, st: Statement) -> list[_PublicImport]:
        """The public names a kind "import" statement (a line of imports) binds."""
        out: list[_PublicImport] = []
        if not isinstance(st.node, cst.SimpleStatementLine):
            return out
        project = {id(imp.node) for imp in st.imports}
        for small in st.node.body:
            if id(small) in project:
                continue  # a stripped package's import: inlined, never hoisted
            if isinstance(small, cst.Import):
                for alias in small.names:
                    full = dotted_name(alias.name) or ""
                    if alias.asname is not None:
                        asname = cst.ensure_type(alias.asname.name, cst.Name).value  # `import a as <Name>`
                        out.append(_PublicImport("import-as", full, None, asname))
                    else:
                        out.append(_PublicImport("import", full, None, full.split(".")[0]))
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                mod = (dotted_name(small.module) or "") if small.module is not None else ""
                if mod == "__future__":
                    continue
                for alias in small.names:
                    name = cst.ensure_type(alias.name, cst.Name).value  # `from m import <Name>`
                    bound = cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname is not None else name
                    out.append(_PublicImport("from", mod, name, bound))
        return out

    def _leading_script_imports(self) -> list[int]:
        return leading_statements(self.script)

    def _allocate(self) -> None:
        taken = set(self.script.local_bindings) | self.closure.builtins_used | set(keyword.kwlist)
        taken |= {imp.local for st in self.script.statements for imp in st.imports
                  if self.closure.becomes_assignment(SCRIPT, imp)}
        for sym in self.closure.needed:
            if sym.module == SCRIPT:
                self.final[sym] = sym.name
        by_identity: dict[tuple, str] = {}
        for index in self._leading_script_imports():
            st = self.script.statements[index]
            if st.kind == "import":
                for entry in self._public_entries(SCRIPT, st):
                    by_identity.setdefault(entry.identity, entry.bound)
        self.public_plan: list[tuple[_PublicImport, str]] = []
        emitted_text: set[str] = set()
        for module, index in self.keys:
            info = self.project.module(module)
            st = info.statements[index]
            if st.kind != "import":
                continue
            for entry in self._public_entries(module, st):
                sym = Sym(module, entry.bound)
                if sym not in self.closure.needed or sym in self.final:
                    continue
                name = by_identity.get(entry.identity)
                if name is None or not self._fits(sym, name):
                    name = self._free_name(sym, entry.bound, taken, public=True)
                    if entry.kind == "import" and "." in entry.module and name != entry.bound:
                        name = entry.bound  # `import a.b` binds `a` and cannot be renamed; keep it
                    taken.add(name)
                    by_identity.setdefault(entry.identity, name)
                self.final[sym] = name
                text = f"{entry.kind}:{entry.module}:{entry.attr}:{name}"
                if text not in emitted_text and not self._script_has(entry, name):
                    emitted_text.add(text)
                    self.public_plan.append((entry, name))
        for module, index in self.keys:
            info = self.project.module(module)
            st = info.statements[index]
            names = set() if st.kind == "import" else set(st.binds)
            names |= {imp.local for imp in st.imports if self.closure.becomes_assignment(module, imp)}
            for name in sorted(names):
                sym = Sym(module, name)
                if sym in self.final:
                    continue
                self.final[sym] = self._free_name(sym, name, taken)
                taken.add(self.final[sym])
        deferred = self._deferred_modules()
        for module in deferred:
            self.loaders[module] = _free_plain(f"_import_{module.replace('.', '_')}", taken)
            taken.add(self.loaders[module])
        self.runtime: dict[str, str] = {}  # the helper's own names, as free in this script
        for name in ("_import_once", "_imported", "_import_lock", "_named"):
            self.runtime[name] = _free_plain(name, taken)
            taken.add(self.runtime[name])
        self.taken = taken  # for the temporaries of renamed definitions' decorators
        self.named_used = False  # whether a renamed def or class needs the helper that restores its name
        threading = _PublicImport("import", "threading", None, "threading")
        self.runtime["threading"] = by_identity.get(threading.identity) or _free_plain("threading", taken)
        if deferred and threading.identity not in by_identity:
            taken.add(self.runtime["threading"])
            self.public_plan.append((threading, self.runtime["threading"]))

    def _script_has(self, entry: _PublicImport, name: str) -> bool:
        for index in self._leading_script_imports():
            st = self.script.statements[index]
            if st.kind == "import" and any(e.identity == entry.identity and e.bound == name and e.kind == entry.kind
                                           and e.module == entry.module for e in self._public_entries(SCRIPT, st)):
                return True
        return False

    def _fits(self, sym: Sym, name: str) -> bool:
        """No use site of `sym` that reads it under another name has a local variable called `name`."""
        return all(name not in r.shadow_names for r in self.closure.sym_refs.get(sym, []) if r.name != name)

    def _free_name(self, sym: Sym, name: str, taken: set[str], public: bool = False) -> str:
        if name not in taken and self._fits(sym, name):
            return name
        stem = name if public else f"{name}_{sym.module.rsplit('.', 1)[-1]}"
        candidate, n = stem, 1
        while candidate in taken or not self._fits(sym, candidate) or candidate == name:
            n += 1
            candidate = f"{stem}_{n}"
        return candidate

    # -- rewriting -------------------------------------------------------------------------------------

    def _name_for(self, module: str, ref: Ref) -> tuple[Optional[cst.CSTNode], Optional[cst.CSTNode]]:
        """(node to replace, replacement) for one read, or (None, None) when it stays as written."""
        target, used = self.closure.targets.get(id(ref), (None, 0))
        if isinstance(target, Sym):
            new = self.final.get(target, target.name)
            if ref.string_inner is not None:
                node = ref.chain_nodes[used - 1] if used else ref.string_inner
            else:
                node = ref.chain_nodes[used - 1] if used else ref.node
            if used == 0 and new == ref.name:
                return None, None
            return node, cst.Name(new)
        if isinstance(target, Dunder) and module != SCRIPT and ref.string_inner is None:
            if target.name == "__name__":
                return ref.node, cst.SimpleString(repr(module))
            if target.name == "__package__":
                return ref.node, cst.SimpleString(repr(self.project.module(module).package))
        return None, None

    def _rewrite(self, module: str, st: Statement) -> list[BodyStatement]:
        """The statement as inlined: none (removed), itself rewritten, or the several a renamed definition becomes."""
        info = self.project.module(module)
        replace: dict[int, object] = {}
        strings: dict[int, dict[int, cst.CSTNode]] = {}
        string_exprs: dict[int, cst.BaseExpression] = {}
        for ref in st.refs:
            node, new = self._name_for(module, ref)
            if node is None or new is None:  # (both None, or neither)
                continue
            if ref.string_expr is not None:  # a name inside a string annotation (string_inner is set too)
                strings.setdefault(id(ref.node), {})[id(node)] = new
                string_exprs[id(ref.node)] = ref.string_expr
            else:
                replace[id(node)] = new
        for sid, inner in strings.items():
            # The annotation string itself (graph reads names out of SimpleStrings only).
            original = cst.ensure_type(next(r.node for r in st.refs if id(r.node) == sid), cst.SimpleString)
            expr = string_exprs[sid].visit(_Replace(inner))
            assert isinstance(expr, cst.BaseExpression)  # names swapped for names: still an expression
            replace[sid] = original.with_changes(
                value=f"{original.prefix}{original.quote}{code_of(expr)}{original.quote}")
        renames = {name: self.final[Sym(module, name)] for name in st.binds
                   if Sym(module, name) in self.final and self.final[Sym(module, name)] != name}
        restore: dict[int, tuple[str, str]] = {}  # id(def or class renamed) -> (new name, own name)
        for node in st.binding_nodes:
            if node.value in renames:
                replace[id(node)] = cst.Name(renames[node.value])
                owner = info.parents.get(node)
                if isinstance(owner, (cst.FunctionDef, cst.ClassDef)) and owner.name is node:
                    restore[id(owner)] = (renames[node.value], node.value)
                    self.named_used = True
        module_renames = {s.name: n for s, n in self.final.items() if s.module == module and s.name != n}
        for node in _global_names(st.node):
            if node.value in module_renames:
                replace[id(node)] = cst.Name(module_renames[node.value])
        self._rewrite_imports(module, info, st, replace, module_renames)
        if self.allow_unresolved:
            for problem, where, node in self.closure.problems:
                if where == module and node is not None and id(node) in info.nodes_of_stmt[st.index]:
                    site = _statement_of(info, node)
                    replace[id(site)] = _raise_for(problem, site)
        # `cfg.DEBUG = True` inside a function becomes `DEBUG = True`: declare it global there, so it stays a
        # store into the one state of that module.
        add_globals: dict[int, list[str]] = {}
        for ref in self.closure.stores.get((module, st.index), []):
            target, _ = self.closure.targets[id(ref)]
            name = self.final.get(target, target.name) if isinstance(target, Sym) else None
            if name and ref.scope_node is not None and name not in add_globals.setdefault(id(ref.scope_node), []):
                add_globals[id(ref.scope_node)].append(name)
        result = st.node.visit(_Replace(replace, add_globals, restore, self._restored))
        if isinstance(result, cst.RemovalSentinel):
            return []
        if isinstance(result, cst.FlattenSentinel):
            return list(result.nodes)
        return [result]

    def _restored(self, node, new: str, old: str) -> cst.FlattenSentinel:
        def temp() -> str:
            name = _free_plain(f"_{new}_decorator", self.taken)
            self.taken.add(name)
            return name

        return cst.FlattenSentinel(restored(node, new, old, self.runtime["_named"], temp))

    def _loaded_by(self, imports: Iterable[ProjectImport]) -> list[str]:
        """The deferred modules these imports run, in the order they run them."""
        names: list[str] = []
        for imp in imports:
            names.extend(m for m in self.plan.import_triggers(imp) if m not in names)
        # A package whose submodule's loader comes later needs no call of its own: that loader calls it.
        return [m for i, m in enumerate(names) if not any(n.startswith(m + ".") for n in names[i + 1:])]

    def _loader_calls(self, imports: Iterable[ProjectImport]) -> list[cst.BaseSmallStatement]:
        """`_import_pkg_mod()` for each deferred module these imports run, in the order they run them."""
        return [cst.Expr(cst.Call(cst.Name(self.loaders[m]))) for m in self._loaded_by(imports)]

    def _rewrite_imports(self, module: str, info: ModuleInfo, st: Statement, replace: dict,
                         module_renames: dict[str, str]) -> None:
        by_node: dict[int, list] = {}
        for imp in st.imports:
            by_node.setdefault(id(imp.node), []).append(imp)
        for imps in by_node.values():
            node = imps[0].node
            assigns: list[cst.BaseSmallStatement] = []
            for imp in imps:
                if self.closure.becomes_assignment(module, imp):
                    target = self.project.resolve_import(imp)
                    if isinstance(target, Sym):
                        local = self.final.get(Sym(module, imp.local), imp.local)
                        assign = cst.Assign([cst.AssignTarget(cst.Name(local))],
                                            cst.Name(self.final.get(target, target.name)))
                        self.generated_assigns.add(id(assign))
                        assigns.append(assign)
            calls = self._loader_calls(imps)  # none for an eager module
            keep = []
            if isinstance(node, cst.Import):
                project_full = {imp.module for imp in imps} | {
                    imp.module for imp in imps if imp.kind == "module"}
                keep = [a for a in node.names if (dotted_name(a.name) or "") not in project_full
                        and not self.project.resolver.is_stripped(dotted_name(a.name) or "")]
            pieces: list[cst.BaseSmallStatement] = []
            if keep:
                keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                pieces.append(node.with_changes(names=keep))
            pieces += calls + assigns
            if len(pieces) == 1 and keep:
                replace[id(node)] = pieces[0]
            elif pieces:
                replace[id(node)] = _Several(pieces)
            else:
                replace[id(node)] = cst.RemovalSentinel.REMOVE
        # Public imports nested in module-level blocks keep their place; rename what they bind if needed.
        if st.kind != "import":
            for small in _nested_imports(st.node):
                if id(small) in by_node or isinstance(small.names, cst.ImportStar):
                    continue
                names = []
                for alias in small.names:
                    bound = cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname is not None else (
                        alias.name.value if isinstance(alias.name, cst.Name) else None)
                    if bound in module_renames:
                        alias = alias.with_changes(asname=cst.AsName(cst.Name(module_renames[bound])))
                    names.append(alias)
                replace[id(small)] = small.with_changes(names=names)

    # -- assembly --------------------------------------------------------------------------------------

    def assemble(self) -> tuple[str, list[str]]:
        self._allocate()
        script = self.script
        leading = self._leading_script_imports()
        head: list[BodyStatement] = []
        after_body: list[cst.BaseSmallStatement] = []  # imports that became assignments need the inlined code
        for index in leading:
            for new in self._rewrite(SCRIPT, script.statements[index]):
                if isinstance(new, cst.SimpleStatementLine):
                    moved = [s for s in new.body if id(s) in self.generated_assigns]
                    after_body += moved
                    new = new.with_changes(body=[s for s in new.body if id(s) not in self.generated_assigns]) \
                        if moved else new
                    if not new.body:
                        continue
                head.append(new)
        if any(self.project.module(m).future_annotations for m, _ in self.keys) and not script.future_annotations:
            future = cst.parse_statement("from __future__ import annotations\n")
            at = 1 if head and script.statements[0].kind == "docstring" else 0
            if at:
                future = _with_blank_lines(future, 1)
                if len(head) > 1:
                    head[1] = _with_blank_lines(head[1], 1)
            head.insert(at, future)
        new_imports = self._header_imports()
        if new_imports and head and not _is_import_line(head[-1]):  # after the docstring, not after imports
            new_imports[0] = _with_blank_lines(new_imports[0], 1)
        head.extend(new_imports)

        body: list[BodyStatement] = []
        modules: list[str] = []
        previous = None
        for module, index in self.keys:
            if module in self.plan.deferred:
                continue
            info = self.project.module(module)
            st = info.statements[index]
            if st.kind == "import" and st.public_import:
                continue
            rewritten = self._rewrite(module, st)
            if not rewritten:
                continue
            new, *more = rewritten
            if module != previous:
                # A module's code is split where it imports a module that runs code of its own in between.
                again = module in modules
                new = _with_block_comment(new, f"# from {module}" + (", continued" if again else ""))
                if not again:
                    modules.append(module)
                previous = module
            body.append(new)
            body.extend(more)
        deferred = self._deferred_modules()
        if deferred:
            helper = cst.parse_module(_IMPORT_ONCE.format(**self.runtime)).body
            helper = [_with_block_comment(helper[0], _IMPORT_ONCE_COMMENT), *helper[1:]]
            body.extend(helper)
            for module in deferred:
                body.append(_with_block_comment(self._loader(module), f"# from {module} (runs where imported)"))
                modules.append(module)
        if self.named_used:
            helper = cst.parse_module(NAMED_HELPER.format(named=self.runtime["_named"])).body
            body[:0] = [_with_block_comment(helper[0], _NAMED_COMMENT), *helper[1:]]
        for key in sorted(self.closure.public_stars, key=lambda k: self.order.get(k, 0)):
            module, index = key
            star = self.project.module(module).statements[index].node
            head.append(star)

        rest: list[BodyStatement] = []
        if after_body:
            rest.append(cst.SimpleStatementLine(after_body))
        for st in script.statements:
            if st.index in leading:
                continue
            rest.extend(self._rewrite(SCRIPT, st))
        if rest and body:
            rest[0] = _with_blank_lines(rest[0], 2)
        if body and not head:
            body[0] = body[0].with_changes(leading_lines=_strip_blank(body[0].leading_lines))
        module_node = script.module.with_changes(body=head + body + rest)
        return module_node.code, modules

    def _deferred_modules(self) -> list[str]:
        """Deferred modules, in the order the original first runs them, each after its package's (whose
        loader its own names)."""
        first: list[str] = []
        for module, _ in self.keys:
            if module in self.plan.deferred and module not in first:
                first.append(module)
        for module in self.plan.lazy:  # deferred only to run the loaders of the modules it imports
            if module in self.plan.deferred and module not in first:
                first.append(module)
        out: list[str] = []

        def place(module: str) -> None:
            if module not in out:
                for parent in self.plan.parent_triggers(module):
                    place(parent)
                out.append(module)

        for module in first:
            place(module)
        return out

    def _loader(self, module: str) -> cst.FunctionDef:
        """`def _import_pkg_mod():` that runs the module's inlined code on its first call only."""
        info = self.project.module(module)
        body: list[BodyStatement] = []
        names: list[str] = []
        parents = [m for m in self.plan.parent_triggers(module)]
        ran = set(parents)  # loaders this one has surely called already: no need to call them again
        for st in info.statements:
            if (module, st.index) not in self.closure.included:
                imports = [i for i in st.imports if not i.function_level]
                calls = [c for c, m in zip(self._loader_calls(imports), self._loaded_by(imports)) if m not in ran]
                ran.update(self._loaded_by(imports))
                if calls:
                    body.append(cst.SimpleStatementLine(calls))
                continue
            if st.kind == "import" and st.public_import:
                continue
            rewritten = self._rewrite(module, st)
            if not rewritten:
                continue
            body.extend(rewritten)
            bound = set(st.binds) | {i.local for i in st.imports if self.closure.becomes_assignment(module, i)}
            names += [self.final[Sym(module, n)] for n in sorted(bound) if Sym(module, n) in self.final]
            for ref in self.closure.stores.get((module, st.index), []):
                target, _ = self.closure.targets[id(ref)]
                if ref.scope_node is None and isinstance(target, Sym):
                    names.append(self.final.get(target, target.name))
        args = ", ".join([f'"{module}"', *(self.loaders[p] for p in parents)])
        lines = [f"@{self.runtime['_import_once']}({args})", f"def {self.loaders[module]}():"]
        lines += [f"    global {line}" for line in _wrapped(list(dict.fromkeys(names)), 100)]
        # Parsed with a `pass` (a def with no body does not parse), dropped once the module's code follows.
        node = cst.parse_statement("\n".join([*lines, "    pass"]) + "\n")
        assert isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock)
        if body or names:
            node = node.with_changes(body=node.body.with_changes(body=node.body.body[:-1]))
        for i, stmt in enumerate(body):
            leading = _at_most_one_blank(stmt.leading_lines, first=i == 0)
            if i == 0 and isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                leading = [cst.EmptyLine(indent=False), *leading]  # a definition is set apart from the preamble
            body[i] = stmt.with_changes(leading_lines=leading)
        return node.with_changes(body=node.body.with_changes(body=[*node.body.body, *body]))

    def _header_imports(self) -> list[cst.SimpleStatementLine]:
        lines: list[cst.SimpleStatementLine] = []
        from_groups: dict[str, list[cst.ImportAlias]] = {}
        order: list[tuple[str, str]] = []
        for entry, name in self.public_plan:
            if entry.kind == "from" and entry.attr is not None:  # (a "from" entry always names its attr)
                if entry.module not in from_groups:
                    from_groups[entry.module] = []
                    order.append(("from", entry.module))
                asname = cst.AsName(cst.Name(name)) if name != entry.attr else None
                alias = cst.ImportAlias(cst.Name(entry.attr), asname=asname)
                if not any(code_of(a) == code_of(alias) for a in from_groups[entry.module]):
                    from_groups[entry.module].append(alias)
            else:
                text = f"import {entry.module}" + (f" as {name}" if entry.kind == "import-as" or
                                                   name != entry.bound else "")
                order.append(("import", text))
        for kind, value in order:
            if kind == "import":
                lines.append(cst.ensure_type(cst.parse_statement(value + "\n"), cst.SimpleStatementLine))
            else:
                aliases = from_groups[value]
                aliases = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in aliases]
                module = cst.parse_expression(value)
                assert isinstance(module, (cst.Attribute, cst.Name))  # a dotted module name
                lines.append(cst.SimpleStatementLine([cst.ImportFrom(module=module, names=aliases)]))
        return lines


_IMPORT_ONCE_COMMENT = ("# The original imports the modules below later (inside a function, or after other code): "
                       "each runs there, once.")
_IMPORT_ONCE = '''\
{_imported} = set()
{_import_lock} = {threading}.RLock()


def {_import_once}(module, *packages):
    """Run the decorated code of `module` on the first call only, after its packages, one at a time: what
    `import` does (a module whose code raised is run again by the next import)."""

    def wrap(run):
        def load():
            for package in packages:
                package()
            with {_import_lock}:
                if module in {_imported}:
                    return
                {_imported}.add(module)
                try:
                    run()
                except BaseException:
                    {_imported}.discard(module)
                    raise

        return load

    return wrap
'''


_NAMED_COMMENT = ("# Definitions renamed below to avoid a collision get their own names back (__name__, "
                  "__qualname__).")


class _Several:
    """A replacement of one small statement by several (an import that becomes assignments)."""

    def __init__(self, statements: list[cst.BaseSmallStatement]):
        self.statements = statements


class _Replace(cst.CSTTransformer):
    """Swaps nodes by identity; drops small statements marked for removal and keeps blocks non-empty."""

    def __init__(self, replace: Mapping[int, object], add_globals: Optional[dict[int, list[str]]] = None,
                 restore: Optional[dict[int, tuple[str, str]]] = None, restored=None):
        self.replace = replace
        self.add_globals = add_globals or {}
        self.restore = restore or {}
        self.restored = restored

    def on_leave(self, original_node, updated_node):
        names = self.add_globals.get(id(original_node))
        if names:
            updated_node = _with_global(updated_node, names)
        if id(original_node) in self.restore:
            return self.restored(updated_node, *self.restore[id(original_node)])
        rep = self.replace.get(id(original_node))
        if rep is not None:
            if isinstance(rep, _Several):
                return cst.FlattenSentinel(rep.statements)
            return rep
        if isinstance(updated_node, cst.SimpleStatementLine) and not updated_node.body:
            return cst.RemovalSentinel.REMOVE
        if isinstance(updated_node, cst.SimpleStatementSuite) and not updated_node.body:
            return updated_node.with_changes(body=[cst.Pass()])
        if isinstance(updated_node, cst.IndentedBlock):
            if not updated_node.body:
                return updated_node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
            if len(updated_node.body) < len(original_node.body):
                # A removed import opened the block: the blank line that followed it has nothing to separate.
                first = updated_node.body[0]
                body = [first.with_changes(leading_lines=_strip_blank(first.leading_lines)),
                        *updated_node.body[1:]]
                return updated_node.with_changes(body=body)
        return updated_node


def _with_global(node, names: list[str]):
    """A def or class whose body starts (after its docstring) with `global names`."""
    stmt = cst.Global([cst.NameItem(cst.Name(n)) for n in names])
    body = node.body
    if isinstance(body, cst.SimpleStatementSuite):
        return node.with_changes(body=body.with_changes(body=[stmt, *body.body]))
    at = 1 if body.body and _is_docstring_line(body.body[0]) else 0
    lines = list(body.body)
    lines.insert(at, cst.SimpleStatementLine([stmt]))
    return node.with_changes(body=body.with_changes(body=lines))


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _is_docstring_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 \
        and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, (cst.SimpleString,
                                                                                   cst.ConcatenatedString))


def _free_plain(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def _global_names(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Globals(cst.CSTVisitor):
        def visit_Global(self, g: cst.Global) -> None:
            found.extend(item.name for item in g.names)

    node.visit(Globals())
    return found


def _nested_imports(node: cst.CSTNode) -> list[Union[cst.Import, cst.ImportFrom]]:
    found: list[Union[cst.Import, cst.ImportFrom]] = []

    class Imports(cst.CSTVisitor):
        def visit_FunctionDef(self, _node) -> bool:
            return False

        def visit_ClassDef(self, _node) -> bool:
            return False

        def visit_Import(self, imp: cst.Import) -> None:
            found.append(imp)

        def visit_ImportFrom(self, imp: cst.ImportFrom) -> None:
            found.append(imp)

    node.visit(Imports())
    return found


def _statement_of(info: ModuleInfo, node: cst.CSTNode) -> cst.CSTNode:
    cur: Optional[cst.CSTNode] = node
    while cur is not None:
        if isinstance(cur, cst.BaseSmallStatement) or isinstance(cur, cst.BaseCompoundStatement):
            return cur
        cur = info.parents.get(cur)
    return node


def _raise_for(problem: Problem, site: cst.CSTNode):
    message = (f"npu-port standalone could not inline {problem.construct} "
               f"({problem.path}:{problem.line}): {problem.reason}")
    stmt = cst.Raise(exc=cst.Call(cst.Name("RuntimeError"), [cst.Arg(cst.SimpleString(repr(message)))]))
    if isinstance(site, cst.BaseSmallStatement):
        return stmt
    return cst.SimpleStatementLine([stmt], leading_lines=getattr(site, "leading_lines", ()))


def _wrapped(names: list[str], width: int) -> list[str]:
    """`a, b, c` split into lines of at most `width` characters (a `global` statement cannot wrap)."""
    lines: list[str] = []
    for name in names:
        if lines and len(lines[-1]) + len(name) + 2 <= width:
            lines[-1] += f", {name}"
        else:
            lines.append(name)
    return lines


def _at_most_one_blank(lines: Sequence[cst.EmptyLine], first: bool) -> list[cst.EmptyLine]:
    """Inside a loader: comments kept, runs of blank lines cut to one (none before the first statement)."""
    out: list[cst.EmptyLine] = []
    for line in lines:
        if line.comment is None and (not out and first or out and out[-1].comment is None):
            continue
        out.append(line if line.comment is not None else cst.EmptyLine(indent=False))
    return out


# What a statement-to-statement helper takes and gives back: the same kind of body statement.
_StatementT = TypeVar("_StatementT", cst.SimpleStatementLine, cst.BaseCompoundStatement, BodyStatement)


def _strip_blank(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    lines = list(lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return lines


def _with_blank_lines(stmt: _StatementT, count: int) -> _StatementT:
    lines = [cst.EmptyLine()] * count + _strip_blank(stmt.leading_lines)
    return stmt.with_changes(leading_lines=lines)


def _with_block_comment(stmt: _StatementT, comment: str) -> _StatementT:
    lines = [cst.EmptyLine(), cst.EmptyLine(), cst.EmptyLine(comment=cst.Comment(comment))]
    return stmt.with_changes(leading_lines=lines + _strip_blank(stmt.leading_lines))

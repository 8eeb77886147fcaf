"""unsupported-cuda-libs on Python's `ast` (core/ast_pass): the same findings, in the same order, for
files no rule rewrites. Each hook mirrors the LibCST rule's of the same name (codemods/unsupported_cuda_libs);
where `ast` spells a node otherwise (names as strings, no Decorator node) the comment says how."""

from __future__ import annotations

import ast
import io
import tokenize
from typing import Any, Optional

from npu_port.codemods._communicators import portable_communicator
from npu_port.codemods.unsupported_cuda_libs import (
    _DYNAMIC_IMPORTS,
    _IMPORT_GUARDS,
    CudaBuilds,
    LibraryRow,
    _use_message,
    cuda_builds,
    import_finding,
    import_row,
    is_launched_kernel,
    launch_message,
    match_library,
    use_finding,
)
from npu_port.transpiler.analysis.ast_source import (
    Decline,
    Position,
    argument_value,
    call_arguments,
    dotted,
    leftmost,
    position,
    scope_statements,
    single_string_token,
)
from npu_port.transpiler.core.rules import AstContext


class AstUnsupportedCudaLibraries:
    ID = "unsupported-cuda-libs"

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.source = ctx.source
        self._guarded: set[int] = set()
        self._decorated: set[int] = set()
        self._judged: set[int] = set()
        self._optional: set[str] = set()
        self._elsewhere: set[str] = set()
        self._kernels: set[str] = set()
        self._launches: list[tuple[ast.Call, str]] = []
        self._extensions: dict[str, str] = {}
        self._kernel_depth = 0
        self._decorator_depth = 0
        self._imports_triton = False
        self._imports: list[tuple[Position, LibraryRow, str, bool, str]] = []
        self._uses: list[tuple[Position, str, str, str, bool, str]] = []
        self._ported: set[str] = set()

    def _report(self, at: Position, message: str, severity: Any = "warning", hint: str = "") -> None:
        self.ctx.note_at(at[0], at[1], self.ID, message, severity=severity, hint=hint)

    def visit_Try(self, node: ast.Try) -> None:
        if not _catches_import_errors(node):
            return
        body = node.body
        smalls = body if not self.source.starts_line(body[0]) else scope_statements(self.source, body)
        self._guarded.update(id(s) for s in smalls if isinstance(s, (ast.Import, ast.ImportFrom)))

    # -- imports -------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            row = import_row(self.ctx.target, alias.name)
            self._bind(alias, alias.name, row, node)
            if row is not None:
                self._report_import(alias, node, row, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or node.module is None:
            return
        module = node.module
        if node.names[0].name == "*":
            row = import_row(self.ctx.target, module)
            if row is not None:
                self._report_import(None, node, row, f"from {module} import *")
            return
        seen: dict[LibraryRow, list[str]] = {}
        first: dict[LibraryRow, ast.alias] = {}
        for alias in node.names:
            name = alias.name
            row = import_row(self.ctx.target, f"{module}.{name}")
            if row is not None and portable_communicator(self.ctx.target, f"{module}.{name}", self.ctx.text):
                self._ported.add(_local_of(alias))
                continue
            self._bind(alias, f"{module}.{name}", row, node, from_import=True)
            if row is not None:
                seen.setdefault(row, []).append(name)
                first.setdefault(row, alias)
        for row, names in seen.items():
            self._report_import(first[row], node, row, f"from {module} import {', '.join(names)}")

    def _bind(self, alias: ast.alias, name: str, row: Optional[LibraryRow], stmt: ast.stmt,
              from_import: bool = False) -> None:
        if alias.asname is not None:
            local = alias.asname
        else:
            local = name.rsplit(".", 1)[-1] if from_import else name.split(".", 1)[0]
        if name.split(".", 1)[0] == "triton":
            self._imports_triton = True
        if row is None:
            self._elsewhere.add(local)
        elif id(stmt) in self._guarded:
            self._optional.add(local)

    def _report_import(self, at: Optional[ast.alias], stmt: ast.stmt, row: LibraryRow, text: str) -> None:
        local = _local_of(at) if at is not None else ""
        optional = id(stmt) in self._guarded or self.ctx.guard_of(stmt) is not None
        self._imports.append((position(at if at is not None else stmt), row, text, optional, local))

    # -- uses ----------------------------------------------------------------------------------
    def _report_use(self, node: ast.expr, message: str, hint: str, severity: str = "warning") -> None:
        target = node.func if isinstance(node, ast.Call) else node
        root = leftmost(target)
        local = root.id if root is not None else ""
        guarded = local in self._optional or self.ctx.guard_of(node) is not None
        self._uses.append((position(node), message, hint, local, guarded, severity))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if any(self._triton_decorator(d) for d in node.decorator_list):
            self._kernels.add(node.name)
            self._kernel_depth += 1

    def leave_FunctionDef(self, node: ast.FunctionDef) -> None:
        if any(self._triton_decorator(d) for d in node.decorator_list):
            self._kernel_depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # LibCST's FunctionDef is both
    leave_AsyncFunctionDef = leave_FunctionDef

    def _triton_decorator(self, expr: ast.expr) -> bool:
        name = self.ctx.resolve(expr.func if isinstance(expr, ast.Call) else expr)
        return name is not None and name.split(".", 1)[0] == "triton"

    # ast has no Decorator node: the walk calls these around each decorator expression, where LibCST
    # visits its Decorator, with the guard of the code around it (a Decorator is never a guard itself).
    def visit_decorator(self, expr: ast.expr) -> None:
        self._decorator_depth += 1
        target = expr.func if isinstance(expr, ast.Call) else expr
        self._judged.add(id(target))
        name = self.ctx.resolve(target)
        row = match_library(self.ctx.target, name) if name else None
        if row is not None and row.uses:
            self._decorated.add(id(expr))
            # A Decorator has no root name: only its guard makes the use optional.
            guarded = self.ctx.current_guard() is not None
            self._uses.append((self._at_sign(expr), f"{row.what}: `@{name}` does not work on Ascend NPU", row.hint,
                               "", guarded, row.severity))

    def leave_decorator(self, expr: ast.expr) -> None:
        self._decorator_depth -= 1

    def _at_sign(self, expr: ast.expr) -> Position:
        """Where the Decorator LibCST reports starts: its `@`, before the expression and any parentheses."""
        text = self.source.text
        i = self.source.start(expr)
        while i and text[i - 1] in " \t\f(":
            i -= 1
        if not i or text[i - 1] != "@":
            raise Decline("a decorator's @ not on its expression's line")
        line_start = text.rfind("\n", 0, i - 1) + 1
        return expr.lineno, len(text[line_start:i - 1].encode("utf-8"))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._judged.add(id(node.target))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._judged.add(id(node.target))

    def visit_Assign(self, node: ast.Assign) -> None:
        self._judged.update(id(t) for t in node.targets)
        value = node.value
        if not isinstance(value, ast.Call):
            return
        name = self.ctx.resolve(value.func)
        builds = cuda_builds(self.ctx.target)
        if name in builds.extension_loaders and self._builds_cuda(value, builds):
            for target in node.targets:
                name_of_target = dotted(target)
                if name_of_target is not None:
                    self._extensions[name_of_target] = name  # type: ignore[assignment]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if id(node) in self._judged or self.ctx.is_patched(node):
            self._judged.add(id(node.value))
            return
        self._judged.add(id(node.value))
        self._reference(node)

    def visit_Name(self, node: ast.Name) -> None:
        if id(node) not in self._judged:
            self._reference(node)

    def _reference(self, node: ast.expr) -> None:
        if self._kernel_depth or self.ctx.is_patched(node):
            return
        name = self.ctx.resolve(node)
        row = match_library(self.ctx.target, name) if name else None
        if row is not None and row.uses:
            self._report_use(node, _use_message(row, name, call=False), row.hint, row.severity)  # type: ignore[arg-type]

    def visit_Call(self, node: ast.Call) -> None:
        self._judged.add(id(node.func))
        if id(node) in self._decorated:
            return
        if isinstance(node.func, ast.Subscript):
            name = dotted(node.func.value)
            if name is not None:
                self._judged.add(id(node.func.value))
                self._launches.append((node, name))
            return
        extension = self._extension_call(node)
        if extension is not None:
            builds = cuda_builds(self.ctx.target)
            self._report_use(node, f"{builds.what}: `{dotted(node.func)}(...)` calls into the CUDA "
                                   f"extension built by `{extension}(...)`", builds.hint)
            return
        name = self.ctx.resolve(node.func)
        if name is None and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            name = "__import__"
        if name is None:
            return
        row = match_library(self.ctx.target, name)
        if row is not None and row.uses:
            if not self._kernel_depth or (self._decorator_depth and row.severity == "info"):
                self._report_use(node, _use_message(row, name, call=True), row.hint, row.severity)
            return
        arguments = _arguments(node)
        if name in _DYNAMIC_IMPORTS and arguments:
            first = arguments[0]
            if self.source.string_token(first) is None:
                return
            module = first.value  # type: ignore[attr-defined]
            row = match_library(self.ctx.target, module) if isinstance(module, str) else None
            if row is not None:
                self._report(position(node), f"{row.what}: `{name}({module!r})` does not work on Ascend NPU", hint=row.hint)
            return
        builds = cuda_builds(self.ctx.target)
        if name in builds.callables and self._builds_cuda(node, builds):
            self._report(position(node), f"{builds.what}: `{name}(...)` compiles CUDA code", hint=builds.hint)

    def _extension_call(self, node: ast.Call) -> Optional[str]:
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = dotted(func.value)
            if owner is not None and owner in self._extensions:
                return self._extensions[owner]
        return None

    def finalize(self) -> None:
        if self._launches:
            row = match_library(self.ctx.target, "triton.jit")
            triton_file = self._imports_triton or bool(self._kernels)
            for node, name in self._launches:
                if is_launched_kernel(name, self._kernels, triton_file):
                    self._report_use(node, launch_message(name), row.hint if row is not None else "")
        for at, row, text, optional, local in self._imports:
            message, severity = import_finding(row, text, local, optional, self._elsewhere)
            self._report(at, message, severity, row.hint)
        for at, message, hint, local, guarded, severity in self._uses:
            found = use_finding(message, local, guarded, severity, self._ported, self._elsewhere)
            if found is not None:
                self._report(at, found[0], found[1], hint)

    def _builds_cuda(self, node: ast.Call, builds: CudaBuilds) -> bool:
        for keyword in node.keywords:
            if keyword.arg is not None and keyword.arg in builds.keywords:
                value = keyword.value
                if not (isinstance(value, ast.Constant) and (value.value is None or value.value is False)):
                    return True
        return any(s.endswith(builds.suffixes) for arg in _arguments(node) for s in self._strings_in(arg))

    def _strings_in(self, node: ast.AST):
        """unsupported_cuda_libs._strings_in: each literal as LibCST reads it (glued literals one by one)."""
        if isinstance(node, ast.JoinedStr):
            text = self.source.segment(node)
            if "\\" in text or "{{" in text or "}}" in text or not single_string_token(text):
                raise Decline("an f-string LibCST reads part by part")
            yield "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            if self.source.string_token(node) is not None:
                if isinstance(node.value, str):
                    yield node.value
                return
            for token in _string_tokens(self.source.segment(node)):
                value = ast.literal_eval(token)
                if isinstance(value, str):
                    yield value
            return
        for child in ast.iter_child_nodes(node):
            yield from self._strings_in(child)


def _string_tokens(text: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.STRING]
    except (tokenize.TokenError, SyntaxError):
        raise Decline("glued string literals that do not tokenize alone") from None


def _arguments(node: ast.Call) -> list[ast.expr]:
    """A call's argument values in source order, as LibCST's `args` lists them (keywords among them)."""
    return [argument_value(a) for a in call_arguments(node)]


def _local_of(alias: ast.alias) -> str:
    if alias.asname is not None:
        return alias.asname
    return alias.name.rsplit(".", 1)[-1]


def _catches_import_errors(node: ast.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for t in types:
            if (dotted(t) or "").rsplit(".", 1)[-1] in _IMPORT_GUARDS:
                return True
    return False

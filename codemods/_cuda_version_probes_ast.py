"""cuda-version-probes on Python's `ast` (core/ast_pass): the same findings, in the same order, for files no
rule rewrites. Each hook mirrors the LibCST rule's of the same name (codemods/cuda_version_probes). Where
LibCST has a Name node and `ast` a string (a def's or parameter's name, a keyword, an import's `as` name)
the LibCST rule may read a probe the twin cannot place: such a file is declined."""

from __future__ import annotations

import ast
from typing import Any, Optional

from npu_port.codemods.cuda_version_probes import (
    _ENV_READERS,
    _OUTPUT_CALLS,
    _RUNNERS,
    CudaVersionProbes,
    probes,
)
from npu_port.transpiler.analysis.ast_source import Decline, argument_value, call_arguments, plain_string
from npu_port.transpiler.core.rules import AstContext


class AstCudaVersionProbes:
    ID = CudaVersionProbes.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.source = ctx.source
        self._table = probes(ctx.target)
        self._capability_names: set[str] = set()
        self._property_names: set[str] = set()
        self._judged: set[int] = set()
        self._shown = 0

    def _report(self, node: ast.AST, what: str, hint: str) -> None:
        self.ctx.note_at(node.lineno, node.col_offset, self.ID, what, hint=hint)  # type: ignore[attr-defined]

    def _string(self, node: ast.AST) -> Optional[str]:
        """cuda_version_probes._string: one string literal (LibCST's SimpleString), not bytes."""
        return plain_string(self.source, node)

    # -- names ast holds as strings --------------------------------------------------------------
    def _named(self, name: Optional[str]) -> None:
        if name is not None and self.ctx.imports.resolve_dotted(name) in self._table.reads:
            raise Decline("a probe's name where ast has no node")

    def visit_FunctionDef(self, node: Any) -> None:
        self._named(node.name)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_arg(self, node: ast.arg) -> None:
        self._named(node.arg)

    def visit_keyword(self, node: ast.keyword) -> None:
        self._named(node.arg)

    def visit_alias(self, node: ast.alias) -> None:
        self._named(node.asname)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self._named(node.name)

    def visit_Global(self, node: Any) -> None:
        for name in node.names:
            self._named(name)

    visit_Nonlocal = visit_Global

    def visit_MatchAs(self, node: Any) -> None:
        self._named(node.name)

    visit_MatchStar = visit_MatchAs

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self._named(node.rest)

    # -- reads and calls ------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._read(node)

    def visit_Name(self, node: ast.Name) -> None:
        self._read(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._shown += 1

    def leave_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._shown -= 1

    def leave_Call(self, node: ast.Call) -> None:
        if _is_output(node):
            self._shown -= 1

    def _read(self, node: ast.AST) -> None:
        if id(node) in self._judged or self.ctx.is_patched(node) or self._shown:
            return
        name = self.ctx.resolve(node)
        if name in self._table.reads:
            what, hint = self._table.reads[name]
            self._report(node, what, hint)

    def visit_Call(self, node: ast.Call) -> None:
        if _is_output(node):
            self._shown += 1
        name = self.ctx.resolve(node.func)
        arguments = call_arguments(node)
        if name in self._table.calls and not self._shown:
            what, hint = self._table.calls[name]
            self._report(node, what, hint)
        elif name in _ENV_READERS and arguments:
            self._env(node, self._string(argument_value(arguments[0])))
        elif name in _RUNNERS and arguments:
            self._runs(node, argument_value(arguments[0]))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if id(node) in self._judged:
            return
        index = node.slice
        if isinstance(index, ast.Slice) or isinstance(index, ast.Tuple) and not self._parenthesized(index):
            return  # LibCST: a slice, or several subscript elements
        if self.ctx.resolve(node.value) == "os.environ":
            self._env(node, self._string(index))

    def _parenthesized(self, node: ast.Tuple) -> bool:
        return self.source.text.startswith("(", self.source.start(node))

    def _env(self, node: ast.AST, variable: Optional[str]) -> None:
        if variable in self._table.env:
            what, hint = self._table.env_text
            self._report(node, f"${variable}: {what}", hint)

    def _runs(self, node: ast.Call, command: ast.AST) -> None:
        first: Optional[str] = None
        if isinstance(command, (ast.List, ast.Tuple)) and command.elts:
            first = self._string(argument_value(command.elts[0]))
        else:
            text = self._string(command)
            first = text.split()[0] if text and text.split() else None
        program = first.rsplit("/", 1)[-1] if first else None
        if program in self._table.programs:
            self._report(node, f"runs `{program}`, a CUDA toolkit program an Ascend host does not have",
                         self._table.program_hint)

    # -- the compute capability compared with SM numbers -------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        self._judged.update(id(t) for t in node.targets)
        value = node.value
        if not isinstance(value, ast.Call):
            return
        name = self.ctx.resolve(value.func)
        if name in self._table.capability_calls:
            names = self._capability_names
        elif name in self._table.property_calls:
            names = self._property_names
        else:
            return
        for target in node.targets:
            for e in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                inner = argument_value(e)  # `a, *rest = ...`: LibCST's starred element holds the Name
                if isinstance(inner, ast.Name):
                    names.add(inner.id)

    def _is_capability(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            return self.ctx.resolve(node.func) in self._table.capability_calls
        if isinstance(node, ast.Name):
            return node.id in self._capability_names
        if isinstance(node, ast.Tuple):
            return bool(node.elts) and all(self._is_capability(argument_value(e)) for e in node.elts)
        if isinstance(node, ast.Subscript):
            return self._is_capability(node.value)
        if isinstance(node, ast.Attribute) and node.attr in self._table.fields:
            owner = node.value
            if isinstance(owner, ast.Call):
                return self.ctx.resolve(owner.func) in self._table.property_calls
            return isinstance(owner, ast.Name) and owner.id in self._property_names
        return False

    def visit_Compare(self, node: ast.Compare) -> None:
        sides = [node.left, *node.comparators]
        if any(self._is_capability(s) for s in sides) and any(_is_number(s) for s in sides):
            what, hint = self._table.capability
            self._report(node, f"{what}; an Ascend NPU has no SM number", hint)


def _is_output(node: ast.Call) -> bool:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in _OUTPUT_CALLS


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(_is_number(argument_value(e)) for e in node.elts)
    return False

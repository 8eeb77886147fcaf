"""profiler-npu on Python's `ast` (core/ast_pass), for the files it leaves unchanged: profiler code in
device dispatch, in a file that picks the NPU at run time, or that uses what torch_npu lacks. The same
findings, in the same order; it declines where the rule would move a name or rename an activity. Each
hook mirrors the LibCST rule's of the same name (codemods/profiler_npu)."""

from __future__ import annotations

import ast

from npu_port.codemods.profiler_npu import (
    ACTIVITY,
    CUDA_KEYWORD,
    MISSING_METHOD,
    REPORTED,
    ProfilerToNpu,
    profiler_table,
)
from npu_port.transpiler.analysis.ast_source import Decline, FStringDepth, Position
from npu_port.transpiler.analysis.dispatch import NEEDS_TORCH_NPU
from npu_port.transpiler.core.rules import TORCH_NPU_WORD, AstContext


class AstProfilerToNpu(FStringDepth):
    ID = ProfilerToNpu.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.table = profiler_table(ctx.target)
        self.profile_moved = False
        self._method_uses: list[tuple[ast.Attribute, bool]] = []  # (use, inside an f-string)

    def _at(self, node: ast.AST, in_fstring: bool = False) -> Position:
        if in_fstring or self._fstrings:
            raise Decline("a position ast gives otherwise")  # Python 3.11 places f-string parts otherwise
        return node.lineno, node.col_offset  # type: ignore[attr-defined]

    def _report(self, node: ast.AST, message: str, hint: str, in_fstring: bool = False) -> None:
        self.ctx.note_at(*self._at(node, in_fstring), self.ID, message, hint=hint)

    def _rewrite(self, node: ast.Attribute, new: str = "") -> None:
        """PythonRule.rewrite to code that names torch_npu (`new`) or not (""): the note of a use left as
        it is, or a decline where the rule changes it."""
        self._at(node)
        if self.ctx.left_as_is(node, self.ID):
            return
        shapes = self.ctx.dispatch.shapes if self.ctx.dispatch is not None else None
        if shapes is not None and shapes.selects_npu and TORCH_NPU_WORD.search(new) is not None \
                and not self.ctx.source.search_code(TORCH_NPU_WORD, node):
            self.ctx.note_at(*self._at(node), self.ID, f"left as is: {NEEDS_TORCH_NPU.reason}",
                             severity=NEEDS_TORCH_NPU.severity)
            return
        raise Decline("a profiler name moved to torch_npu")

    # -- imports: _split_one ------------------------------------------------------------------
    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or node.module != self.table.cuda_module or any(a.name == "*" for a in node.names):
            return
        if any(a.name in self.table.move for a in node.names):
            raise Decline("a torch.profiler import split")

    # -- uses ---------------------------------------------------------------------------------
    def leave_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr in self.table.missing_methods:
            self._method_uses.append((node, self._fstrings > 0))
            return
        owner = self.ctx.resolve(node.value)
        if owner is None:
            return
        if owner == self.table.cuda_module and attr in self.table.move:
            if attr == "profile":
                self.profile_moved = True
            self._rewrite(node, f"{self.table.npu_module}.{attr}")
            return
        if owner in (f"{self.table.cuda_module}.ProfilerActivity", f"{self.table.npu_module}.ProfilerActivity"):
            self._activity(node, attr)
            return
        if f"{owner}.{attr}" in self.table.reported:
            self._report(node, REPORTED.format(f"{owner}.{attr}"),
                         self.table.reported[f"{owner}.{attr}"])

    def _activity(self, node: ast.Attribute, member: str) -> None:
        if member in self.table.activity_renames:
            self._rewrite(node)  # the member renamed: names torch_npu only where the code did already
            return
        if member not in self.table.activity_members and not member.startswith("_"):
            self._report(node, ACTIVITY.format(member), self.table.activity_hint)

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.ctx.resolve(node.func)
        if callee not in self.table.cuda_keyword_callables:
            return
        for keyword in node.keywords:  # LibCST reads every argument in order; only keywords are reported
            if keyword.arg in self.table.cuda_keywords:
                self._report(keyword, CUDA_KEYWORD.format(keyword.arg, callee),
                             self.table.cuda_keyword_hint)

    def finalize(self) -> None:
        if self.profile_moved:
            for node, in_fstring in self._method_uses:
                self._report(node, MISSING_METHOD.format(node.attr),
                             self.table.missing_method_hint, in_fstring)

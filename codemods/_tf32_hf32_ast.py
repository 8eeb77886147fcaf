"""tf32-hf32 on Python's `ast` (core/ast_pass), for a file it leaves unchanged: the LibCST rule's findings
(codemods/tf32_hf32) where no TF32 switch is renamed (cuDNN and other backend settings that stay, a
rename this file cannot spell, one the code patches or picks by device). Where the rule would rename a
switch the twin declines and the file takes the LibCST path. `ast` has no node for an import's names,
which the rule skips."""

from __future__ import annotations

import ast

from npu_port.codemods.tf32_hf32 import _PREFIXES, TF32ToHF32, lookup_backend
from npu_port.transpiler.analysis.ast_source import Decline, dotted
from npu_port.transpiler.core.rules import AstContext


class AstTF32ToHF32:
    ID = TF32ToHF32.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self._inner: set[int] = set()

    def _report(self, node: ast.AST, message: str, *, severity="warning", hint: str = "", fix: str = "") -> None:
        self.ctx.note_at(node.lineno, node.col_offset, self.ID, message, severity=severity,  # type: ignore[attr-defined]
                         hint=hint, fix=fix)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Attribute):
            self._inner.add(id(node.value))

    def leave_Attribute(self, node: ast.Attribute) -> None:
        if id(node) in self._inner:
            return
        name = self.ctx.resolve(node)
        if name is None or not name.startswith(_PREFIXES):
            return
        row = lookup_backend(self.ctx.target, name)
        if row is None:
            return
        if row.status == "keep":
            self._report(node, f"`{name}` is left as is", severity="info", hint=row.hint)
        elif row.status == "unsupported":
            self._report(node, f"`{name}` has no Ascend NPU equivalent; left as is", hint=row.hint)
        elif row.status == "rename":
            if TF32ToHF32.torch_name(self.ctx.imports, dotted(node) or "") is None:
                self._report(node, f"`{name}` has an NPU equivalent, but `torch` is not imported here",
                             hint=f"import torch and use {row.npu}", fix=row.npu)
            elif not self.ctx.left_as_is(node, self.ID):
                raise Decline("a TF32 switch renamed")

    def leave_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if not (isinstance(value, ast.Constant) and type(value.value) is int):
            return
        text = self.ctx.source.segment(value)
        if not text[:1].isdigit():
            raise Decline("an integer LibCST reads otherwise")
        for target in node.targets:
            name = self.ctx.resolve(target) if isinstance(target, ast.Attribute) else None
            row = lookup_backend(self.ctx.target, name) if name else None
            if row is not None and row.status == "rename":
                self._report(value, f"{row.npu} accepts only a bool", hint="assign True or False",
                             fix="True" if text != "0" else "False")

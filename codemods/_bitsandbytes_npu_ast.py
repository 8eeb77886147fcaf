"""bitsandbytes-npu on Python's `ast` (core/ast_pass), for a file it leaves unchanged: the LibCST rule's
reports (codemods/bitsandbytes_npu) on each BitsAndBytesConfig call where double quantisation is not set
to True (absent, False, an expression). Where it is, the rule turns it off (or leaves it in device
dispatch, which is rare and not mirrored): the twin declines and the file takes the LibCST path."""

from __future__ import annotations

import ast
import re
from typing import Any, Optional

from npu_port.codemods.bitsandbytes_npu import BitsAndBytesNpu, table
from npu_port.transpiler.analysis.ast_source import Decline
from npu_port.transpiler.core.rules import AstContext

_NPU = re.compile("npu")


class AstBitsAndBytesNpu:
    ID = BitsAndBytesNpu.ID

    def __init__(self, ctx: AstContext):
        # A file that sets double quantisation to True nearly always has it turned off, at its config's call
        # (a leave hook, after the walk of all in it): declined at once, not after most of the walk.
        keyword = re.escape(table(ctx.target)["python"]["double_quant"]["keyword"])
        if re.search(rf"{keyword}\s*=[\s(]*True", ctx.text):
            raise Decline("double quantisation set to True")
        self.ctx = ctx

    def _report(self, node: Any, message: str, *, severity="warning", hint: str = "") -> None:
        self.ctx.note_at(node.lineno, node.col_offset, self.ID, message, severity=severity, hint=hint)

    def _string(self, node: ast.expr) -> Optional[str]:
        """literals.string_value: one plain string literal (not bytes, not an f-string)."""
        value = node.value if self.ctx.source.string_token(node) is not None else None  # type: ignore[attr-defined]
        return value if isinstance(value, str) else None

    def leave_Call(self, node: ast.Call) -> None:
        rows = table(self.ctx.target)["python"]
        if self.ctx.resolve(node.func) not in rows["config_classes"]:
            return
        hint = table(self.ctx.target)["backend_hint"]
        eight = _keyword(node, rows["load_in_8bit"]["keyword"])
        if eight is not None and _bool(eight.value) is True:
            self._report(eight, BitsAndBytesNpu.EIGHT_BIT, hint=BitsAndBytesNpu.eight_bit_hint(hint))
        four = _keyword(node, "load_in_4bit")
        if four is not None and _bool(four.value) is not False:
            self._quant_type(node, rows["quant_type"], hint)
        self._double_quant(node, rows["double_quant"], hint)

    def _quant_type(self, call: ast.Call, row: dict[str, Any], hint: str) -> None:
        arg = _keyword(call, row["keyword"])
        value = self._string(arg.value) if arg is not None else None
        found = BitsAndBytesNpu.quant_type_report(row, hint, arg is not None, value, _has_star_args(call))
        if found is not None:
            message, severity, report_hint = found
            self._report(arg if arg is not None else call, message, severity=severity, hint=report_hint)

    def _double_quant(self, call: ast.Call, row: dict[str, Any], hint: str) -> None:
        name = row["keyword"]
        arg = _keyword(call, name)
        if arg is None:
            return
        flag = _bool(arg.value)
        if flag is None and self.ctx.source.search_code(_NPU, arg.value):
            return
        if flag is None:
            message, info_hint = BitsAndBytesNpu.double_quant_info(name, row, hint)
            self._report(arg, message, severity="info", hint=info_hint)
            return
        if flag is True:
            raise Decline("double quantisation turned off")  # (or left in device dispatch: rare, not mirrored)


def _keyword(call: ast.Call, name: str) -> Optional[ast.keyword]:
    return next((k for k in call.keywords if k.arg == name), None)


def _has_star_args(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def _bool(node: ast.expr) -> Optional[bool]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, bool) else None

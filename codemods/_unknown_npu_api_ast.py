"""unknown-npu-api on Python's `ast` (core/ast_pass): the same findings, in the same order, for files no
rule rewrites (`check` of a port: most files that name torch_npu). Each hook mirrors the LibCST rule's of
the same name (codemods/check_npu_api); `ast` has no node for the names of an import statement, so those
are placed from the statement's text."""

from __future__ import annotations

import ast
import re
from typing import Optional

from npu_port.codemods.check_npu_api import (
    _OP_LIBRARY_LOADERS,
    _is_npu_name,
    judged_missing,
    missing_message,
    missing_op_message,
)
from npu_port.transpiler.analysis.ast_source import Decline, Position, position
from npu_port.transpiler.core.rules import AstContext

_FROM = re.compile(r"from[ \t\f]+(?=\w)")


class AstUnknownNpuApi:
    ID = "unknown-npu-api"

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self._inner: set[int] = set()
        self._missing_ops: list[tuple[Position, str]] = []
        self._loads_op_library: Optional[str] = None

    def _judge(self, at: Position, qualified: Optional[str]) -> None:
        missing = judged_missing(qualified)
        if missing is None:
            return
        module, name = missing
        if module == "torch_npu":
            self._missing_ops.append((at, name))
            return
        message, hint = missing_message(module, name, qualified or "")
        self.ctx.note_at(*at, self.ID, message, severity="error", hint=hint)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.ctx.resolve(node.func)
        if name in _OP_LIBRARY_LOADERS and self._loads_op_library is None:
            self._loads_op_library = name

    def finalize(self) -> None:
        for (line, col), name in self._missing_ops:
            message, hint, severity = missing_op_message(name, self._loads_op_library)
            self.ctx.note_at(line, col, self.ID, message, severity=severity, hint=hint)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        inner = id(node) in self._inner
        self._inner.add(id(node.value))
        if not inner:
            self._judge(position(node), self.ctx.resolve(node))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module
        if node.level or module is None or node.names[0].name == "*":
            return
        if judged_missing(module) is not None:
            self._judge(self._module_at(node), module)
        elif module == "torch" or _is_npu_name(module):
            for alias in node.names:
                self._judge(position(alias), f"{module}.{alias.name}")

    def _module_at(self, node: ast.ImportFrom) -> Position:
        """Where LibCST's module node starts: after `from` and the blanks on its line."""
        source = self.ctx.source
        start = source.start(node)
        found = _FROM.match(source.text, start)
        if found is None:
            raise Decline("the module of a from-import on another line than its `from`")
        text = source.text
        line_start = text.rfind("\n", 0, start) + 1
        return node.lineno, len(text[line_start:found.end()].encode("utf-8"))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._judge(position(alias), alias.name)

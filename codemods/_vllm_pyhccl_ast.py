"""vllm-pyhccl on Python's `ast` (core/ast_pass), for the files it leaves unchanged: an import of vLLM's
PyNcclCommunicator reported for a method vllm-ascend's communicator lacks, or left in device dispatch.
The same findings; it declines where the rule would rewrite the import. Mirrors the LibCST rule's
`leave_SimpleStatementLine` (codemods/vllm_pyhccl), which acts on a line holding the import alone."""

from __future__ import annotations

import ast
import re

from npu_port.codemods._communicators import communicators, portable_communicator
from npu_port.codemods.vllm_pyhccl import KEPT_HINT, VllmPyHccl, kept_message
from npu_port.transpiler.analysis.ast_source import Decline, position
from npu_port.transpiler.core.rules import AstContext

_SEMICOLON = re.compile(r"(?:[ \t\f]|\\\r?\n)*;")  # after a statement: another may follow on its line


class AstVllmPyHccl:
    ID = VllmPyHccl.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.rows = communicators(ctx.target)

    def leave_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or node.module is None or len(node.names) != 1 or node.names[0].name == "*":
            return
        qualified = f"{node.module}.{node.names[0].name}"
        row = self.rows.get(qualified)
        source = self.ctx.source
        if row is None or not source.starts_line(node):
            return  # after a colon or another statement: no line of its own, which the rule leaves
        if _SEMICOLON.match(source.text, source.end(node)):
            raise Decline("an import sharing its line")  # LibCST's line may hold more than the import
        text = self.ctx.text
        if portable_communicator(self.ctx.target, qualified, text) is None:
            self.ctx.note_at(*position(node), self.ID, kept_message(qualified, row, text), hint=KEPT_HINT)
            return
        if not self.ctx.left_as_is(node, self.ID):
            raise Decline("PyNcclCommunicator's import rewritten")

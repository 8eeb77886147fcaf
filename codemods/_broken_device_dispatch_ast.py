"""broken-device-dispatch on Python's `ast` (core/ast_pass), for the files it reports nothing in: `check`
of a port asks it about every file that names the NPU twice, and most of them dispatch correctly. It
reports nothing itself: it declines (the LibCST rule then reads the file) at the first shape the rule
may report, judged more loosely than the rule does, so a file it answers has no finding of the rule.
Each hook names the LibCST hook (codemods/check_device_dispatch) it stands for."""

from __future__ import annotations

import ast
from typing import Any

from npu_port.codemods.check_device_dispatch import _CAPABILITY, BrokenDeviceDispatch, _ast_npu_value
from npu_port.transpiler.analysis.ast_source import Decline, argument_value, plain_string
from npu_port.transpiler.core.rules import AstContext

_BODIES = ("body", "orelse", "finalbody")


class AstBrokenDeviceDispatch:
    ID = BrokenDeviceDispatch.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx

    def _tests_npu_twice(self, tests: list[ast.expr]) -> None:
        """_tests_npu_twice: two `<left> == <NPU value>` tests of one chain or block. ast.dump stands for
        LibCST's code of `<left>`: equal code parses to an equal dump (the converse declines more)."""
        seen: set[tuple[str, str]] = set()
        for test in tests:
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
                value = _ast_npu_value(test.comparators[0])
                if value is not None:
                    key = (ast.dump(test.left), value)
                    if key in seen:
                        raise Decline("a test of the NPU's name repeated")
                    seen.add(key)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        value = _ast_npu_value(node.body)
        if value is not None and plain_string(self.ctx.source, node.orelse) == value:
            raise Decline("a conditional with the same NPU value in both arms")

    def visit_If(self, node: ast.If) -> None:
        """visit_If's chain (the test and each `elif`'s; an `else` holding only an `if` counts too), and
        the blocks of its bodies."""
        tests: list[ast.expr] = []
        current: Any = node
        while True:
            tests.append(current.test)
            if len(current.orelse) != 1 or not isinstance(current.orelse[0], ast.If):
                break
            current = current.orelse[0]
        self._tests_npu_twice(tests)
        self._blocks(node)

    def _blocks(self, node: Any) -> None:
        """visit_IndentedBlock / visit_Module: the tests of the `if` statements of each body."""
        for field in _BODIES:
            body = getattr(node, field, None)
            if body:
                tests = [s.test for s in body if isinstance(s, ast.If)]
                if len(tests) > 1:
                    self._tests_npu_twice(tests)

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _blocks
    visit_For = visit_AsyncFor = visit_While = visit_With = visit_AsyncWith = _blocks
    visit_Try = visit_TryStar = visit_ExceptHandler = visit_match_case = _blocks

    def _collection(self, node: Any) -> None:
        named = [v for e in node.elts if (v := _ast_npu_value(argument_value(e))) is not None]
        if len(named) != len(set(named)):
            raise Decline("a collection naming the NPU twice")

    visit_List = visit_Tuple = visit_Set = _collection

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
            self._capability_use(node.value)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._capability_use(node.value)

    def _capability_use(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call) and self.ctx.resolve(node.func) == _CAPABILITY:
            raise Decline("get_device_capability() unpacked or indexed")

    def visit_Call(self, node: ast.Call) -> None:
        name = self.ctx.resolve(node.func) or ""
        if name.startswith("ray.util.collective.") and any(
                (plain_string(self.ctx.source, argument_value(a)) or "").lower() == "hccl"
                for a in [*node.args, *node.keywords]):
            raise Decline("a Ray collective given hccl")

"""ray-resource-keys on Python's `ast` (core/ast_pass), for the files it leaves alone: Ray code that names
"GPU" as a value (`"NPU" if on_npu else "GPU"`, a table of device names) rather than as a resource key.
The rule reports only what it renames, so a file it renames nothing in has no finding of it; the twin
declines (the LibCST rule then reads the file) wherever a "GPU" literal stands in a place the rule may
rename, judged more loosely than the rule does (any lookup, subscript or `in` test, not only Ray's
resource dicts). Each hook names the LibCST hook (codemods/ray_resource_keys) it stands for."""

from __future__ import annotations

import ast
from typing import Any

from npu_port.codemods.ray_resource_keys import _LOOKUP_METHODS, RayResourceKeys, _names_passed_as_bundles
from npu_port.codemods.ray_support import RayTable
from npu_port.transpiler.analysis.ast_source import Decline
from npu_port.transpiler.core.rules import AstContext


class AstRayResourceKeys:
    ID = RayResourceKeys.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.table = RayTable.for_target(ctx.target)
        self._bundle_names = _names_passed_as_bundles(ctx.text, self.table, ctx.source.tree)

    def _key(self, node: Any) -> bool:
        """Whether `node` is the "GPU" literal (LibCST: a SimpleString; glued pieces too, which declines more)."""
        return isinstance(node, ast.Constant) and node.value == self.table.gpu

    def _within(self, nodes: list[Any]) -> None:
        """_mark_bundles: a "GPU" literal anywhere in a bundles expression (the rule: a bundle dict's key)."""
        if any(self._key(n) for node in nodes for n in ast.walk(node)):
            raise Decline('a "GPU" literal in bundles the rule may rename')

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Name) and t.id in self._bundle_names for t in node.targets):
            self._within([node.value])

    def visit_Call(self, node: ast.Call) -> None:
        if self.ctx.resolve(node.func) in self.table.bundle_calls:
            self._within([*node.args, *(k.value for k in node.keywords)])
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _LOOKUP_METHODS and any(self._key(a) for a in node.args):
            raise Decline('a "GPU" lookup')

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self._key(node.slice):
            raise Decline('a "GPU" subscript')

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and (
                self._key(node.left) or any(self._key(c) for c in node.comparators)):
            raise Decline('a "GPU" membership test')

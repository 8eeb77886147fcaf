"""ray-resource-keys on Python's `ast` (core/ast_pass), for the files it leaves alone: Ray code that names
"GPU" as a value (`"NPU" if on_npu else "GPU"`, a table of device names, a lookup in a dict that is not
Ray's) rather than as a resource key. The rule reports only what it renames, so a file it renames nothing
in has no finding of it; the twin declines (the LibCST rule then reads the file) wherever a "GPU" literal
stands in a place the rule may rename: a bundle, or a lookup, subscript or `in` test of what holds Ray's
resources (codemods/ray_support.ResourceMaps, followed here the same way). Each hook names the LibCST hook
(codemods/ray_resource_keys) it stands for."""

from __future__ import annotations

import ast
from typing import Any

from npu_port.codemods.ray_resource_keys import _LOOKUP_METHODS, RayResourceKeys, _names_passed_as_bundles
from npu_port.codemods.ray_support import RayTable
from npu_port.transpiler.analysis.ast_source import Decline, dotted, plain_string
from npu_port.transpiler.core.rules import AstContext


class AstRayResourceKeys:
    ID = RayResourceKeys.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.table = RayTable.for_target(ctx.target)
        self._bundle_names = _names_passed_as_bundles(ctx.text, self.table, ctx.source.tree)
        self._maps: set[str] = set()  # ResourceMaps._names: the names that hold Ray's resources here

    def _key(self, node: Any) -> bool:
        """Whether `node` is the "GPU" literal (LibCST: a SimpleString; glued pieces too, which declines more)."""
        return isinstance(node, ast.Constant) and node.value == self.table.gpu

    def _within(self, nodes: list[Any]) -> None:
        """_mark_bundles: a "GPU" literal anywhere in a bundles expression (the rule: a bundle dict's key)."""
        if any(self._key(n) for node in nodes for n in ast.walk(node)):
            raise Decline('a "GPU" literal in bundles the rule may rename')

    def _holds_resources(self, expr: Any) -> bool:
        """ResourceMaps.holds_resources."""
        name = dotted(expr)
        if name is not None and name in self._maps:
            return True
        table = self.table
        if isinstance(expr, ast.Call):
            if self.ctx.resolve(expr.func) in table.resource_map_calls:
                return True
            func = expr.func
            return (isinstance(func, ast.Attribute) and func.attr in table.resource_map_methods
                    and isinstance(func.value, ast.Call) and self.ctx.resolve(func.value.func) == table.runtime_context)
        if isinstance(expr, ast.Subscript):
            return plain_string(self.ctx.source, expr.slice) in table.resource_map_subscripts \
                and self.ctx.imports.imports_module("ray")
        return False

    def visit_Assign(self, node: ast.Assign) -> None:
        # ResourceMaps.track_assignment: a name assigned what holds the resources holds them, until
        # it is assigned something else.
        holds = self._holds_resources(node.value)
        for target in node.targets:
            name = dotted(target)
            if name is not None:
                (self._maps.add if holds else self._maps.discard)(name)
        if any(isinstance(t, ast.Name) and t.id in self._bundle_names for t in node.targets):
            self._within([node.value])

    def visit_Call(self, node: ast.Call) -> None:
        if self.ctx.resolve(node.func) in self.table.bundle_calls:
            self._within([*node.args, *(k.value for k in node.keywords)])
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _LOOKUP_METHODS and node.args \
                and self._key(node.args[0]) and self._holds_resources(func.value):
            raise Decline('a "GPU" lookup in Ray\'s resources')

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self._key(node.slice) and self._holds_resources(node.value):
            raise Decline('a "GPU" subscript of Ray\'s resources')

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for k, op in enumerate(node.ops):
            if isinstance(op, (ast.In, ast.NotIn)) and self._key(operands[k]) and self._holds_resources(operands[k + 1]):
                raise Decline('a "GPU" membership test of Ray\'s resources')

"""verl-device on Python's `ast` (core/ast_pass), for a file it leaves unchanged: the notes of VERL device
settings "cuda" left in device dispatch or a shim (codemods/verl_device). Where the rule would set one to
"npu" the twin declines and the file takes the LibCST path, as it does with --keep-cuda."""

from __future__ import annotations

import ast
import re
from typing import Optional

from npu_port.codemods.verl_device import _LIST_METHODS, VerlDevice, VerlTable
from npu_port.transpiler.analysis.ast_source import Decline, argument_value, call_arguments, dotted, plain_string
from npu_port.transpiler.core.rules import AstContext


class AstVerlDevice:
    ID = VerlDevice.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.source = ctx.source
        self.table = VerlTable.for_target(ctx.target)
        self._pattern = self.table.override_pattern
        self._values: set[int] = set()
        self._overrides: set[int] = set()
        self._subscript_tuples: set[int] = set()  # `d["a", "b"]`: LibCST has subscript elements there, no tuple
        self._fstrings = 0

    def _string(self, node: Optional[ast.AST]) -> Optional[str]:
        return plain_string(self.source, node)

    def _mark_value(self, node: Optional[ast.AST]) -> None:
        value = self._string(node)
        if value is not None and (value == self.table.cuda or re.fullmatch(rf"{self.table.cuda}:\d+", value)):
            self._values.add(id(node))

    def _mark_override(self, node: ast.AST) -> None:
        value = self._string(node)
        if value is not None and self._pattern.match(value):
            self._overrides.add(id(node))

    def _is_config_key(self, target: ast.AST) -> bool:
        name = dotted(target) or self._subscript_path(target)
        return name is not None and any(name == k or name.endswith("." + k) for k in self.table.config_keys)

    def _subscript_path(self, node: ast.AST) -> Optional[str]:
        parts = []
        while isinstance(node, ast.Subscript):
            key = self._string(node.slice)
            if key is None:
                return None
            parts.append(key)
            node = node.value
        base = dotted(node)
        if base is None or not parts:
            return None
        return ".".join([base, *reversed(parts)])

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._fstrings += 1

    def leave_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._fstrings -= 1

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(self._is_config_key(t) for t in node.targets):
            self._mark_value(node.value)

    def visit_Call(self, node: ast.Call) -> None:
        for k in node.keywords:
            if k.arg is not None and k.arg in self.table.device_keywords:
                self._mark_value(k.value)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _LIST_METHODS:
            for arg in call_arguments(node):
                self._mark_override(argument_value(arg))
        if self.ctx.resolve(func) in self.table.config_setters:
            positional = [argument_value(a) for a in node.args]
            if len(positional) >= 3 and self._string(positional[1]) in self.table.config_keys:
                self._mark_value(positional[2])

    def visit_Subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        if isinstance(index, ast.Tuple) and not self.source.text.startswith("(", self.source.start(index)):
            self._subscript_tuples.add(id(index))

    def visit_List(self, node: ast.List) -> None:
        for el in node.elts:
            self._mark_override(argument_value(el))

    def visit_Tuple(self, node: ast.Tuple) -> None:
        if id(node) not in self._subscript_tuples:
            self.visit_List(node)  # type: ignore[arg-type]

    def leave_Constant(self, node: ast.Constant) -> None:
        key = id(node)
        if key not in self._values and key not in self._overrides:
            return
        current = self._string(node)
        if current is None:
            return
        if key in self._values and current.startswith(self.table.cuda) \
                or key in self._overrides and self._pattern.match(current):
            if self._fstrings:
                raise Decline("a setting inside an f-string, which Python 3.11 may place otherwise")
            if not self.ctx.left_as_is(node, self.ID):
                raise Decline("a VERL device setting rewritten")

"""Base for rules that rewrite string values in one kind of position (device, AMP device type, backend)."""

from __future__ import annotations

from typing import ClassVar, Optional

import libcst as cst

from codemods._base import PythonRule
from transpiler.analysis.positions import PositionFinder, PositionPolicy
from transpiler.mapping import load_table


class StringPositionRule(PythonRule):
    POSITION: ClassVar[str]  # section of positions.yaml

    def __init__(self, ctx):
        super().__init__(ctx)
        policy = PositionPolicy.from_data(load_table(ctx.target, "positions")[self.POSITION])
        self.finder = PositionFinder(policy, ctx.resolve)
        self._marked: set[int] = set()

    def new_text(self, text: str) -> Optional[str]:
        """The target spelling of a string's text (or its leading part), or None to leave it."""
        raise NotImplementedError

    def _mark(self, strings) -> None:
        for s in strings:
            self._marked.add(id(s))

    def visit_Call(self, node: cst.Call) -> None:
        self._mark(self.finder.in_call(node))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._mark(self.finder.in_assign([t.target for t in node.targets], node.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._mark(self.finder.in_assign([node.target], node.value))

    def visit_Param(self, node: cst.Param) -> None:
        self._mark(self.finder.in_param(node))

    def visit_Dict(self, node: cst.Dict) -> None:
        self._mark(self.finder.in_dict(node))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._mark(self.finder.in_comparison(node))

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString):
        if id(original) not in self._marked or "b" in original.prefix.lower():
            return updated
        raw = original.raw_value
        new = self.new_text(raw)
        if new is None or new == raw:
            return updated
        quote = original.quote
        return self.rewrite(original, updated, updated.with_changes(value=f"{original.prefix}{quote}{new}{quote}"),
                            f"{original.value} -> {original.prefix}{quote}{new}{quote}")

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString):
        if id(original) not in self._marked or not updated.parts:
            return updated
        first = updated.parts[0]
        if not isinstance(first, cst.FormattedStringText):
            return updated
        new = self.new_text(first.value)
        if new is None or new == first.value:
            return updated
        parts = [first.with_changes(value=new), *updated.parts[1:]]
        return self.rewrite(original, updated, updated.with_changes(parts=parts),
                            f"f-string {first.value!r}... -> {new!r}...")

"""Base for rules that rewrite string values in one kind of position (device, AMP device type, backend)."""

from __future__ import annotations

from typing import ClassVar, Optional

import libcst as cst

from npu_port.transpiler.analysis.positions import PositionFinder, PositionPolicy, string_leaves
from npu_port.transpiler.core.cst_walk import transform
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table


class StringPositionRule(PythonRule):
    POSITION: ClassVar[str]  # section of positions.yaml

    def __init__(self, ctx):
        super().__init__(ctx)
        policy = PositionPolicy.from_data(load_table(ctx.target, "positions")[self.POSITION])
        self.finder = PositionFinder(policy, ctx.resolve)
        self._marked: set[int] = set()
        # Local variables: `loc = f"cuda:{rank}"` ... `torch.load(p, map_location=loc)`. The assignment
        # is seen before the use, so its strings are held until the end of the scope decides.
        self._scopes: list[_LocalFlow] = [_LocalFlow()]

    @staticmethod
    def new_text(text: str) -> Optional[str]:
        """The target spelling of a string's text (or its leading part), or None to leave it."""
        raise NotImplementedError

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Only literals whose own text new_text changes are ever rewritten (or noted in an NPU branch).
        return facts.any_string(lambda s: cls.new_text(s) not in (None, s))

    def _mark(self, nodes) -> None:
        for node in nodes:
            if isinstance(node, cst.Name):
                self._scopes[-1].used.add(node.value)
            else:
                self._marked.add(id(node))

    # -- local variables that carry a device/backend string into a position --------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(_LocalFlow())

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        return self._settle(self._scopes.pop(), updated)

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        return self._settle(self._scopes.pop(), updated)

    def _hold(self, targets, value) -> None:
        if len(targets) == 1 and isinstance(targets[0], cst.Name) and value is not None:
            for leaf in string_leaves(value):
                if not isinstance(leaf, cst.Name) and id(leaf) not in self._marked:
                    self._scopes[-1].held.setdefault(id(leaf), targets[0].value)

    def _settle(self, flow: _LocalFlow, updated):
        todo = {i: new for i, (var, new, _) in flow.rewrites.items() if var in flow.used}
        if not todo:
            return updated
        for i, (var, new, original) in flow.rewrites.items():
            if i in todo and not self.ctx.left_as_is(original, self.ID):
                self.ctx.note(original, self.ID, f"{_text_of(original)} -> {_text_of(new)} (flows into a position through `{var}`)",
                              kind="change")
            else:
                todo.pop(i, None)
        return transform(updated, _ReplaceStrings(todo))

    def visit_Call(self, node: cst.Call) -> None:
        why = self.finder.excluded(node)
        if why:
            callee = self.ctx.resolve(node.func)
            for leaf in self.finder.argument_leaves(node):
                if not isinstance(leaf, cst.Name) and self._converted(leaf) is not None:
                    self.report(leaf, f"{_text_of(leaf)} left as is: `{callee}` takes no NPU {self.POSITION}",
                                hint=why)
            return
        self._mark(self.finder.in_call(node))

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = [t.target for t in node.targets]
        self._mark(self.finder.in_assign(targets, node.value))
        self._hold(targets, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._mark(self.finder.in_assign([node.target], node.value))

    def visit_Param(self, node: cst.Param) -> None:
        self._mark(self.finder.in_param(node))

    def visit_Dict(self, node: cst.Dict) -> None:
        self._mark(self.finder.in_dict(node))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._mark(self.finder.in_comparison(node))

    def _converted(self, node):
        """The node with its text in the target spelling, or None when it has nothing to change."""
        if isinstance(node, cst.SimpleString):
            if "b" in node.prefix.lower():
                return None
            new = self.new_text(node.raw_value)
            if new is None or new == node.raw_value:
                return None
            return node.with_changes(value=f"{node.prefix}{node.quote}{new}{node.quote}")
        if not node.parts or not isinstance(node.parts[0], cst.FormattedStringText):
            return None
        first = node.parts[0]
        new = self.new_text(first.value)
        if new is None or new == first.value:
            return None
        return node.with_changes(parts=[first.with_changes(value=new), *node.parts[1:]])

    def _leave_string(self, original, updated):
        if id(original) in self._marked:
            new = self._converted(updated)
            if new is not None:
                return self.rewrite(original, updated, new, f"{_text_of(original)} -> {_text_of(new)}")
            return updated
        var = self._scopes[-1].held.get(id(original))
        if var is not None:
            new = self._converted(updated)
            if new is not None:
                self._scopes[-1].rewrites[id(updated)] = (var, new, original)
        return updated

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString):
        return self._leave_string(original, updated)

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString):
        return self._leave_string(original, updated)


class _LocalFlow:
    """Per scope: variables used in a position, and held strings assigned to plain variables."""

    def __init__(self):
        self.used: set[str] = set()
        self.held: dict[int, str] = {}  # id(original string) -> variable
        self.rewrites: dict[int, tuple] = {}  # id(updated string) -> (variable, new node, original node)


class _ReplaceStrings(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, cst.CSTNode]):
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original, updated):
        return self.replacements.get(id(original), updated)


def _text_of(node) -> str:
    return cst.Module(body=[]).code_for_node(node)

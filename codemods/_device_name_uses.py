"""Where the value of `torch.cuda.get_device_name()` goes: to a log, or into a decision.

`torch.npu.get_device_name()` answers "Ascend910B2". Where the CUDA name was only printed or logged, the
NPU's is as good. Where it was looked up in a table of GPU models (`GPU_SPECS[normalize(name)]`, a FLOPs
table for MFU) or handed to a function (a normaliser that raises on a name it does not know), the NPU's name
raises (KeyError, "Unknown device name"). Such a decision is left whole: the call
stays CUDA's and so does the CUDA test that guards it (`if torch.cuda.is_available():`, `... if
torch.cuda.is_available() else None`), so the NPU host skips it as it did before the port; it is reported.

Uses followed, from the call up: a method of the value (`.lower()`, `.replace(...)`), a conditional's arm,
and a name assigned the value in the same function (each of its loads). Logging: an argument of `print`,
a logger's or `logging`'s methods, `warnings.warn`, `str`/`repr`/`format`, a `.write(...)`, an f-string or a
`%` / `+` with a string. A decision: an argument of any other call, or a subscript. A comparison (`"H100" in
name`, `name in TABLE`) is converted: it is false on the NPU as on any GPU the code does not know, and a
vendor test (`"AMD" in name`) keeps the NPU out of another vendor's branch; a chain of them written as a
table is check's device-name-table. An element of a dict, list or tuple display, a return and anything
else is neither (converted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.core.cst_walk import visit

GET_DEVICE_NAME = "torch.cuda.get_device_name"
_LOG_CALLS = frozenset({"print", "str", "repr", "format"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "write",
                          "echo", "secho", "format"})


@dataclass(frozen=True)
class Decision:
    call: cst.Call  # the torch.cuda.get_device_name() call that stays
    use: cst.CSTNode  # where its value decides
    guards: tuple[cst.BaseExpression, ...]  # enclosing tests that stay with it


class _Walk(cst.CSTVisitor):
    def __init__(self, resolve: Callable[[cst.BaseExpression], Optional[str]]):
        self._resolve = resolve
        self.stack: list[cst.CSTNode] = []
        self.calls: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Call) and self._resolve(node.func) == GET_DEVICE_NAME:
            self.calls.append((node, tuple(self.stack)))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _is_log_call(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in _LOG_CALLS
    if isinstance(func, cst.Attribute):
        name = dotted_name(func) or ""
        return func.attr.value in _LOG_METHODS or name in ("warnings.warn",)
    return False


def _classify(node: cst.CSTNode, ancestors: tuple[cst.CSTNode, ...],
              loads: Callable[[str, tuple[cst.CSTNode, ...]], list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]],
              depth: int = 0) -> Optional[cst.CSTNode]:
    """The node where the value of `node` decides, or None."""
    if depth > 4:
        return None
    child = node
    for i in range(len(ancestors) - 1, -1, -1):
        parent = ancestors[i]
        up = ancestors[:i]
        if isinstance(parent, (cst.Arg,)):
            continue
        if isinstance(parent, cst.Call):
            if child is parent.func:
                return None
            return None if _is_log_call(parent) else parent
        if isinstance(parent, cst.Attribute):  # a method of the value: follow the call's value
            method_call = ancestors[i - 1] if i >= 1 else None
            if isinstance(method_call, cst.Call) and method_call.func is parent:
                return _classify(method_call, ancestors[:i - 1], loads, depth + 1)
            return None
        if isinstance(parent, cst.IfExp):
            if child is parent.test:
                return parent
            child = parent
            continue
        if isinstance(parent, (cst.ParenthesizedWhitespace, cst.LeftParen, cst.RightParen)):
            continue
        if isinstance(parent, (cst.FormattedStringExpression, cst.FormattedString)):
            return None
        if isinstance(parent, cst.BinaryOperation):
            return None  # `"gpu: " + name`, `"%s" % name`: a message
        if isinstance(parent, (cst.Subscript, cst.SubscriptElement, cst.Index, cst.Slice)):
            return parent
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            # `"H100" in name`, `name in TABLE`: false on the NPU, as on any GPU the code does not know
            # (and `"AMD" in name` keeps the NPU out of another vendor's branch): converted.
            return None
        if isinstance(parent, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            for target in targets:
                if isinstance(target, cst.Name):
                    for load, where in loads(target.value, up):
                        found = _classify(load, where, loads, depth + 1)
                        if found is not None:
                            return found
            return None
        return None
    return None


def decisions(module: cst.Module, resolve: Callable[[cst.BaseExpression], Optional[str]],
              is_cuda_test: Callable[[cst.CSTNode], bool]) -> list[Decision]:
    walk = _Walk(resolve)
    visit(module, walk)
    if not walk.calls:
        return []
    names = _Loads()
    visit(module, names)

    def loads(name: str, up: tuple[cst.CSTNode, ...]) -> list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]:
        scope = next((n for n in reversed(up) if isinstance(n, (cst.FunctionDef, cst.Lambda))), module)
        return [(n, where) for n, where in names.loads.get(name, []) if scope is module or any(w is scope for w in where)]

    found = []
    for call, ancestors in walk.calls:
        use = _classify(call, ancestors, loads)
        if use is None:
            continue
        guards = []
        child: cst.CSTNode = call
        for parent in reversed(ancestors):
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
                break
            if isinstance(parent, (cst.If, cst.IfExp, cst.While)) and child is not parent.test \
                    and is_cuda_test(parent.test):
                guards.append(parent.test)
            if isinstance(parent, cst.BooleanOperation) and is_cuda_test(parent.left):
                guards.append(parent.left)
            child = parent
        found.append(Decision(call, use, tuple(guards)))
    return found


class _Loads(cst.CSTVisitor):
    """Every Name load with its ancestors (assignment targets, attributes' names and keywords excluded)."""

    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []
        self.loads: dict[str, list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Name) and self.stack:
            parent = self.stack[-1]
            skip = (isinstance(parent, cst.Attribute) and parent.attr is node) \
                or (isinstance(parent, cst.AssignTarget) and parent.target is node) \
                or (isinstance(parent, cst.Arg) and parent.keyword is node) \
                or isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Param, cst.ImportAlias, cst.AsName))
            if not skip:
                self.loads.setdefault(node.value, []).append((node, tuple(self.stack)))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

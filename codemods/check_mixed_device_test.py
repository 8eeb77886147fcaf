"""`mixed-device-test`: a test function that names the NPU in some places and CUDA in others."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.dispatch import code
from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.analysis.positions import PositionPolicy, parametrized_values
from npu_port.transpiler.analysis.project_modules import is_test_path
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table

# CUDA's device named inside a longer string: the text a test parses (`"device=cuda"`, `"device: cuda:1"`).
_CUDA_SETTING = re.compile(r"\bdevice\s*[=:]\s*['\"]?cuda(?::\d+)?\b")
_DEVICE_WORD = re.compile(r"(?i)\b(?:npu|cuda|hccl|nccl)\b")
_PAIRS = (("npu", "cuda"), ("hccl", "nccl"))  # (the NPU's name, CUDA's): device names, collective backends
# A skip decorator that asks for NPUs: `@unittest.skipUnless(torch.npu.device_count() >= 2, ...)`,
# `@pytest.mark.skipif(not torch.npu.is_available(), ...)`.
_NPU_SKIP = re.compile(r"\bskip\w*\(.*\b(?:torch\.npu|torch_npu\.npu)\.(?:device_count|is_available)\b", re.S)


def _device(value: Optional[str]) -> Optional[str]:
    """"npu" or "cuda" for a device name ("npu:0", "cuda"), "cuda" for a setting that names CUDA's, the name
    itself for a collective backend ("hccl", "nccl")."""
    if value is None:
        return None
    if value in ("hccl", "nccl"):
        return value
    kind = value.split(":", 1)[0]
    if kind in ("npu", "cuda") and ("npu" in value or value == kind or value[5:].isdigit()):
        return kind
    return "cuda" if _CUDA_SETTING.search(value) else None


class MixedDeviceTest(PythonRule):
    """Reports a test function whose device names were ported in part.

    What it does:
        In a test module (tests/, test_*.py, *_test.py, conftest.py), for each top-level function and method,
        collects its device names: "npu" / "npu:N" and "cuda" / "cuda:N" strings (and the backends "hccl" and
        "nccl", a pair of their own), and CUDA's device inside a
        setting the test parses (`"device=cuda"`, `"device: cuda:1"`). Where both devices are named, reports
        (warning) each place that names the NPU, with the first place that names CUDA. Names that stand
        side by side on purpose are not counted: the items of one list, tuple or set that names both
        devices (a table, a loop over devices), the two arms of a conditional, dict keys and the values of
        a dict keyed by device, the right side of `in`, and everything inside an `if` whose test names a
        device (a dispatch's arms). Of the decorators, only the device values a parameter named like a device
        setting takes are read (`@pytest.mark.parametrize("device", ["cpu", "cuda"])`, as convert ports them).
        Also reports (warning) a skip decorator that asks for NPUs (`@unittest.skipUnless(torch.npu.device_count()
        >= 2, ...)`, `@pytest.mark.skipif(not torch.npu.is_available(), ...)`) on a test class or function that
        names CUDA's device and never the NPU's (`def device_type(self): return "cuda"`): it now runs on NPU
        hosts with CUDA's device.

    Why:
        A port renames the device names a test gives (`_install(studio_device="npu")`) or expects
        (`assert sidecar.device == "npu"`) and leaves the others: a mock that still returns "cuda", an
        expected call list, the text a parser is given. One side now says the NPU and the other CUDA,
        and the test fails on every host. Which side is wrong is the reviewer's call; that the test was
        ported in part is not.

    Example:
        def test_pick(monkeypatch):
            monkeypatch.setattr(sidecar, "_pick_device", lambda: "cuda")
            start(sidecar)
            assert sidecar.device == "npu"                  # warning

    Fix safety:
        Report-only: make the test name one device throughout (or the device the code under test chose).
    """

    ID = "mixed-device-test"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # (A test module's path is asked by the rule itself.)
        return any(facts.any_string(lambda s, k=new: _device(s) == k) and facts.any_string(lambda s, k=old: _device(s) == k)
                   for new, old in _PAIRS) \
            or (facts.has_word("skipIf", "skipUnless", "skipif") and facts.has_word("npu")
                and facts.any_string(lambda s: _device(s) == "cuda"))

    def __init__(self, ctx):
        super().__init__(ctx)
        self._depth = 0  # functions entered
        self._side_by_side: set[int] = set()  # ids of strings that stand beside the other device on purpose
        self._arms: set[int] = set()  # ids of the bodies of `if`s whose test names a device
        self._dispatch = 0  # depth of those bodies
        self._names: dict[str, list[cst.SimpleString]] = {}
        self._decorators = 0  # depth of decorators (`@pytest.mark.parametrize("device", ["cuda"])`)
        self._parametrized: set[int] = set()  # the device values of the current test's parametrize decorators
        self._device_setting = PositionPolicy.from_data(load_table(ctx.target, "positions")["device"])
        self._test_module = is_test_path(ctx.path)  # (as the scout asks: the rule does nothing elsewhere)
        # The skip decorator of the enclosing top-level class or function that asks for NPUs, and the first
        # CUDA device the test names below it (outside dispatch): (decorator, first CUDA name or None).
        self._gates: list[tuple[Optional[cst.Decorator], list[cst.SimpleString]]] = []

    def _enter_gate(self, node: cst.ClassDef | cst.FunctionDef) -> None:
        gate = next((d for d in node.decorators if _NPU_SKIP.search(code(d.decorator))), None)
        self._gates.append((gate, []))

    def _leave_gate(self) -> None:
        gate, cuda = self._gates.pop()
        if gate is None or not cuda:
            if gate is None and cuda and self._gates:
                self._gates[-1][1].extend(cuda)  # a method's CUDA names belong to its class's gate too
            return
        line = self.ctx.position(cuda[0]).start.line
        self.report(gate, f"this test runs where NPUs are (its skip asks for them) and puts its work on "
                          f"{cuda[0].value} (line {line}): the skip was ported, the device was not",
                    hint="give the test the NPU's device, or restore the skip the device was written for")

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enter_gate(node)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._leave_gate()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1
        if self._depth == 1:
            self._names = {kind: [] for pair in _PAIRS for kind in pair}
            self._enter_gate(node)
            # The devices its parameters take (`@pytest.mark.parametrize("device", ["cpu", "cuda"])`) are the
            # test's own; its other decorators are not read.
            self._parametrized = {id(s) for d in node.decorators if isinstance(d.decorator, cst.Call)
                                  for s in parametrized_values(d.decorator, self._device_setting.names_setting)}

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._depth -= 1
        if self._depth == 0:
            if self._names["npu"]:
                self._gates[-1][1].clear()  # the test names the NPU too: reported below, if in part
            self._leave_gate()
        for new, old in _PAIRS if self._depth == 0 else ():
            if not (self._names[new] and self._names[old]):
                continue
            first = self._names[old][0]
            line = self.ctx.position(first).start.line
            what = ("the NPU", "CUDA") if new == "npu" else ("HCCL", "NCCL")
            for node in self._names[new]:
                self.report(node, f"this test names {what[0]} here ({node.value}) and {what[1]} at line {line} "
                                  f"({first.value}): its device names were ported in part",
                            hint="name one device throughout the test, or the device the code under test chose")
        return updated

    # (Counted, not pruned: every rule shares one traversal, so a visit cannot skip a subtree for itself.)
    def visit_Decorator(self, node: cst.Decorator) -> None:
        self._decorators += 1

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator:
        self._decorators -= 1
        return updated

    def visit_If(self, node: cst.If) -> None:
        if _DEVICE_WORD.search(code(node.test)):
            self._arms.add(id(node.body))
            if isinstance(node.orelse, cst.Else):
                self._arms.add(id(node.orelse.body))

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._dispatch += id(node) in self._arms

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        self._dispatch -= id(original) in self._arms
        return updated

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._dispatch += id(node) in self._arms

    def leave_SimpleStatementSuite(self, original: cst.SimpleStatementSuite,
                                   updated: cst.SimpleStatementSuite) -> cst.SimpleStatementSuite:
        self._dispatch -= id(original) in self._arms
        return updated

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._side_by_side.update(id(n) for n in (node.body, node.orelse))

    def visit_Dict(self, node: cst.Dict) -> None:
        entries = [e for e in node.elements if isinstance(e, cst.DictElement)]
        self._side_by_side.update(id(e.key) for e in entries)
        if any(_device(string_value(e.key)) for e in entries):  # a table by device: its values stand beside
            self._side_by_side.update(id(e.value) for e in entries)

    def visit_ComparisonTarget(self, node: cst.ComparisonTarget) -> None:
        if isinstance(node.operator, (cst.In, cst.NotIn)):
            self._side_by_side.add(id(node.comparator))
            if isinstance(node.comparator, (cst.List, cst.Tuple, cst.Set)):
                self._side_by_side.update(id(e.value) for e in node.comparator.elements)

    def _sequence(self, elements) -> None:
        kinds = {_device(string_value(e.value)) for e in elements}
        if any(set(pair) <= kinds for pair in _PAIRS):
            self._side_by_side.update(id(e.value) for e in elements)

    def visit_List(self, node: cst.List) -> None:
        self._sequence(node.elements)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._sequence(node.elements)

    def visit_Set(self, node: cst.Set) -> None:
        self._sequence(node.elements)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self._depth or self._dispatch or (self._decorators and id(node) not in self._parametrized) \
                or id(node) in self._side_by_side or not self._test_module:
            return
        kind = _device(string_value(node))
        if kind is not None:
            self._names[kind].append(node)
            if kind == "cuda" and self._gates:
                self._gates[-1][1].append(node)

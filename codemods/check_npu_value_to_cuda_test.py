"""`npu-value-to-cuda-test`: the NPU's device name handed to project code that tests for "cuda" alone."""

from __future__ import annotations

import os

import libcst as cst

from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.analysis.project_devices import imported_cuda_only_tests, imports_from_project
from npu_port.transpiler.core.rules import PythonRule


def _npu_name(node: cst.BaseExpression) -> bool:
    value = string_value(node)
    return value is not None and value.split(":", 1)[0] == "npu"


class NpuValueToCudaTest(PythonRule):
    """Reports "npu" given to code that still tells devices apart by comparing with "cuda".

    What it does:
        Where a file imports a module of its own project whose code compares a device value with "cuda"
        (`if target.device != "cuda": return None`, `device.startswith("cuda")`) and never tells the NPU apart
        (compares no "npu", asks no `torch.npu.is_available()` or `is_*npu*` predicate), reports (warning) each "npu" / "npu:N"
        literal of the file that is a value (an argument, a default, an assignment), not a comparison's
        operand: `_target(device="npu")`, `SimpleNamespace(device="npu")`, `def make(device="npu")`.
        The message names the comparison (file:line) the value meets.

    Why:
        A port renames the device names of a test (or a caller) and leaves the module it exercises, where
        "cuda" picks a branch (a dispatch left as written, or code never converted). There "npu" is any
        other device: the test now drives the CPU path and its expectations fail, or the caller silently
        loses the accelerated path. The two files disagree; which one is wrong is the reviewer's call.

    Example:
        # core/attention.py (left):  if getattr(target, "device", None) != "cuda": return None
        import core.attention as att
        def _target(device="npu"):                                      # warning
            return SimpleNamespace(device=device)

    Fix safety:
        Report-only: port the comparison in the module (`in ("cuda", "npu")` or the NPU's name), or leave the
        test's device name as it was.
    """

    ID = "npu-value-to-cuda-test"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.any_string(lambda s: s.split(":", 1)[0] == "npu") and imports_from_project(facts, beside=True)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._operands: set[int] = set()  # ids of comparison operands: what is compared is no value handed on
        self._tests: list[tuple[str, int]] = []
        self._asked = False

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._operands.add(id(node.left))
        self._operands.update(id(c.comparator) for c in node.comparisons)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if id(node) in self._operands or not _npu_name(node):
            return
        if not self._asked:  # the project is read once per file, on the first "npu" value
            self._asked = True
            self._tests = imported_cuda_only_tests(self.ctx.path, self.ctx.text)
        if not self._tests:
            return
        file, at = self._tests[0]
        where = os.path.relpath(file, os.path.dirname(os.path.abspath(self.ctx.path)))
        self.report(node, f'"{string_value(node)}" goes to project code that tells devices apart by comparing '
                          f'with "cuda" alone ({where}:{at}; it never tests for the NPU): there it takes the branch for '
                          "other devices, so this and the code it exercises disagree",
                    hint="port that comparison too (the NPU's name, or both devices), or leave this value as it was")

"""`npu-mock-misses-code`: a test that patches torch.npu where the code it exercises reads torch.cuda."""

from __future__ import annotations

import os
import re
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.dispatch import code, npu_framework_file
from npu_port.transpiler.analysis.project_devices import cuda_only_reads, imports_from_project
from npu_port.transpiler.core.rules import PythonRule

# A stand-in put on torch.npu: `patch("torch.npu.f")`, `monkeypatch.setattr(torch.npu, "f", ...)`,
# `patch.object(torch.npu, "f")`, `mocker.patch("torch.npu.f")`.
_PATCHERS = frozenset({"patch", "setattr", "object"})  # patch(...), monkeypatch.setattr(...), patch.object(...)
_NPU_MOCK = re.compile(r"""torch\.npu\s*,\s*["'](\w+)["']|["']torch\.npu\.(\w+)["']""")


class NpuMockMissesCode(PythonRule):
    """Reports a test's stand-in for a torch.npu function that the code it exercises never calls.

    What it does:
        For each function or method (its decorators included) that patches a torch.npu function (`patch("torch.npu.is_available", ...)`,
        `monkeypatch.setattr(torch.npu, "is_available", ...)`) and uses a name the file imports from its own
        project, whose module calls the same function on torch.cuda and never on torch.npu: reports (warning)
        the patch, with the place the module calls torch.cuda. Modules of an NPU framework (vllm-ascend,
        MindSpeed) are not read: their torch.cuda is patched onto the NPU on purpose.

    Why:
        A port renames the mocks of a test and leaves the module it tests, where the CUDA call stays on
        purpose (behind a vendor test, a dispatch that handles the NPU, a CUDA-only path) or was missed.
        The stand-in now replaces a function nobody calls: the test drives the real torch.cuda, passes or
        fails for another reason, and no longer tests what it was written for.

    Example:
        # tools/utils.py (kept): return torch.cuda.is_available() and torch.version.hip is None and ...
        from tools.utils import flash_impl
        def test_without_cuda(monkeypatch):
            monkeypatch.setattr(torch.npu, "is_available", lambda: False)    # warning
            assert flash_impl() is None

    Fix safety:
        Report-only: patch what the module calls (`torch.cuda.is_available`), or port the module's call too.
    """

    ID = "npu-mock-misses-code"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("torch.npu",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.has_word("patch", "monkeypatch", "mocker", "mock") and facts.search_code(_NPU_MOCK) is not None \
            and imports_from_project(facts, beside=True) and not npu_framework_file(facts.path, facts.code)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._reads: Optional[dict[str, tuple[str, dict[str, int]]]] = None
        self._depth = 0
        self._test: Optional[cst.FunctionDef] = None  # the test function being walked
        self._mocks: list[tuple[cst.Call, str]] = []  # its patches of torch.npu functions

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1
        if self._test is None and self._depth <= 2:
            self._test, self._mocks = node, []  # functions and methods; nested helpers go with the function

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if self._test is not None and name in _PATCHERS:
            found = _NPU_MOCK.search(code(node))
            if found is not None:
                self._mocks.append((node, found.group(1) or found.group(2)))

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._depth -= 1
        if original is self._test:
            self._test = None
            self._judge(original)
        return updated

    def _judge(self, test: cst.FunctionDef) -> None:
        if not self._mocks:
            return
        if self._reads is None:
            self._reads = cuda_only_reads(self.ctx.path, self.ctx.text)
        body = code(test.body)
        for local, (file, reads) in sorted(self._reads.items()):
            if not re.search(rf"(?<![\w.]){re.escape(local)}\b", body):
                continue
            for call, name in self._mocks:
                if name in reads:
                    where = os.path.relpath(file, os.path.dirname(os.path.abspath(self.ctx.path)))
                    self.report(call, f"this test patches `torch.npu.{name}`, and the code it exercises (`{local}`, "
                                      f"{where}:{reads[name]}) calls `torch.cuda.{name}` and never torch.npu's: the "
                                      "stand-in replaces nothing it runs",
                                hint=f"patch torch.cuda.{name} as the code reads it, or port that call too")
            return

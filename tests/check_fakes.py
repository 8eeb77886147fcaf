"""Two small rules for testing `check` and the reports without depending on the real rule set:
one that rewrites (so `check` has CUDA left over to report) and one that only reports a warning.

`fake_rules` (a pytest fixture in the tests that use it) adds them to the registry for one test.
"""

from __future__ import annotations

import libcst as cst
import pytest

from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.rules import PythonRule


class FakeCudaSynchronize(PythonRule):
    """Rewrites `torch.cuda.synchronize` to `torch.npu.synchronize` (test double)."""

    ID = "test-cuda-sync"
    SAFETY = "safe"
    TRIGGERS = ("cuda",)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if self.ctx.resolve(original) == "torch.cuda.synchronize":
            new = updated.with_changes(value=cst.parse_expression("torch.npu"))
            return self.rewrite(original, updated, new, "torch.cuda.synchronize -> torch.npu.synchronize")
        return updated


class FakeTritonReport(PythonRule):
    """Reports `import triton` as something convert cannot port (test double)."""

    ID = "test-triton"
    SAFETY = "report-only"
    TRIGGERS = ("triton",)

    def visit_Import(self, node: cst.Import) -> None:
        if any(getattr(a.name, "value", None) == "triton" for a in node.names):
            self.report(node, "triton kernels do not run on Ascend", hint="use torch_npu fused operators")


FAKE_RULES = (FakeCudaSynchronize, FakeTritonReport)

GPU_SOURCE = """import torch
import triton

def step(model, batch):
    loss = model(batch)
    torch.cuda.synchronize()
    return loss
"""


@pytest.fixture
def fake_rules(monkeypatch):
    """Registers FAKE_RULES for one test (import this fixture into the test module)."""
    rules = all_rules()
    for rule in FAKE_RULES:
        monkeypatch.setitem(rules, rule.ID, rule)
    yield FAKE_RULES  # workers get the selected rule classes from the driver, so no engine cache to reset

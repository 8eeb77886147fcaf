"""`one-sided-device-assert`: a test that asserts CUDA in code that runs on the NPU."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.dispatch import code
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.core.rules import PythonRule

# Where a tensor or module is: `x.device`, `x.device.type`, `str(x.device)`, `next(m.parameters()).device`.
_DEVICE_EXPRESSION = re.compile(r"\.device(?:\.type)?\s*\)?$")
_CUDA_WORD = re.compile(r"(?<![A-Za-z0-9_])cuda(?![A-Za-z0-9_])", re.I)
_NPU_IN_CODE = re.compile(r"""\.npu\(|\btorch\.npu\b|\btorch_npu\b|\bis_\w*npu\w*|["']npu(?::\d+)?["']""")
_ASSERT_METHODS = frozenset({"assertEqual", "assertEquals", "assertTrue"})


def _cuda_value(node: cst.BaseExpression) -> bool:
    """"cuda", "cuda:0", torch.device("cuda"), torch.device("cuda", 0)."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return isinstance(value, str) and value.split(":", 1)[0] == "cuda"
    if isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("device") and node.args:
        return _cuda_value(node.args[0].value)
    return False


def _device_expression(node: cst.BaseExpression) -> bool:
    return _DEVICE_EXPRESSION.search(code(node)) is not None


class OneSidedDeviceAssert(PythonRule):
    """Reports an assert that the device is CUDA, in code that runs on the NPU.

    What it does:
        In a module that runs on the NPU (it names the NPU in code, or picks it at run time: an
        `is_*npu*_available()`, a device resolver), reports (error) an assert whose test is that a
        device is CUDA's: `assert t.device.type == "cuda"`, `assert x.device == torch.device("cuda", 0)`,
        `assert str(x.device).startswith("cuda")`, `self.assertEqual(t.device.type, "cuda")`, and
        `assert t.is_cuda` in a function that places things on the NPU itself (`.npu()`, `"npu"`).
        Not inside code that runs on CUDA alone: an `if` whose test asks CUDA (`if torch.cuda.
        is_available():`, `if device == "cuda":`), a function whose decorators ask it
        (`@pytest.mark.skipif(not torch.cuda.is_available(), ...)`). Not in NPU frameworks' own
        modules (vllm-ascend, MindSpeed: their CUDA names are deliberate).

    Why:
        A port moves the code under test to the NPU (`.cuda()` -> `.npu()`, `"cuda"` -> `"npu"`, a
        skip condition renamed to `torch.npu.is_available()`) while the test still asserts where the
        tensors were on the GPU; or a file that picks the device at run time checks one side only.
        Convert leaves such a comparison (in a module that handles the NPU it reads as a dispatch
        test) and `assert x.is_cuda` (the guard of a CUDA-only kernel): on the NPU the test fails.

    Example:
        device = "npu" if is_torch_npu_available() else "cuda"
        model = model.to(device)
        assert next(model.parameters()).device.type == "cuda"      # error
        should read:
        assert next(model.parameters()).device.type == device

    Fix safety:
        Report-only: compare with the device the code chose (or `in ("cuda", "npu")`).
    """

    ID = "one-sided-device-assert"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("assert",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # A "cuda" value or `.is_cuda` to assert, an assert, a device, and the NPU in the code.
        if not (facts.has_word("is_cuda") or facts.any_string(lambda s: s.split(":")[0] == "cuda")):
            return False
        return facts.has_word("assert", "assertEqual", "assertEquals", "assertTrue") \
            and (facts.has_word("device", "is_cuda") or facts.search_code(_DEVICE_ATTRIBUTE)) \
            and (facts.has_word("npu", "torch_npu") or facts.search_code(_NPU_SELECTION)
                 or facts.any_string(lambda s: s.split(":")[0] == "npu"))

    def __init__(self, ctx):
        super().__init__(ctx)
        self._cuda_gates = 0  # depth of `if`s and functions that run on CUDA alone
        self._functions: list[cst.FunctionDef] = []  # the enclosing functions, rendered only when asked

    def _runs_on_npu(self) -> bool:
        shapes = self.ctx.dispatch
        return (shapes.npu_code or shapes.selects_npu) and not shapes.npu_framework

    # -- regions that run on CUDA alone ---------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        if _asks_cuda(node.test):
            self._cuda_gates += 1

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        if _asks_cuda(original.test):
            self._cuda_gates -= 1
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        gated = any(_asks_cuda(d.decorator) for d in node.decorators)
        self._cuda_gates += gated
        self._functions.append(node)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._cuda_gates -= any(_asks_cuda(d.decorator) for d in original.decorators)
        self._functions.pop()
        return updated

    # -- the asserts ----------------------------------------------------------------------------------------
    def visit_Assert(self, node: cst.Assert) -> None:
        self._judge(node, node.test)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _ASSERT_METHODS and node.args:
            if func.attr.value == "assertTrue":
                self._judge(node, node.args[0].value)
            elif len(node.args) >= 2:
                left, right = node.args[0].value, node.args[1].value
                if (_device_expression(left) and _cuda_value(right)) or (_device_expression(right) and _cuda_value(left)):
                    self._report(node, "asserts the device is CUDA's")

    def _judge(self, node: cst.CSTNode, test: cst.BaseExpression) -> None:
        why = self._asserts_cuda(test)
        if why is not None:
            self._report(node, why)

    def _asserts_cuda(self, test: cst.BaseExpression) -> Optional[str]:
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                and isinstance(test.comparisons[0].operator, (cst.Equal, cst.Is)):
            left, right = test.left, test.comparisons[0].comparator
            if (_device_expression(left) and _cuda_value(right)) or (_device_expression(right) and _cuda_value(left)):
                return "asserts the device is CUDA's"
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value == "startswith" \
                and test.args and _cuda_value(test.args[0].value) and _device_expression(_unstr(test.func.value)):
            return "asserts the device is CUDA's"
        if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda" and self._functions \
                and _NPU_IN_CODE.search(code(self._functions[-1].body)):
            return "asserts `.is_cuda` in a function that places its tensors on the NPU"
        return None

    def _report(self, node: cst.CSTNode, why: str) -> None:
        if self._cuda_gates or not self._runs_on_npu():
            return
        self.report(node, f"{why}, in code that runs on the NPU: there this assert fails", severity="error",
                    hint='compare with the device the code chose (or `device.type in ("cuda", "npu")`)')


_DEVICE_ATTRIBUTE = re.compile(r"\.device\b")
_NPU_SELECTION = re.compile(r"\bis_\w*npu\w*|\bget_device_name\b|\bget_torch_device\b|\btorch_device\b")


def _asks_cuda(node: cst.BaseExpression) -> bool:
    """A test or decorator that asks CUDA and not the NPU: the code under it runs on CUDA alone."""
    text = code(node)
    return _CUDA_WORD.search(text) is not None and _NPU_IN_CODE.search(text) is None \
        and re.search(r"(?i)\bnpu\b", text) is None


def _unstr(node: cst.BaseExpression) -> cst.BaseExpression:
    """`str(x.device)` -> `x.device`."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str" and node.args:
        return node.args[0].value
    return node

"""`cuda-mock-targets`: a test's stand-in for a torch.cuda function follows the code it tests to torch.npu."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from npu_port.codemods._torch_cuda_table import table_for
from npu_port.transpiler.analysis.dispatch import MOCKED_CUDA_NAME, code
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.literals import string_value, with_string_value
from npu_port.transpiler.core.rules import PythonRule

_ROOT = "torch.cuda."
# The test tools' patchers: what they replace is what the code under test calls. A plain `setattr` or an
# assignment to torch.cuda is a shim the code itself sets up (left as written, see core/python_source).
_NAME_PATCHERS = ("patch", "mock.patch", "unittest.mock.patch", "mocker.patch", "monkeypatch.setattr",
                  "monkeypatch.delattr")
_OBJECT_PATCHERS = ("patch.object", "mock.patch.object", "unittest.mock.patch.object", "mocker.patch.object",
                    "monkeypatch.setattr", "monkeypatch.delattr")


# A mock of the device name that answers a GPU model: the code under test decides by the name (a table of
# GPU models, a comparison), and torch-cuda-api leaves such a decision CUDA's (codemods/_device_name_uses.py).
_GPU_NAME_MOCK = re.compile(r"""torch\.cuda(?:\s*,\s*["']|\.)get_device_name["'][^()]*?return_value\s*=\s*"""
                            r"""["'][^"']*\b(?:NVIDIA|Tesla|GeForce|Quadro|RTX|[ABHLTV]\d{2,3}|MI\d{3})\b""")


def _names_torch_cuda(resolved, node: cst.BaseExpression) -> bool:
    """torch.cuda, also as the module under test reaches it (`fsdp2_strategy.torch.cuda`)."""
    dotted = dotted_name(node) or ""
    return resolved == "torch.cuda" or dotted == "torch.cuda" or dotted.endswith(".torch.cuda")


def _named(name: str, patchers: tuple[str, ...]) -> bool:
    return any(name == p or name.endswith("." + p) for p in patchers)


class CudaMockTargets(PythonRule):
    """Points a test's mock of a torch.cuda function at the torch.npu function the converted code calls.

    What it does:
        In the patchers of the test tools (`mock.patch`, `patch`, `mocker.patch`, `monkeypatch.setattr`,
        and their `.object` forms), a target that names a torch.cuda function, as a dotted string
        (`"torch.cuda.device_count"`, `"pkg.utils.torch.cuda.device_count"`) or as the object and the
        attribute (`monkeypatch.setattr(torch.cuda, "is_available", ...)`, also reached through the module
        under test: `monkeypatch.setattr(strategy.torch.cuda, "empty_cache", ...)`), gets the name torch-cuda-api
        gives that function: `torch.npu.device_count`. Only names that rule converts (its table, the
        same one) move; a name it leaves (no NPU equivalent, or one that answers differently) keeps its
        mock, with the code, and so does every torch.cuda mock of a test function that mocks such a name
        (`is_available` beside `get_device_capability`: the code keeps that decision CUDA's as a whole), or
        that mocks `get_device_name` answering a GPU model (`"NVIDIA H100 80GB HBM3"`: the code decides by
        the name, and torch-cuda-api leaves a table lookup of it CUDA's). A test function that mocks a
        name and calls project code that keeps it (a module of the project that picks the device itself:
        it also handles the NPU, so its CUDA test stays as written) is left whole, the mock with what it
        expects of the CUDA path (`device.type == "cuda"`, `"nccl"`), with an info finding (engine:
        analysis/dispatch, read across files). A plain `setattr` or an assignment to torch.cuda is a shim,
        not a test's stand-in, and stays.

    Why:
        torch-cuda-api turns the code's `torch.cuda.device_count()` into `torch.npu.device_count()`. A
        test that still patches `torch.cuda.device_count` then patches a function nobody calls: the
        test runs against the real NPU count and asserts what the mock would have made true. Test
        and code must move together.

    Example:
        with mock.patch("litgpt.utils.torch.cuda.device_count", return_value=0):
        ->  with mock.patch("litgpt.utils.torch.npu.device_count", return_value=0):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        ->  monkeypatch.setattr(torch.npu, "is_available", lambda: True)

    With --keep-cuda:
        The mock stays (the code then asks torch.accelerator, which a mock of one backend does not
        reach), with a warning: patch the function the converted code calls.

    Fix safety:
        Review: right where the code under test goes through torch-cuda-api; a test of code that keeps a
        CUDA call (a branch for NVIDIA only) needs its old target back.
    """

    ID = "cuda-mock-targets"
    SAFETY = "review"
    TRIGGERS = ("torch.cuda",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # A patcher in the code: torch.cuda in a comment or a docstring alone is no mock.
        return facts.has_word("patch", "setattr", "delattr", "object")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.table = table_for(ctx.target, ctx.options.rules_files)
        # Per function: a torch.cuda name it also mocks that has no NPU form (get_device_capability), or None.
        # Mocks that stand in for one decision move together: the code keeps that decision CUDA's.
        self._staying: list[Optional[str]] = [None]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        text = code(node)
        staying = None
        if "torch.cuda" in text:
            for attribute, dotted in MOCKED_CUDA_NAME.findall(text):
                name = attribute or dotted
                if self.table.translate(_ROOT + name) is None:
                    staying = f"`{_ROOT + name}`, which has no NPU form"
                    break
            if staying is None and _GPU_NAME_MOCK.search(text):
                staying = ("`torch.cuda.get_device_name` answering a GPU model, a name the code decides by "
                           "(its decision stays CUDA's)")
        self._staying.append(staying)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._staying.pop()
        return updated

    def _npu_name(self, qualified: str) -> Optional[str]:
        new = self.table.translate(qualified)
        if new is None or not new.startswith("torch.npu."):
            return None  # no NPU form, or one under torch_npu that a module path cannot reach
        return new

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not updated.args or updated.args[0].keyword is not None:
            return updated
        name = dotted_name(updated.func) or ""
        first = updated.args[0].value
        target = string_value(first)
        if target is not None and _named(name, _NAME_PATCHERS) and isinstance(first, cst.SimpleString):
            return self._string_target(original, updated, first, target)
        if (len(updated.args) >= 2 and _named(name, _OBJECT_PATCHERS)
                and _names_torch_cuda(self.ctx.resolve(original.args[0].value), original.args[0].value)):
            return self._object_target(original, updated)
        return updated

    def _string_target(self, original: cst.Call, updated: cst.Call, first: cst.SimpleString,
                       target: str) -> cst.BaseExpression:
        at = target.find(_ROOT)
        if at < 0 or (at > 0 and target[at - 1] != "."):
            return updated
        new = self._npu_name(target[at:])
        if new is None:
            return updated
        replaced = target[:at] + new
        args = [updated.args[0].with_changes(value=with_string_value(first, replaced)), *updated.args[1:]]
        if self._kept_together(original):
            return updated
        return self.rewrite(original, updated, updated.with_changes(args=args),
                            f'the mock target "{target}" -> "{replaced}" (the code it stands in for calls torch.npu)')

    def _object_target(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        attr_node = updated.args[1].value
        attr = string_value(attr_node)
        if attr is None or not isinstance(attr_node, cst.SimpleString):
            return updated
        new = self._npu_name(_ROOT + attr)
        if new is None or "." in new[len("torch.npu."):]:
            return updated
        first = updated.args[0].value
        if not (isinstance(first, cst.Attribute) and first.attr.value == "cuda"):
            return updated  # `from torch import cuda`: no spelling of torch.npu is bound here
        args = [updated.args[0].with_changes(value=first.with_changes(attr=cst.Name("npu"))),
                updated.args[1].with_changes(value=with_string_value(attr_node, new.rsplit(".", 1)[1])),
                *updated.args[2:]]
        if self._kept_together(original):
            return updated
        return self.rewrite(original, updated, updated.with_changes(args=args),
                            f"the mock of torch.cuda.{attr} -> {new} (the code it stands in for calls torch.npu)")

    def _kept_together(self, call: cst.Call) -> bool:
        """A mock this rule would move, in a test that also mocks a name with no NPU form: left, said why."""
        staying = self._staying[-1]
        if staying is None:
            return False
        self.report(call, f"mock left as is: this test also mocks {staying}, so the code "
                          "it stands in for keeps that decision CUDA's; its mocks stay together", severity="info")
        return True

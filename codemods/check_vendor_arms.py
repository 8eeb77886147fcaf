"""`npu-in-cuda-place`: a module that picks among accelerators, with the NPU where CUDA's arms were."""

from __future__ import annotations

import re

import libcst as cst

from npu_port.transpiler.analysis.dispatch import VENDOR_WORDS, code
from npu_port.transpiler.core.rules import PythonRule

# The NPU named in code: its module, an NPU tensor method, its device name.
_NPU_NAME = re.compile(r"\btorch(?:_npu)?\.npu\.[A-Za-z_]\w*|\.npu\(|\.is_npu\b")
# CUDA named in code (or in a device literal): the arms a port keeps beside the NPU's.
_CUDA_NAME = re.compile(r"""\btorch\.(?:backends\.)?cuda\b|\.cuda\(|\.is_cuda\b|["']cuda(?::\d+)?["']|\bis_\w*cuda\w*""")


class NpuInCudaPlace(PythonRule):
    """Reports a module that picks among accelerators at run time and names the NPU but no longer CUDA.

    What it does:
        In a module that tests two or more other accelerators (XPU, MLU, HPU, MPS, ... : `convert` leaves such
        a module whole, analysis/dispatch `FileDispatch.vendors`), reports (warning) each NPU name (`torch.npu.x`,
        `.npu()`) when nothing in the module names CUDA any more: a port renamed CUDA's arms, so the NPU now
        runs code written for CUDA and CUDA hosts break. Reported at the first NPU name of each statement.

    Why:
        A library written for several accelerators (accelerate, transformers) keeps one arm per vendor; the
        NPU gets an arm of its own beside CUDA's. With CUDA gone from such a module, every former CUDA arm is
        an NPU arm nobody wrote for the NPU (`get_backend()` answering "cuda" on an NPU host).

    Example:
        if is_xpu_available(): ...
        if is_mlu_available(): ...
        if torch.npu.is_available():            # warning: CUDA's arm renamed
            states["cuda"] = torch.npu.get_rng_state_all()

    Fix safety:
        Report-only: restore CUDA's arm and add the NPU's beside it.
    """

    ID = "npu-in-cuda-place"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.search_code(_NPU_NAME) and not facts.search_code(_CUDA_NAME) \
            and any(w in facts.code for w in VENDOR_WORDS)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._active = ctx.dispatch.multi_vendor and not _CUDA_NAME.search(ctx.text)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self._active:
            self._statement(node, code(node))

    def visit_If(self, node: cst.If) -> None:
        if self._active:
            self._statement(node.test, code(node.test))

    def _statement(self, node: cst.CSTNode, text: str) -> None:
        found = _NPU_NAME.search(text)
        if found is not None:
            self.report(node, f"this module picks among accelerators ({self.ctx.dispatch.vendor_names}) and names `{found.group().rstrip('(')}` "
                              "here, but CUDA nowhere any more: CUDA's arms were renamed, so the NPU runs code written "
                              "for CUDA", hint="restore CUDA's arm and give the NPU an arm of its own beside it")

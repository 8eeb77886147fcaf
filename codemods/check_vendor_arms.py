"""`npu-in-cuda-place`: code that picks among accelerators, with the NPU where CUDA's arms were."""

from __future__ import annotations

import re

import libcst as cst

from npu_port.transpiler.analysis.dispatch import VENDOR_ARM, VENDOR_WORDS, chain_tests, code
from npu_port.transpiler.core.rules import PythonRule

# The NPU named in code: its module, an NPU tensor method, its device name.
_NPU_NAME = re.compile(r"\btorch(?:_npu)?\.npu\.[A-Za-z_]\w*|\.npu\(|\.is_npu\b")
# CUDA named in code (or in a device literal): the arms a port keeps beside the NPU's.
# The NPU tested through torch's own names, as a port of CUDA's test reads (`torch.npu.is_available()`,
# `x.type == "npu"`); a library's predicate (`is_npu_available()`) is an arm somebody wrote for the NPU.
_NPU_TEST = re.compile(r"""\btorch(?:_npu)?\.npu\.is_available\b|\.type\s*==\s*["']npu["']""")
_CUDA_NAME = re.compile(r"""\btorch\.(?:backends\.)?cuda\b|\.cuda\(|\.is_cuda\b|["']cuda(?::\d+)?["']|\bis_\w*cuda\w*""")


class NpuInCudaPlace(PythonRule):
    """Reports code that picks among accelerators at run time and names the NPU but no longer CUDA.

    What it does:
        In a module that tests two or more other accelerators (XPU, MLU, HPU, MPS, ... : `convert` leaves such
        a module whole, analysis/dispatch `FileDispatch.vendors`), reports (warning) each NPU name (`torch.npu.x`,
        `.npu()`) when nothing in the module names CUDA any more: a port renamed CUDA's arms, so the NPU now
        runs code written for CUDA and CUDA hosts break. Reported at the first NPU name of each statement.
        The same for one decision in any module: an `if`/`elif` chain with an arm for another datacenter
        accelerator (`torch.xpu.is_available()`, `is_hpu_available()`, `device.type == "mlu"`) whose tests ask for
        the NPU while no arm names CUDA (reported once, at the NPU's test; `convert` leaves such a chain whole:
        analysis/dispatch `vendor_chain_guard`).

    Why:
        A library written for several accelerators (accelerate, transformers) keeps one arm per vendor; the
        NPU gets an arm of its own beside CUDA's. With CUDA gone from such a module, every former CUDA arm is
        an NPU arm nobody wrote for the NPU (`get_backend()` answering "cuda" on an NPU host).

    Example:
        if is_xpu_available(): ...
        if is_mlu_available(): ...
        if torch.npu.is_available():            # warning: CUDA's arm renamed
            states["cuda"] = torch.npu.get_rng_state_all()

        if torch.npu.is_available():            # warning: one decision, its CUDA arm renamed
            device_map = {"": torch.npu.current_device()}
        elif torch.xpu.is_available():
            device_map = {"": torch.xpu.current_device()}

    Fix safety:
        Report-only: restore CUDA's arm and add the NPU's beside it.
    """

    ID = "npu-in-cuda-place"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return any(w in facts.code for w in VENDOR_WORDS) and (facts.search_code(_NPU_NAME) or facts.search_code(_NPU_TEST))

    def __init__(self, ctx):
        super().__init__(ctx)
        # The vendors named beside the NPU where CUDA's arms are gone: the module's (read whole), then those of
        # the chains being walked (one decision each, pushed at its head, popped on leaving it).
        self._scopes: list[str] = [ctx.dispatch.vendor_names] \
            if ctx.dispatch.multi_vendor and not _CUDA_NAME.search(ctx.text) else []
        self._heads: list[int] = []
        self._elifs: set[int] = set()  # the `elif`s of chains already read from their head

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self._scopes:
            self._statement(node, code(node))

    def visit_If(self, node: cst.If) -> None:
        if not self._scopes and id(node) not in self._elifs:
            vendors = self._broken_chain(node)
            if vendors:
                self._scopes.append(vendors)
                self._heads.append(id(node))
        if self._scopes:
            self._statement(node.test, code(node.test), test=True)

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        if self._heads and self._heads[-1] == id(original):
            self._heads.pop()
            self._scopes.pop()
        return updated

    def _broken_chain(self, node: cst.If) -> str:
        """The vendors of one `if`/`elif` chain with an arm per accelerator vendor (XPU, HPU, ...) that tests the
        NPU where no arm names CUDA any more (its CUDA arm was renamed: convert leaves such a decision whole), or
        "" for any other chain."""
        tests = list(chain_tests(node))
        current = node.orelse
        while isinstance(current, cst.If):
            self._elifs.add(id(current))
            current = current.orelse
        vendors = {next(g for g in m.groups() if g) for t in tests for m in VENDOR_ARM.finditer(code(t))}
        if not vendors or not any(_NPU_TEST.search(code(t)) for t in tests) or _CUDA_NAME.search(code(node)):
            return ""
        return ", ".join(sorted(v.upper() for v in vendors))

    def _statement(self, node: cst.CSTNode, text: str, test: bool = False) -> None:
        found = _NPU_NAME.search(text) or (_NPU_TEST.search(text) if test and self._heads else None)
        if found is not None:
            where = "this module" if not self._heads else "this decision"
            self.report(node, f"{where} picks among accelerators ({self._scopes[-1]}) and names "
                              f"`{found.group().strip(chr(39) + chr(34) + '(.')}` here, but CUDA nowhere any more: "
                              "CUDA's arms were renamed, so the NPU runs code written for CUDA",
                        hint="restore CUDA's arm and give the NPU an arm of its own beside it")

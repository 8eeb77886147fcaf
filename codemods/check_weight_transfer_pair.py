"""`weight-transfer-pair`: vLLM's weight-transfer backend and the trainer's engine name different libraries."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.dispatch import NPU_WORD, code
from npu_port.transpiler.core.rules import PythonRule

_NCCL_ENGINE = "vllm.distributed.weight_transfer.nccl_engine."
_HCCL_ENGINE = "vllm_ascend.distributed.weight_transfer.hccl_engine."


def _string_leaves(node: cst.BaseExpression) -> list[cst.SimpleString]:
    """The string literals a value can be: `"hccl"`, either arm of `"ipc" if hybrid else "hccl"`; none of a
    choice by device (`"hccl" if current_platform.device_type == "npu" else "nccl"`: each arm has its side)."""
    if isinstance(node, cst.SimpleString):
        return [node]
    if isinstance(node, cst.IfExp) and NPU_WORD.search(code(node.test)) is None:
        return _string_leaves(node.body) + _string_leaves(node.orelse)
    return []


class WeightTransferPair(PythonRule):
    """Reports a vLLM weight-transfer backend that the trainer side of the same file does not speak.

    What it does:
        In a file that builds `WeightTransferConfig(backend=...)` (vLLM's, the inference side: its workers
        receive through the engine the backend names) and uses a trainer-side engine class
        (`NCCLWeightTransferEngine.trainer_init / trainer_send_weights`, `NCCLTrainerSendWeightsArgs`, or
        vllm-ascend's `HCCLWeightTransferEngine` ...), reports (error) the pair that cannot meet:
        - backend `"hccl"` with vLLM's NCCL engine: the workers wait on HCCL, the trainer broadcasts
          through NCCL (which does not run on the NPU): reported at the NCCL engine's use;
        - backend `"nccl"` with vllm-ascend's HCCL engine: reported at the backend value.
        A backend given as a variable or chosen by device, an engine from another file, and a file that
        imports both engines (one per device) are not judged.

    Why:
        A port renames the backend string (`"nccl"` -> `"hccl"`, what vllm-ascend registers) and leaves the
        engine import, or ports the import and not the string; either way the trainer and the vLLM
        workers join different collectives and the first weight sync hangs or fails. vllm-ascend's own
        example pairs `WeightTransferConfig(backend="hccl")` with `HCCLWeightTransferEngine` (convert's
        vllm-pyhccl ports the engine import, nccl-backend the string).

    Example:
        from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine
        llm = LLM(model, weight_transfer_config=WeightTransferConfig(backend="hccl"))
        group = NCCLWeightTransferEngine.trainer_init(info)                     # error
        should read:
        from vllm_ascend.distributed.weight_transfer.hccl_engine import HCCLWeightTransferEngine

    Fix safety:
        Report-only: use vllm-ascend's HCCL engine on the trainer side with the "hccl" backend.
    """

    ID = "weight-transfer-pair"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("WeightTransferConfig",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # What the rule reports needs a backend literal and the other library's engine, reached through an
        # import of its module (`...nccl_engine` / `...hccl_engine` spelled in the code); a file that names
        # both modules picks one by device and is not judged (as in leave_Module, on the same text).
        if not facts.has_word("WeightTransferConfig") or ("nccl_engine" in facts.source and "hccl_engine" in facts.source):
            return False
        return (facts.any_string(lambda s: s == "hccl") and facts.has_word("nccl_engine")) \
            or (facts.any_string(lambda s: s == "nccl") and facts.has_word("hccl_engine"))

    def __init__(self, ctx):
        super().__init__(ctx)
        self._backends: list[cst.SimpleString] = []
        self._nccl_use: Optional[cst.CSTNode] = None
        self._hccl_use: Optional[cst.CSTNode] = None

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve(node.func) or ""
        if name.rsplit(".", 1)[-1] == "WeightTransferConfig" and name.startswith("vllm."):
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "backend":
                    self._backends += _string_leaves(arg.value)
            return
        self._engine_use(node.func, node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._engine_use(node, node)

    def _engine_use(self, expr: cst.BaseExpression, at: cst.CSTNode) -> None:
        name = self.ctx.resolve(expr) or ""
        if name.startswith(_NCCL_ENGINE) and self._nccl_use is None:
            self._nccl_use = at
        elif name.startswith(_HCCL_ENGINE) and self._hccl_use is None:
            self._hccl_use = at

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if "nccl_engine" in self.ctx.text and "hccl_engine" in self.ctx.text:
            return updated  # both engines imported: the file picks one by device (--keep-cuda's output)
        values = {b.evaluated_value for b in self._backends}
        if "hccl" in values and self._nccl_use is not None:
            self.report(self._nccl_use, "vLLM's NCCL weight-transfer engine beside WeightTransferConfig(backend="
                                        "\"hccl\"): the vLLM workers receive over HCCL, the trainer sends over NCCL",
                        severity="error", hint="use vllm-ascend's HCCLWeightTransferEngine (vllm_ascend.distributed."
                                               "weight_transfer.hccl_engine), which has the same trainer_init / "
                                               "trainer_send_weights")
        if self._hccl_use is not None:
            for backend in self._backends:
                if backend.evaluated_value == "nccl":
                    self.report(backend, "WeightTransferConfig(backend=\"nccl\") beside vllm-ascend's HCCL "
                                         "weight-transfer engine: the trainer sends over HCCL, the vLLM workers "
                                         "wait on NCCL", severity="error",
                                hint="backend=\"hccl\" (vllm-ascend registers its HCCL engine under that name)")
        return updated

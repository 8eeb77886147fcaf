from __future__ import annotations

from typing import Optional

import libcst as cst

from npu_port.codemods._communicators import Communicator, communicators, portable_communicator
from npu_port.codemods._device_agnostic import DeviceAgnostic
from npu_port.transpiler.analysis.imports import dotted_expr, dotted_name
from npu_port.transpiler.core.rules import PythonRule

KEPT_HINT = "port the transfer to all_reduce/broadcast, or to torch.distributed with the hccl backend"


def kept_message(qualified: str, row: Communicator, text: str) -> str:
    """The report of an import left for a method the counterpart lacks."""
    return (f"`{qualified.rsplit('.', 1)[-1]}` is used with `.{row.method_missing_on_npu(text)}()`, "
            "which vllm-ascend's PyHcclCommunicator lacks; left unchanged")


class VllmPyHccl(PythonRule):
    """Import vllm-ascend's PyHcclCommunicator where a file imports vLLM's PyNcclCommunicator.

    What it does:
        `from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator` becomes
        `from vllm_ascend.distributed.device_communicators.pyhccl import PyHcclCommunicator as
        PyNcclCommunicator`: the uses keep their name, as verl and trl write it. Only where the file calls
        no method that the HCCL communicator lacks (`send`, `recv`, `all_gather`, `reduce_scatter`, ...:
        codemods/data/ascend/communicators.yaml); otherwise the import stays and is reported with the
        method, as is an import under another name (`import ...pynccl as m`). The same for vLLM's NCCL
        weight-transfer engine: `from vllm.distributed.weight_transfer.nccl_engine import
        NCCLTrainerSendWeightsArgs, NCCLWeightTransferEngine` becomes vllm-ascend's `HCCLTrainerSendWeightsArgs
        as NCCLTrainerSendWeightsArgs, HCCLWeightTransferEngine as NCCLWeightTransferEngine` (the trainer side
        of the "hccl" weight-transfer backend that nccl-backend writes into WeightTransferConfig). A statement
        moves whole or not at all: one that also imports a name without a counterpart stays, reported by
        unsupported-cuda-libs.

    Why:
        PyNcclCommunicator loads libnccl through ctypes and fails on Ascend; vllm-ascend's
        PyHcclCommunicator takes the same (group, device) arguments and has all_reduce and broadcast,
        what weight synchronisation between a trainer and vLLM uses.

    Example:
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        ->  from vllm_ascend.distributed.device_communicators.pyhccl import PyHcclCommunicator as PyNcclCommunicator

    With --keep-cuda:
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        ->  if current_platform.device_type == "npu":
                from vllm_ascend.distributed.device_communicators.pyhccl import PyHcclCommunicator as PyNcclCommunicator
            else:
                from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        (vLLM's platform answers "npu" under vllm-ascend; verl files test `is_npu_available`)

    Fix safety:
        review: the counterpart's methods are checked by name, not their arguments (broadcast(tensor, src,
        stream=None) in both); vllm-ascend must be installed on the NPU host.
    """

    ID = "vllm-pyhccl"
    SAFETY = "review"
    TRIGGERS = ("PyNcclCommunicator", "nccl_engine")

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.ImportFrom):
            return updated
        node = updated.body[0]
        module = dotted_name(node.module) if node.module is not None and not node.relative else None
        if module is None or isinstance(node.names, cst.ImportStar):
            return updated
        rows = [communicators(self.ctx.target).get(f"{module}.{dotted_name(alias.name)}") for alias in node.names]
        if not any(rows):
            return updated
        # One statement, one decision: every name it imports has a counterpart the file can use, or none moves
        # (`from ...nccl_engine import NCCLTrainerSendWeightsArgs, NCCLWeightTransferEngine` moves whole).
        for alias, row in zip(node.names, rows):
            qualified = f"{module}.{dotted_name(alias.name)}"
            if row is None:
                return updated  # unsupported-cuda-libs reports the statement
            if portable_communicator(self.ctx.target, qualified, self.ctx.text) is None:
                self.report(original, kept_message(qualified, row, self.ctx.text), hint=KEPT_HINT)
                return updated
        npu_module = rows[0].npu.rsplit(".", 1)[0]  # type: ignore[union-attr]
        if any(r.npu.rsplit(".", 1)[0] != npu_module for r in rows):  # type: ignore[union-attr]
            return updated
        aliases = []
        for alias, row in zip(node.names, rows):
            qualified = f"{module}.{dotted_name(alias.name)}"
            local = dotted_name(alias.asname.name) if alias.asname is not None else qualified.rsplit(".", 1)[-1]
            npu_name = row.npu.rsplit(".", 1)[1]  # type: ignore[union-attr]
            aliases.append(cst.ImportAlias(name=cst.Name(npu_name), asname=cst.AsName(name=cst.Name(local or npu_name)),
                                           comma=alias.comma))
        npu = updated.with_changes(body=[cst.ImportFrom(module=dotted_expr(npu_module),  # type: ignore[arg-type]
                                                        names=aliases)])
        shown = ", ".join(f"`{r.cuda}` -> `{r.npu}`" for r in rows if r is not None)
        locals_ = ", ".join(a.asname.name.value for a in aliases
                            if a.asname is not None and isinstance(a.asname.name, cst.Name))
        return self.rewrite(original, updated, npu, f"{shown} (as {locals_})",
                            portable=lambda: self._branch(updated, npu))

    def _branch(self, cuda_line: cst.SimpleStatementLine, npu_line: cst.SimpleStatementLine) -> Optional[cst.If]:
        """--keep-cuda: both imports, chosen by the device at run time."""
        test = DeviceAgnostic.of(self.ctx).is_npu()
        return cst.If(test=test, body=cst.IndentedBlock(body=[npu_line.with_changes(leading_lines=())]),
                      orelse=cst.Else(body=cst.IndentedBlock(body=[cuda_line.with_changes(leading_lines=())])),
                      leading_lines=cuda_line.leading_lines)

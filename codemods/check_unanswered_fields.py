"""`npu-unanswered-field`: the NPU's answer read for a field it does not fill."""

from __future__ import annotations

import libcst as cst

from npu_port.codemods._torch_cuda_table import table_for
from npu_port.codemods.torch_cuda_api import unanswered_reads
from npu_port.transpiler.core.rules import PythonRule


class NpuUnansweredField(PythonRule):
    """Reports a torch.npu call whose result is read for a field the NPU leaves unanswered.

    What it does:
        For the functions of torch-cuda-api's `unanswered_results` table (torch_cuda.yaml), in their
        torch.npu spelling: a file that reads such a field of the result (directly,
        `torch.npu.get_device_properties(i).multi_processor_count`, or through a name assigned from the
        call) gets an error at each call. It is the knowledge torch-cuda-api converts by: that rule leaves
        these calls for CUDA, so this rule finds them where a person or another tool renamed them.

    Why:
        torch_npu's `_NPUDeviceProperties` fills name, total_memory, cube_core_num, vector_core_num,
        L2_cache_size and uuid; `major`, `minor`, `multi_processor_count` and the other CUDA fields read 0
        (or are missing in older releases): a Triton grid sized from them has no blocks, a capability check
        says "too old" (axolotl-ai-cloud/axolotl's kernels read them).

    Example:
        sm_count = torch.npu.get_device_properties(x.device).multi_processor_count    # error

    Fix safety:
        Report-only: keep the path for CUDA, or compute the value another way on the NPU (its core counts).
    """

    ID = "npu-unanswered-field"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("get_device_properties",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Exact: the very reading the rule starts from (a file that reads no unanswered field has nothing to
        # report), on the same text.
        return bool(unanswered_reads(table_for(options.target, options.rules_files), facts.source))

    def __init__(self, ctx):
        super().__init__(ctx)
        table = table_for(ctx.target, ctx.options.rules_files)
        reads = unanswered_reads(table, ctx.text)  # by the function's last name, whichever module it is read of
        self._fields = {table.translate(function) or function: field for function, field in reads.items()}

    def visit_Call(self, node: cst.Call) -> None:
        if not self._fields:
            return
        name = self.ctx.resolve(node.func) or ""
        if name.startswith("torch_npu.npu."):
            name = "torch.npu." + name[len("torch_npu.npu."):]
        field = self._fields.get(name)
        if field is not None:
            self.report(node, f"`{name}` is read for `.{field}` in this file, which the NPU does not answer (0 or "
                              "missing)", severity="error",
                        hint="torch.npu.get_device_properties() fills name, total_memory, cube_core_num, "
                             "vector_core_num and L2_cache_size; keep this path for CUDA")

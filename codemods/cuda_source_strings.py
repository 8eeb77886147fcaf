"""CUDA C++ held in Python strings (`cuda_sources=`, `cp.RawKernel(...)`): each kernel on its own line."""

from __future__ import annotations

import libcst as cst

from npu_port.codemods.cuda_kernel_sources import HINT, kernel_sites
from npu_port.transpiler.core.rules import PythonRule


class CudaSourceStrings(PythonRule):
    """Reports each CUDA kernel and kernel launch written inside a Python string.

    What it does:
        Reads every string literal that holds CUDA C++ (a `__global__` function): the
        `cuda_sources=` of `torch.utils.cpp_extension.load_inline`, a `CUDA_SRC = \"\"\"...\"\"\"`
        constant, the source of `cupy.RawKernel` or `cupy.RawModule`. Each kernel definition and
        each `name<<<grid, block>>>(...)` launch in it is reported on the line where it is written,
        as `cuda-kernel-sources` does for `.cu` files. A string that only mentions CUDA gets nothing.

    Why:
        These kernels are compiled by nvcc (or NVRTC) when the code runs, so the Python file looks
        like plain Python and the CUDA inside it would otherwise reach the NPU host unnoticed. Each
        kernel needs porting to Ascend C, or replacing with torch / torch_npu operators; the call
        that compiles the string is reported by `unsupported-cuda-libs`.

    Example:
        CUDA_SRC = \"\"\"
        __global__ void bias_gelu(float* x, int n) { ... }   ->  warning on this line: CUDA kernel `bias_gelu`
        \"\"\"

    Fix safety:
        Report-only: nothing is rewritten.
    """

    ID = "cuda-source-strings"
    SAFETY = "report-only"
    TRIGGERS = ("__global__",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.any_string(lambda s: "__global__" in s)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        raw = node.value
        if "__global__" not in raw:
            return
        try:
            text = node.evaluated_value
        except Exception:  # an invalid escape: the compiler would refuse it as well
            return
        if not isinstance(text, str):
            return
        pos = self.ctx.position(node)
        if pos is None:
            return
        # Offsets in the evaluated text map to lines through the raw literal: escapes never hold a
        # newline, so the n-th line of the value is the n-th line of the literal.
        prefix = len(raw) - len(raw.lstrip("rRbBuUfF"))
        quote = raw[-1]
        body_start = prefix + (3 if raw[prefix:prefix + 3] == quote * 3 else 1)
        first_col = pos.start.column + 1 + body_start
        for offset, message in kernel_sites(text, definitions_only=True):
            line_in_string = text.count("\n", 0, offset)
            line = pos.start.line + line_in_string
            col = (first_col + offset) if line_in_string == 0 else offset - text.rfind("\n", 0, offset)
            self.ctx.add(self.ID, line, col, f"{message} (CUDA C++ in a Python string)", severity="warning",
                         hint=HINT)

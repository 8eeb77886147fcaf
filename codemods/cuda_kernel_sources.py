"""CUDA C++ sources (.cu, .cuh): every kernel and kernel launch is reported; nothing is rewritten."""

from __future__ import annotations

import re

from npu_port.transpiler.core.rules import TextRule
from npu_port.transpiler.text.text_edits import LineIndex

# Comments and literals, blanked before searching so that a `__global__` in a comment is not a kernel.
_COMMENT_OR_LITERAL = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', re.S)
_KERNEL = re.compile(r"\b__global__\b([^;{]*)")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_NAME_BEFORE_PARAMS = re.compile(r"([A-Za-z_]\w*)\s*\(")
_VOID = re.compile(r"\bvoid\b")
_LAUNCH = re.compile(r"\b([A-Za-z_][\w:]*)\s*(?:<[^<>;]*>\s*)?<<<")
HINT = ("port the kernel to Ascend C (or replace it with torch / torch_npu operators) and build it with the "
        "CANN toolkit; its CUDAExtension / load() build is reported by unsupported-cuda-libs")


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def kernel_sites(text: str, *, definitions_only: bool = False) -> list[tuple[int, str]]:
    """(offset, message) of each kernel definition and launch in CUDA C++ `text`, in order.

    `definitions_only` keeps a `__global__` only where a `void name(` follows it, as every kernel
    definition has: a string of prose that mentions the keyword is no source.
    """
    code = _COMMENT_OR_LITERAL.sub(_blank, text)  # same offsets, comments and literals blanked
    sites = []
    for m in _KERNEL.finditer(code):
        head = _LAUNCH_BOUNDS.sub("", m.group(1))
        names = _NAME_BEFORE_PARAMS.findall(head)
        if definitions_only and not (names and _VOID.search(head)):
            continue
        what = f"CUDA kernel `{names[0]}`" if names else "a CUDA kernel"
        sites.append((m.start(), f"{what} does not run on Ascend NPU"))
    for m in _LAUNCH.finditer(code):
        sites.append((m.start(), f"launch of CUDA kernel `{m.group(1)}` does not run on Ascend NPU"))
    return sorted(sites)


class CudaKernelSources(TextRule):
    """Reports each CUDA kernel and kernel launch in `.cu` and `.cuh` files.

    What it does:
        In CUDA C++ sources, reports every kernel definition (`__global__`) and every kernel launch
        (`name<<<grid, block>>>(...)`) with its line, outside comments and string literals. A source
        with neither (host-only helpers) gets no finding.

    Why:
        nvcc-compiled kernels do not run on an Ascend NPU: each needs porting to Ascend C, or replacing
        with torch / torch_npu operators, and the build that compiles it goes with it. Without this
        rule such files would be copied into the output without a word.

    Example:
        __global__ void scale(float* x, float a)   ->  unchanged; warning: CUDA kernel `scale`
        scale<<<blocks, 256>>>(x, 2.0f);            ->  unchanged; warning: launch of `scale`

    Fix safety:
        Report-only: nothing is rewritten.
    """

    ID = "cuda-kernel-sources"
    LANGUAGE = "cuda"
    SAFETY = "report-only"
    TRIGGERS = ("__global__", "<<<")

    def apply(self, text: str) -> str:
        lines = LineIndex(text)
        for offset, message in kernel_sites(text):
            self._report(lines, offset, message)
        return text

    def _report(self, lines: LineIndex, offset: int, message: str) -> None:
        line, col = lines.line_col(offset)
        self.ctx.add(self.ID, line, col, message, severity="warning", hint=HINT)

"""`vendor-identity`: one class or one device string that says CUDA and the NPU at once."""

from __future__ import annotations

import re

import libcst as cst

from npu_port.transpiler.analysis.dispatch import code, vendor_class_guard
from npu_port.transpiler.core.rules import PythonRule

# What a class of another vendor must not declare: the NPU's device, backend, Ray resource, variables, module.
_NPU_IDENTITY = re.compile(r"""["'](?:npu|hccl|NPU|HCCL)["']|\bASCEND_RT_VISIBLE_DEVICES\b|\btorch\.npu\.\w+""")
# A CUDA device string built around an NPU index: f"cuda:{torch.npu.current_device()}", "cuda:" + str(...).
_CUDA_WITH_NPU_INDEX = re.compile(r"""f["']cuda:\{[^}]*\btorch(?:_npu)?\.npu\.|["']cuda:["']\s*\+\s*str\([^)]*\btorch\.npu\.""")


class VendorIdentity(PythonRule):
    """Reports a class named for CUDA or ROCm that declares the NPU, and a CUDA device string built on an NPU
    index.

    What it does:
        Reports as errors:
        - in a class whose name says it is another vendor's (`CudaPlatform`, `ROCmPlatform`,
          `CUDAGraphWrapper`), an NPU value or call: `device_type = "npu"`, `communication_backend =
          "hccl"`, `Event = torch.npu.Event`, `"ASCEND_RT_VISIBLE_DEVICES"`;
        - `f"cuda:{torch.npu.current_device()}"` (or `"cuda:" + str(torch.npu...)`): a CUDA device named
          with an NPU's index.

    Why:
        A project with its own platform layer keeps a class per vendor; a port that renames the CUDA class
        to the NPU's values leaves two NPU classes and no CUDA one, and the detection that picks between
        them now picks wrong on both hosts (alibaba/ROLL's roll/platforms). A device string half-renamed
        sends tensors to "cuda:N" on an NPU host.

    Example:
        class CudaPlatform(Platform):
            device_type: str = "npu"                   # error
        return f"cuda:{torch.npu.current_device()}"    # error

    Fix safety:
        Report-only: restore the CUDA class's values (the NPU's belong to the NPU class), and port the
        device string whole (`f"npu:{torch.npu.current_device()}"`) or not at all.
    """

    ID = "vendor-identity"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("cuda:",)
    TRIGGER_PATTERNS = (r"class\s+\w*(?:Cuda|CUDA|Nvidia|NVIDIA|Rocm|ROCm|ROCM|Hip|HIP)",)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if vendor_class_guard(node) is None:
            return
        for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            found = _NPU_IDENTITY.search(code(statement))
            if found is not None:
                self.report(statement, f"`{node.name.value}` is named for another vendor but declares the NPU "
                                       f"(`{found.group()}`): its CUDA identity was renamed", severity="error",
                            hint="restore the CUDA class's values; the NPU's belong to the NPU class")

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if _CUDA_WITH_NPU_INDEX.search(code(node)):
            self.report(node, "a CUDA device string built on an NPU index: half of a port", severity="error",
                        hint='name the NPU device whole: f"npu:{torch.npu.current_device()}"')

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        left = node.left
        if isinstance(node.operator, cst.Add) and isinstance(left, cst.SimpleString) \
                and left.raw_value == "cuda:" and "torch.npu." in code(node.right):
            self.report(node, "a CUDA device string built on an NPU index: half of a port", severity="error",
                        hint='name the NPU device whole: "npu:" + str(torch.npu.current_device())')

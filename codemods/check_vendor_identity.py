"""`vendor-identity`: one class or one device string that says CUDA and the NPU at once."""

from __future__ import annotations

import re

import libcst as cst

from npu_port.transpiler.analysis.dispatch import code, vendor_class_guard
from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.core.rules import PythonRule

# What a class of another vendor must not declare: the NPU's device, backend, Ray resource, variables, module.
_NPU_IDENTITY = re.compile(r"""["'](?:npu|hccl|NPU|HCCL)["']|\bASCEND_RT_VISIBLE_DEVICES\b|\btorch\.npu\.\w+""")
# A CUDA device string built around an NPU index: f"cuda:{torch.npu.current_device()}", "cuda:" + str(...).
# A class's own declaration of a device identity: `name: T = "value"` at the class level, by value. A
# class that declares values of both columns (one NPU value, one CUDA value, each under a name that does
# not say its vendor) is a single device's class half renamed: ROLL's UnknownPlatform with device_type
# "npu" beside dispatch_key "CUDA" and ray_device_key "GPU".
_NPU_VALUES = frozenset({"npu", "NPU", "hccl", "HCCL", "ASCEND_RT_VISIBLE_DEVICES",
                         "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"})
_CUDA_VALUES = frozenset({"cuda", "CUDA", "nccl", "NCCL", "GPU", "CUDA_VISIBLE_DEVICES",
                          "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"})
_VENDOR_WORD = re.compile(r"(?i)cuda|npu|gpu|nccl|hccl|ascend|nvidia|rocm|hip|amd")
_CUDA_PREFIX = re.compile("cuda:")
_VENDOR_CLASS = re.compile(r"class\s+\w*(?:Cuda|CUDA|Nvidia|NVIDIA|Rocm|ROCm|ROCM|Hip|HIP)")
_CUDA_WITH_NPU_INDEX = re.compile(r"""f["']cuda:\{[^}]*\btorch(?:_npu)?\.npu\.|["']cuda:["']\s*\+\s*str\([^)]*\btorch\.npu\.""")


class VendorIdentity(PythonRule):
    """Reports a class named for CUDA or ROCm that declares the NPU, and a CUDA device string built on an NPU
    index.

    What it does:
        Reports as errors:
        - in a class of no vendor's name, a class-level NPU value (`device_type = "npu"`,
          `communication_backend = "hccl"`) beside a CUDA one (`dispatch_key = "CUDA"`,
          `ray_device_key = "GPU"`, `"CUDA_VISIBLE_DEVICES"`), each under a name that does not say its
          vendor (`cuda_backend = "nccl"` beside `npu_backend = "hccl"` is a table, not reported): one
          device's class half renamed (ROLL's UnknownPlatform);
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
    TRIGGER_PATTERNS = (r"class\s+\w*(?:Cuda|CUDA|Nvidia|NVIDIA|Rocm|ROCm|ROCM|Hip|HIP)",
                        r"""(?:npu|NPU|hccl|HCCL|ASCEND_RT_VISIBLE_DEVICES)["']""")

    @classmethod
    def scout(cls, facts, options) -> bool:
        # A class named for another vendor, a "cuda:" string, or a class beside an NPU and a CUDA value.
        if facts.search(_CUDA_PREFIX) or facts.search_code(_VENDOR_CLASS):
            return True
        return facts.has_word("class") and facts.any_string(_NPU_VALUES.__contains__) \
            and facts.any_string(_CUDA_VALUES.__contains__)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if vendor_class_guard(node) is None:
            self._mixed_identity(node)
            return
        for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            found = _NPU_IDENTITY.search(code(statement))
            if found is not None:
                self.report(statement, f"`{node.name.value}` is named for another vendor but declares the NPU "
                                       f"(`{found.group()}`): its CUDA identity was renamed", severity="error",
                            hint="restore the CUDA class's values; the NPU's belong to the NPU class")

    def _mixed_identity(self, node: cst.ClassDef) -> None:
        npu: list[tuple[cst.CSTNode, str, str]] = []
        cuda: list[str] = []
        for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            declared = _declared_value(statement)
            if declared is None:
                continue
            name, value = declared
            if value in _NPU_VALUES:
                npu.append((statement, name, value))
            elif value in _CUDA_VALUES:
                cuda.append(f'{name} = "{value}"')
        if not npu or not cuda:
            return
        for declaration, name, value in npu:
            self.report(declaration, f'`{node.name.value}` declares the NPU (`{name} = "{value}"`) and CUDA '
                                   f'(`{"`, `".join(cuda[:3])}`): one device\'s identity half renamed',
                        severity="error", hint="give the class one device's values throughout; where the project "
                                               "has an NPU class already, restore this one's CUDA values")

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


def _declared_value(statement: cst.BaseStatement) -> tuple[str, str] | None:
    """(name, value) of a class-level `name = "value"` / `name: T = "value"` whose name does not say its
    vendor, else None."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target, value = small.targets[0].target, small.value
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        target, value = small.target, small.value
    else:
        return None
    if not isinstance(target, cst.Name) or _VENDOR_WORD.search(target.value):
        return None
    text = string_value(value)
    return (target.value, text) if text is not None else None

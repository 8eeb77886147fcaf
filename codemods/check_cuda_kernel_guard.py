"""`cuda-kernel-guard`: a guard in front of a CUDA-only kernel that was made to let NPU tensors in."""

from __future__ import annotations

import re
from functools import cache
from typing import Optional

import libcst as cst

from npu_port.codemods.unsupported_cuda_libs import (
    KernelScopes,
    compiled_extension_row,
    cuda_only_kernel_import,
    library_rows,
)
from npu_port.transpiler.analysis.dispatch import SAYS_NPU, code, npu_framework_file, says_cuda
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.project_devices import imports_from_project
from npu_port.transpiler.core.rules import PythonRule

# An assert that admits an NPU tensor: `.is_npu`, which convert never writes into an assert (it leaves
# `assert x.is_cuda`, the guard of a CUDA-only kernel); `assert t.device.type == "npu"` is a test's check of
# where a tensor is, which convert writes, and is not judged. The negated forms guard a raise:
# `x.device.type != "npu"`, `not x.is_npu`.
_ADMITS_NPU = re.compile(r"\.is_npu\b")
_REFUSES_NON_NPU = re.compile(r"""!=\s*["']npu["']|^\s*not\s+[\w.\[\]()]+\.is_npu\s*$""")
# A message that still demands CUDA (and says nothing of the NPU): the guard was renamed, its reason was not.
@cache
def _kernel_modules(target: str) -> tuple[str, ...]:
    """The modules cuda_only_kernel_import knows (the rows' modules it answers for)."""
    return tuple(r.module for r in library_rows(target) if cuda_only_kernel_import(target, r.module) is not None)


class CudaKernelGuard(PythonRule):
    """Reports a device guard of a CUDA-only kernel that now lets NPU tensors through.

    What it does:
        Reports as errors:
        - `assert x.is_npu` whose message still says the tensor must be on CUDA, or that stands in a
          module which imports a CUDA-only kernel library at its top level (the
          libraries of unsupported-cuda-libs: CuTe/CUTLASS, cuda.bindings, CuPy, PyCUDA, a `*_cuda`
          extension; Triton is not one, triton-ascend compiles it);
        - `if x.device.type != "npu": raise ...("... requires CUDA ...")`, the same guard as an `if`;
        - `.is_npu` outside an assert, in a function that launches a GPU kernel (a Triton kernel, a call of a
          CUDA-only kernel library, a function imported from a module of the project that defines Triton
          kernels or imports such a library; any function of a module that registers operators for CUDA alone,
          `torch.library.custom_op(..., device_types="cuda")`), such as `if x.is_npu:` in front of a Triton launch.

    Why:
        `assert x.is_cuda` is the last line before a kernel that runs on CUDA alone; convert leaves it (with
        an info). Renamed to `is_npu`, the clear error becomes a crash or a hang inside the CUDA launch on the
        NPU host, and on a CUDA host the kernel now refuses the tensors it was written for.

    Example:
        import cutlass.cute as cute
        assert x.is_npu, "Tensors must be on CUDA device"      # error
        should read:
        assert x.is_cuda, "Tensors must be on CUDA device"     (and an NPU path beside the kernel)

    Fix safety:
        Report-only: restore the CUDA guard, and give the NPU its own path (torch / torch_npu ops) in front
        of it.
    """

    ID = "cuda-kernel-guard"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("is_npu",)
    TRIGGER_PATTERNS = (r"""npu(?<=["']npu)(?=["'])""",)  # an "npu" value (the scout's other guard)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # A guard: an `assert` of `.is_npu`, or a `raise` beside an NPU test (`.is_npu`, an "npu" value); and
        # a reason (a message that says CUDA, or a CUDA-only kernel library imported: every part of its name
        # spelled in the code, or a `*_cuda` extension). The guard's words are the cheaper question.
        if facts.has_word("is_npu") and (facts.has_word("triton", "device_types", "register_kernel")
                                         or imports_from_project(facts, beside=True)) \
                and not npu_framework_file(facts.path, facts.code):  # (vllm-ascend's Triton kernels are NPU ones)
            return True  # `.is_npu` in a function that launches a kernel (its own Triton one, or a wrapper)
        if not (facts.has_all_words("assert", "is_npu") or facts.has_word("raise") and (
                facts.has_word("is_npu") or facts.any_string(lambda s: s == "npu"))):
            return False
        suffixes = compiled_extension_row(options.target)[0]
        return (facts.any_string(says_cuda) or any(facts.may_name(m) for m in _kernel_modules(options.target))
                or facts.unsure or any(r.endswith(suffixes) for r in facts.imported_roots))

    def __init__(self, ctx):
        super().__init__(ctx)
        self._kernel_library: Optional[str] = None
        self._asserts = 0
        self._kernels = KernelScopes(ctx)  # read on the first `.is_npu` met in a function
        for statement in ctx.module.body:  # top-level imports only: a guarded or local one may be optional
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                for module in _imported_modules(small):
                    what = cuda_only_kernel_import(ctx.target, module)
                    if what is not None and self._kernel_library is None:
                        self._kernel_library = f"`{module}` ({what})"

    # -- `.is_npu` testing for the kernel path of a function that launches a kernel ----------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._kernels.enter()

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._kernels.leave()
        return updated

    def visit_Assert(self, node: cst.Assert) -> None:
        self._asserts += 1
        self._judge_assert(node)

    def leave_Assert(self, original: cst.Assert, updated: cst.Assert) -> cst.Assert:
        self._asserts -= 1
        return updated

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "is_npu" or self._asserts or self.ctx.dispatch.npu_framework:
            return
        if self._kernels.innermost_launches():
            self.report(node, "`.is_npu` in a function that launches a GPU kernel (Triton, DeepGEMM, CuTe, ...): "
                              "it now sends NPU tensors down the kernel path, which took CUDA tensors alone",
                        severity="error", hint="test `.is_cuda` for the kernel path (the NPU takes the other one) "
                                               "until the kernel runs on the NPU")

    def _why(self, message: Optional[cst.BaseExpression]) -> Optional[str]:
        text = code(message) if message is not None else ""
        if says_cuda(text):
            return "its message still demands CUDA"
        if self._kernel_library is not None:
            return f"this module runs a CUDA-only kernel library, {self._kernel_library}"
        return None

    def _judge_assert(self, node: cst.Assert) -> None:
        test = code(node.test)
        if _ADMITS_NPU.search(test) is None or SAYS_NPU.search(code(node.msg) if node.msg else ""):
            return
        why = self._why(node.msg)
        if why is not None:
            self.report(node, f"this assert now lets NPU tensors into a CUDA-only kernel ({why}): a guard renamed "
                              "for the NPU", severity="error",
                        hint="restore `.is_cuda` / \"cuda\" here and give the NPU a path of its own before the kernel")

    def visit_If(self, node: cst.If) -> None:
        if _REFUSES_NON_NPU.search(code(node.test)) is None or not isinstance(node.body, cst.IndentedBlock):
            return
        body = node.body.body
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
            return
        raised = body[0].body[0]
        if not isinstance(raised, cst.Raise) or raised.exc is None:
            return
        message = raised.exc.args[0].value if isinstance(raised.exc, cst.Call) and raised.exc.args else None
        why = self._why(message)
        if why is not None:
            self.report(node.test, f"this guard now lets NPU tensors into a CUDA-only kernel ({why}): a guard "
                                   "renamed for the NPU", severity="error",
                        hint="restore the CUDA test here and give the NPU a path of its own before the kernel")


def _imported_modules(small: cst.BaseSmallStatement) -> list[str]:
    if isinstance(small, cst.Import):
        return [name for alias in small.names if (name := dotted_name(alias.name))]
    if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        module = dotted_name(small.module)
        if module is None:
            return []
        if isinstance(small.names, cst.ImportStar):
            return [module]
        return [module, *(f"{module}.{name}" for alias in small.names if (name := dotted_name(alias.name)))]
    return []

from __future__ import annotations

import libcst as cst

from npu_port.transpiler.core.rules import CUDA_WORD, PythonRule


class TensorCudaMethod(PythonRule):
    """Rewrite `.cuda()` calls to `.npu()` and `.is_cuda` to `.is_npu`.

    What it does:
        `x.cuda(...)` becomes `x.npu(...)` with the same arguments, and `t.is_cuda` becomes `t.is_npu`,
        on any object that is not an imported module (tensors, modules, storages).

    Why:
        torch_npu adds `Tensor.npu`, `Module.npu` and `Tensor.is_npu`; `.cuda()` fails without CUDA.

    Example:
        model = Net().cuda()            ->  model = Net().npu()
        if batch.is_cuda: ...           ->  if batch.is_npu: ...

    Fix safety:
        safe for torch objects. A user class with its own `cuda()` method would need a matching `npu()`;
        the change is visible in the diff. A file that assigns its own `x.is_cuda = ...` attribute keeps
        `is_cuda` throughout; other files reading that user attribute need a look in review.
    """

    ID = "tensor-cuda-method"
    SAFETY = "safe"
    TRIGGERS = ("is_cuda",)
    TRIGGER_PATTERNS = (CUDA_WORD,)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.has_word("cuda", "is_cuda")  # attribute names: code, never string contents

    def _is_module(self, node: cst.BaseExpression) -> bool:
        return self.ctx.resolve(node) is not None

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func = updated.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "cuda"
                and not self._is_module(original.func.value)):
            new = updated.with_changes(func=func.with_changes(attr=cst.Name("npu")))
            return self.rewrite(original, updated, new, "`.cuda()` -> `.npu()`")
        return updated

    def visit_Module(self, node: cst.Module) -> None:
        # A file that assigns `x.is_cuda = ...` has its own attribute of that name: leave its reads too.
        self._own_is_cuda = ".is_cuda =" in self.ctx.text or ".is_cuda=" in self.ctx.text

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if original.attr.value == "is_cuda" and not self._own_is_cuda and not self._is_module(original.value):
            return self.rewrite(original, updated, updated.with_changes(attr=cst.Name("is_npu")),
                                "`.is_cuda` -> `.is_npu`")
        return updated

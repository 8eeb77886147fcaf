from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from npu_port.codemods._device_agnostic import DeviceAgnostic
from npu_port.transpiler.analysis.imports import dotted_expr, dotted_name
from npu_port.transpiler.core.rules import CUDA_WORD, PythonRule
from npu_port.transpiler.tables.mapping import load_table

# Methods that return an object of the same class: `TensorDict(...).to("cpu")` is a TensorDict still.
_RETURN_SELF = frozenset({"cuda", "cpu", "to", "clone", "contiguous", "detach"})


# Names that hold a device index (`x.cuda(local_rank)`), not a device string or object.
_INDEX_NAME = re.compile(r"(?:^|_)(?:rank|idx|index|id|ordinal|gpu|gpu_id|device_id)$", re.I)


def _is_index(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Integer):
        return True
    name = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else None
    if isinstance(node, cst.Call):  # torch.cuda.current_device(), get_device_id(), int(...)
        func = dotted_name(node.func) or ""
        return func.rsplit(".", 1)[-1] in ("current_device", "get_device_id", "int", "current_device_index")
    return bool(name) and _INDEX_NAME.search(name) is not None


def _is_device_value(node: cst.BaseExpression) -> bool:
    """A device string or object the code builds right there: `"cuda:1"`, `f"cuda:{r}"`, `torch.device(...)`."""
    if isinstance(node, (cst.SimpleString, cst.FormattedString)):
        return True
    return isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("device") \
        and not (dotted_name(node.func) or "").endswith(("current_device", "get_device"))


# What the rule could rewrite, in the code without comments and strings (its scout): `.cuda` and, past
# closing parentheses, whitespace and backslash continuations, an opening one (`x.cuda(0)`,
# `(m.cuda)()`), or `.is_cuda`; the same may stand between the dot and the name.
_CUDA_METHOD = re.compile(r"\.[\s\\]*(?:cuda[\s\\)]*\(|is_cuda(?![A-Za-z0-9_]))")


def _on_accelerator(value: cst.BaseExpression) -> cst.BaseExpression:
    """--keep-cuda: `x.is_cuda` -> `x.device.type in ("cuda", "npu")`, True on either accelerator."""
    device = cst.Attribute(value=cst.Attribute(value=value, attr=cst.Name("device")), attr=cst.Name("type"))
    pair = cst.parse_expression('("cuda", "npu")')
    return cst.Comparison(left=device, comparisons=[cst.ComparisonTarget(cst.In(), pair)],
                          lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


class TensorCudaMethod(PythonRule):
    """Rewrite `.cuda()` calls to `.npu()` and `.is_cuda` to `.is_npu`.

    What it does:
        `x.cuda(...)` becomes `x.npu(...)` with the same arguments, and `t.is_cuda` becomes `t.is_npu`,
        on any object that is not an imported module (tensors, modules, storages). Objects of libraries
        that have `.cuda()` but no `.npu()` (tensordict's `TensorDict`, listed in
        `cuda_method_receivers.yaml`) get `.to("npu")` instead when the file shows what they are: the
        receiver is built by a call to such a class, or is a name assigned from one in the same scope.

    Why:
        torch_npu adds `Tensor.npu`, `Module.npu` and `Tensor.is_npu`; `.cuda()` fails without CUDA.

    Example:
        model = Net().cuda()            ->  model = Net().npu()
        if batch.is_cuda: ...           ->  if batch.is_npu: ...
        td = TensorDict(d, [2]).cuda()  ->  td = TensorDict(d, [2]).to("npu")

    With --keep-cuda:
        model = Net().cuda()            ->  model = Net().to(torch.accelerator.current_accelerator())
        x.cuda(rank, non_blocking=True) ->  x.to(torch.device(torch.accelerator.current_accelerator().type, rank), non_blocking=True)
        if batch.is_cuda: ...           ->  if (batch.device.type in ("cuda", "npu")): ...

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
        # Attribute names: code, never string contents; and only a `.cuda(...)` call or an `.is_cuda`
        # attribute is rewritten (Triton's `tl.extra.cuda.x()` goes unasked).
        return facts.has_word("cuda", "is_cuda") and facts.search_code(_CUDA_METHOD)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._to_device = tuple(load_table(ctx.target, "cuda_method_receivers")["to_device"])
        self._built: list[set[str]] = [set()]  # per scope: names assigned from such a class's call

    def _is_module(self, node: cst.BaseExpression) -> bool:
        return self.ctx.resolve(node) is not None

    def _builds_no_npu_object(self, node: cst.BaseExpression) -> bool:
        """A call of (a method of) a class listed in cuda_method_receivers: `TensorDict(...)`,
        `TensorDict.from_dict(...)`, or a name assigned from one in this scope."""
        if isinstance(node, cst.Name):
            return node.value in self._built[-1]
        if not isinstance(node, cst.Call):
            return False
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _RETURN_SELF:
            return self._builds_no_npu_object(node.func.value)  # TensorDict(...).cpu().cuda()
        name = self.ctx.resolve(node.func) or ""
        return any(name == p or (p.endswith(".*") and name.startswith(p[:-1])) for p in self._to_device)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._built.append(set())

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        self._built.pop()
        return updated

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                if self._builds_no_npu_object(node.value):
                    self._built[-1].add(target.target.value)
                else:
                    self._built[-1].discard(target.target.value)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func = updated.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "cuda"
                and not self._is_module(original.func.value)):
            if self._builds_no_npu_object(original.func.value):  # type: ignore[attr-defined]
                if updated.args:
                    self.report(original, "`.cuda(...)` on an object that has no `.npu()`; left unchanged",
                                hint='use .to("npu") (or .to(f"npu:{index}")) on the NPU')
                    return updated
                new = updated.with_changes(func=func.with_changes(attr=cst.Name("to")),
                                           args=[cst.Arg(cst.SimpleString('"npu"'))])
                return self.rewrite(original, updated, new, '`.cuda()` -> `.to("npu")` (the object has no `.npu()`)',
                                    portable=lambda: self._to_accelerator(updated))
            new = updated.with_changes(func=func.with_changes(attr=cst.Name("npu")))
            return self.rewrite(original, updated, new, "`.cuda()` -> `.npu()`",
                                portable=lambda: self._to_accelerator(updated))
        return updated

    def _to_accelerator(self, call: cst.Call) -> Optional[cst.Call]:
        """--keep-cuda: `.cuda(...)` -> `.to(<the accelerator>, ...)`. `.cuda(dev)` takes an index, a string or
        a torch.device: an index (an int, or a name that says it is one: `rank`, `local_rank`, `device_id`)
        goes with the device type (`.to(torch.device(<type>, rank))`), a device value is passed on as it is
        (`.cuda(torch.device("cuda", r))` -> `.to(torch.device(...))`, whose own string the device rule
        ports); an argument of unknown kind has no form."""
        agnostic = DeviceAgnostic.of(self.ctx)
        index = next((a for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
        if index is None:
            device = agnostic.device()
        elif index.star:
            return None
        elif _is_device_value(index.value):
            device = index.value
        elif _is_index(index.value):
            device = cst.Call(dotted_expr(f"{agnostic.torch_name()}.device"),
                              args=[cst.Arg(agnostic.device_type(available=True)), cst.Arg(index.value)])
        else:
            return None
        rest = [a for a in call.args if a is not index]
        func = call.func
        assert isinstance(func, cst.Attribute)
        return call.with_changes(func=func.with_changes(attr=cst.Name("to")),
                                 args=[cst.Arg(device, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                                       if rest else cst.Arg(device), *rest])

    def visit_Module(self, node: cst.Module) -> None:
        # A file that assigns `x.is_cuda = ...` has its own attribute of that name: leave its reads too.
        self._own_is_cuda = ".is_cuda =" in self.ctx.text or ".is_cuda=" in self.ctx.text

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if original.attr.value == "is_cuda" and not self._own_is_cuda and not self._is_module(original.value):
            return self.rewrite(original, updated, updated.with_changes(attr=cst.Name("is_npu")),
                                "`.is_cuda` -> `.is_npu`", portable=lambda: _on_accelerator(updated.value))
        return updated

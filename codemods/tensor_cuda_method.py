from __future__ import annotations

import re
from typing import Optional, cast

import libcst as cst

from npu_port.codemods._device_agnostic import DeviceAgnostic
from npu_port.codemods.unsupported_cuda_libs import KernelScopes
from npu_port.transpiler.analysis.dispatch import code
from npu_port.transpiler.analysis.imports import dotted_expr, dotted_name
from npu_port.transpiler.core.rules import CUDA_WORD, PythonRule
from npu_port.transpiler.tables.mapping import load_table

# Methods that return an object of the same class: `TensorDict(...).to("cpu")` is a TensorDict still.
RETURN_SELF = frozenset({"cuda", "cpu", "to", "clone", "contiguous", "detach"})


def lacks_npu_class(name: str, listed) -> bool:
    """Whether the qualified `name` is one of the classes (or builders) of cuda_method_receivers.yaml,
    whose objects have `.cuda()` but no `.npu()`; a listed `pkg.*` covers every name under pkg."""
    return any(name == p or (p.endswith(".*") and name.startswith(p[:-1])) for p in listed)


# Names that hold a device index (`x.cuda(local_rank)`), not a device string or object.
_INDEX_NAME = re.compile(r"(?:^|_)(?:rank|idx|index|id|ordinal|gpu|gpu_id|device_id)$", re.I)


def _is_index(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Integer):
        return True
    name = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else None
    if isinstance(node, cst.Call):  # torch.cuda.current_device(), get_device_id(), int(...)
        func = dotted_name(node.func) or ""
        return func.rsplit(".", 1)[-1] in ("current_device", "get_device_id", "int", "current_device_index")
    return name is not None and name != "" and _INDEX_NAME.search(name) is not None


def _is_device_value(node: cst.BaseExpression) -> bool:
    """A device string or object the code builds right there: `"cuda:1"`, `f"cuda:{r}"`, `torch.device(...)`."""
    if isinstance(node, (cst.SimpleString, cst.FormattedString)):
        return True
    return isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("device") \
        and not (dotted_name(node.func) or "").endswith(("current_device", "get_device"))


# Methods of a tensor or module that return a tensor or module again: `x.float().cuda()` is known to be torch's
# where `x` is.
_TORCH_METHODS = frozenset({"float", "half", "bfloat16", "double", "int", "long", "bool", "to", "contiguous",
                            "clone", "detach", "view", "reshape", "cpu", "cuda", "squeeze", "unsqueeze", "t",
                            "permute", "transpose", "expand", "repeat", "flatten", "type", "requires_grad_", "eval",
                            "train", "type_as", "view_as", "reshape_as", "pin_memory", "share_memory_"})
# Attributes that hold a tensor (a Parameter) on whatever module they are read from.
_TENSOR_ATTRIBUTES = frozenset({"weight", "bias", "grad"})
# What torch tensors and modules are, and the libraries whose calls build them.
_TORCH_TYPES = frozenset({"torch.Tensor", "torch.nn.Module", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_TORCH_BUILDERS = ("torch.", "transformers.")


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
    """Rewrite `.cuda()` calls for the NPU (`.npu()` or `.to("npu")`) and `.is_cuda` to `.is_npu`.

    What it does:
        `x.cuda(...)` becomes `x.npu(...)` with the same arguments where `x` is known to be a torch tensor
        or module: built by a torch or transformers call (`torch.zeros(...)`, `nn.Linear(...)`,
        `AutoModel.from_pretrained(...)`, a class of the file that subclasses `nn.Module`), a tensor
        method of one (`t.float()`), a Parameter attribute (`.weight`, `.bias`, `.grad`), a name assigned
        from one in the same scope, or a parameter annotated `torch.Tensor` / `nn.Module`. On anything
        else (a TensorDict, a data container returned by another module, a user class) `.cuda()`
        becomes `.to("npu")`, which tensors, modules and TensorDicts all have where not every object
        with `.cuda()` has `.npu()`: `.cuda(3)` / `.cuda(local_rank)` -> `.to("npu:3")` /
        `.to(f"npu:{local_rank}")`, a device value is passed on, `non_blocking=` stays; a device argument
        of unknown kind (`.cuda(dev)`) is left and reported. `t.is_cuda` becomes `t.is_npu`, on any
        object that is not an imported module, but not in an `assert`: `assert x.is_cuda` guards a kernel
        that runs on CUDA alone (reported, info), unless it asserts where the code just put the object
        (`assert torch.ones(1).cuda().is_cuda`, `m = Net().cuda()` then `assert m.weight.is_cuda` in the
        same scope): that `.cuda()` is ported, so is the assert, which would fail on the NPU. Nor where it
        picks a GPU kernel: in a function that launches one (a Triton kernel, DeepGEMM, CuTe, a project's
        kernel wrapper), or anywhere in a module that registers operators for CUDA alone
        (`torch.library.custom_op(..., device_types="cuda")`): left, with a warning.

    Why:
        torch_npu adds `Tensor.npu`, `Module.npu` and `Tensor.is_npu`; `.cuda()` fails without CUDA. A
        method the object lacks is worse than no rewrite: tensordict's `TensorDict.cuda()` exists,
        `TensorDict.npu()` does not (EasyR1's `DataProto.to` moved `data.batch.cuda(...)`).

    Example:
        model = Net().cuda()            ->  model = Net().npu()          (Net subclasses nn.Module)
        batch = data.batch.cuda()       ->  batch = data.batch.to("npu")  (type not known here)
        x = batch.cuda(local_rank)      ->  x = batch.to(f"npu:{local_rank}")
        if batch.is_cuda: ...           ->  if batch.is_npu: ...

    With --keep-cuda:
        model = Net().cuda()            ->  model = Net().to(torch.accelerator.current_accelerator())
        x.cuda(rank, non_blocking=True) ->  x.to(torch.device(torch.accelerator.current_accelerator().type, rank), non_blocking=True)
        if batch.is_cuda: ...           ->  if (batch.device.type in ("cuda", "npu")): ...

    Fix safety:
        safe for torch objects and TensorDicts. A user class with its own `cuda()` method and no `to()`
        needs a look in review (the diff shows `.to("npu")`). A file that assigns its own
        `x.is_cuda = ...` attribute keeps `is_cuda` throughout; other files reading that user attribute
        need a look in review.
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
        self._marks: dict[int, tuple[int, int]] = {}  # id(`.cuda(...)` call) -> the notes' mark at its visit
        self._to_device = tuple(load_table(ctx.target, "cuda_method_receivers")["to_device"])
        self._built: list[set[str]] = [set()]  # per scope: names assigned from such a class's call
        self._torch: list[set[str]] = [set()]  # per scope: names known to hold a torch tensor or module
        self._modules: set[str] = set()  # classes of this file that are torch modules
        self._asserts = 0  # depth of assert statements
        self._moved: list[set[str]] = [set()]  # per scope: names assigned from a `.cuda()` this walk rewrote
        self._kernels = KernelScopes(ctx)  # read on the first `.is_cuda` that would change

    def _is_torch_object(self, node: cst.BaseExpression) -> bool:
        """Whether `node` is known to be a torch tensor or module (which have `.npu()`): built by a torch
        or transformers call, a tensor method of one, a Parameter attribute (`.weight`), a name assigned
        from one in this scope or a parameter annotated as one. Anything else (a TensorDict, a data
        container from another module, a user class) may have `.cuda()` without `.npu()`."""
        if isinstance(node, cst.Name):
            return node.value in self._torch[-1]
        if isinstance(node, cst.Attribute):
            return node.attr.value in _TENSOR_ATTRIBUTES
        if not isinstance(node, cst.Call):
            return False
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _TORCH_METHODS \
                and self.ctx.resolve(node.func) is None:
            return self._is_torch_object(node.func.value)
        if isinstance(node.func, cst.Name) and node.func.value in self._modules:
            return True
        name = self.ctx.resolve(node.func) or ""
        return name.startswith(_TORCH_BUILDERS) and not self._builds_no_npu_object(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        """A class of this file that subclasses a torch module (directly, or through one defined above it)."""
        for base in node.bases:
            name = self.ctx.resolve(base.value) or ""
            if name.startswith("torch.nn.") or (isinstance(base.value, cst.Name) and base.value.value in self._modules):
                self._modules.add(node.name.value)
                return

    def _is_module(self, node: cst.BaseExpression) -> bool:
        return self.ctx.resolve(node) is not None

    def _builds_no_npu_object(self, node: cst.BaseExpression) -> bool:
        """A call of (a method of) a class listed in cuda_method_receivers: `TensorDict(...)`,
        `TensorDict.from_dict(...)`, or a name assigned from one in this scope."""
        if isinstance(node, cst.Name):
            return node.value in self._built[-1]
        if not isinstance(node, cst.Call):
            return False
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in RETURN_SELF:
            return self._builds_no_npu_object(node.func.value)  # TensorDict(...).cpu().cuda()
        name = self.ctx.resolve(node.func) or ""
        return lacks_npu_class(name, self._to_device)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._kernels.enter()
        self._moved.append(set())
        self._built.append(set())
        self._torch.append({p.name.value for p in (*node.params.params, *node.params.kwonly_params,
                                                    *node.params.posonly_params)
                            if p.annotation is not None
                            and self.ctx.resolve(p.annotation.annotation) in _TORCH_TYPES})

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        self._kernels.leave()
        self._moved.pop()
        self._built.pop()
        self._torch.pop()
        return updated

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                name = target.target.value
                for known, holds in ((self._built[-1], self._builds_no_npu_object(node.value)),
                                     (self._torch[-1], self._is_torch_object(node.value))):
                    if holds:
                        known.add(name)
                    else:
                        known.discard(name)

    def visit_Call(self, node: cst.Call) -> None:
        if node.args and isinstance(node.func, cst.Attribute) and node.func.attr.value == "cuda":
            self._marks[id(node)] = self.ctx.mark()

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        result = self._method(original, updated)
        mark = self._marks.pop(id(original), None)
        if (mark is not None and isinstance(result, cst.Call) and isinstance(result.func, cst.Attribute)
                and result.func.attr.value == "cuda" and not result.deep_equals(original)):
            # `.cuda(torch.cuda.current_device())` left as `.cuda`: its device argument goes with it, or the
            # call would move the object to CUDA's device numbered by the NPU's index (or fail on the NPU).
            self.ctx.withdraw_changes(mark)
            self.report(original, "left whole: this `.cuda(...)` stays, so its device argument stays with it",
                        severity="info")
            return original
        return result

    def _method(self, original: cst.Call, updated: cst.Call):
        func = updated.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "cuda"
                and not self._is_module(cast(cst.Attribute, original.func).value)):
            receiver = cast(cst.Attribute, original.func).value
            if self._is_torch_object(receiver):
                new = updated.with_changes(func=func.with_changes(attr=cst.Name("npu")))
                return self.rewrite(original, updated, new, "`.cuda()` -> `.npu()`",
                                    portable=lambda: self._to_accelerator(updated))
            ported = self._to_npu(updated)
            if ported is None:
                self.report(original, "`.cuda(...)` on an object not known to be a torch tensor or module, with a "
                            "device argument of unknown kind; left unchanged",
                            hint='use .to("npu") / .to(f"npu:{index}"): tensors, modules and TensorDicts have it; '
                                 "not every object with .cuda() has .npu()")
                return updated
            what = "the object has no `.npu()`" if self._builds_no_npu_object(receiver) else \
                "not known to be a torch tensor or module: `.to` is what tensors, modules and TensorDicts all have"
            return self.rewrite(original, updated, ported, f"`.cuda()` -> `{code(ported.func)}(...)` ({what})",
                                portable=lambda: self._to_accelerator(updated))
        return updated

    @staticmethod
    def _to_npu(call: cst.Call) -> Optional[cst.Call]:
        """`.cuda(...)` as `.to(...)` on the NPU: no device -> `.to("npu")`, an index -> `.to(f"npu:{i}")`,
        a device value (already ported by device-string) -> `.to(value)`; other keywords (non_blocking)
        stay. None for a device argument of unknown kind or a starred one."""
        device = next((a for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
        if device is None:
            value: cst.BaseExpression = cst.SimpleString('"npu"')
        elif device.star:
            return None
        elif _is_device_value(device.value):
            value = device.value
        elif isinstance(device.value, cst.Integer):
            value = cst.SimpleString(f'"npu:{device.value.value}"')
        elif _is_index(device.value):
            value = cst.FormattedString([cst.FormattedStringText("npu:"),
                                         cst.FormattedStringExpression(device.value)], start='f"', end='"')
        else:
            return None
        rest = [a for a in call.args if a is not device]
        first = cst.Arg(value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if rest else
                        cst.MaybeSentinel.DEFAULT)
        func = call.func
        assert isinstance(func, cst.Attribute)
        return call.with_changes(func=func.with_changes(attr=cst.Name("to")), args=[first, *rest])

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

    def visit_Assert(self, node: cst.Assert) -> None:
        self._asserts += 1

    def leave_Assert(self, original: cst.Assert, updated: cst.Assert) -> cst.Assert:
        self._asserts -= 1
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        # `m = Net().cuda()` whose `.cuda()` this walk rewrote: what `m` holds is on the NPU now.
        moved = _moved_here(original.value, updated.value)
        for target in original.targets:
            if isinstance(target.target, cst.Name):
                (self._moved[-1].add if moved else self._moved[-1].discard)(target.target.value)
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if original.attr.value == "is_cuda" and self._asserts and not self._own_is_cuda \
                and (_moved_here(original.value, updated.value) or _root_name(original.value) in self._moved[-1]):
            # `assert torch.ones(1).cuda().is_cuda`, `m = Net().cuda(); assert m.weight.is_cuda`: a test of
            # where the code just placed the object, which this walk moved to the NPU; left, it fails there.
            return self.rewrite(original, updated, updated.with_changes(attr=cst.Name("is_npu")),
                                "`.is_cuda` -> `.is_npu` (asserted of what the code moved to the NPU)",
                                portable=lambda: _on_accelerator(updated.value))
        if original.attr.value == "is_cuda" and self._asserts:
            # `assert x.is_cuda` guards a CUDA-only kernel (CuTe, cuda.bindings, a CUDA extension): as
            # `is_npu` it would let NPU tensors into it.
            self.report(original, "`.is_cuda` asserted: it guards code that runs on CUDA alone; left unchanged",
                        severity="info", hint="port the kernel it guards (or an NPU path beside it) first")
            return updated
        if original.attr.value == "is_cuda" and not self._own_is_cuda and not self._is_module(original.value) \
                and self._kernels.innermost_launches():
            # `if x.is_cuda: kernel[grid](x) else: fallback(x)`: the test picks the kernel path, which the NPU
            # did not take; renamed, NPU tensors go into a kernel written for CUDA.
            self.report(original, "`.is_cuda` in a function that launches a GPU kernel (Triton, DeepGEMM, CuTe, ...): "
                                  "it picks the kernel path, which an NPU tensor does not take as written; left "
                                  "unchanged", severity="warning",
                        hint="once the kernel runs on the NPU (triton-ascend, the library's Ascend build), admit NPU "
                             "tensors here (`x.is_cuda or x.is_npu`)")
            return updated
        if original.attr.value == "is_cuda" and not self._own_is_cuda and not self._is_module(original.value):
            return self.rewrite(original, updated, updated.with_changes(attr=cst.Name("is_npu")),
                                "`.is_cuda` -> `.is_npu`", portable=lambda: _on_accelerator(updated.value))
        return updated


def _moved_here(original: cst.BaseExpression, updated: cst.BaseExpression) -> bool:
    """Whether `original` ends in a `.cuda(...)` call chain (`Net().cuda()`, `x.cuda().float()`) that the walk
    rewrote in `updated` (`.npu()`, `.to("npu")`)."""
    node = original
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value == "cuda":
            return not updated.deep_equals(original)
        node = node.func.value
    return False


def _root_name(node: cst.BaseExpression) -> str:
    """The name an attribute, subscript or method chain starts from (`m` of `next(m.parameters()).weight`)."""
    while True:
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        elif isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute):
                node = node.func.value
            elif isinstance(node.func, cst.Name) and node.func.value == "next" and node.args:
                node = node.args[0].value
            else:
                return ""
        else:
            return node.value if isinstance(node, cst.Name) else ""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from npu_port.codemods._device_agnostic import device_text_expr
from npu_port.codemods._string_positions import StringPositionRule
from npu_port.transpiler.core.rules import CUDA_WORD

_CUDA_DEVICE = re.compile(r"^cuda(?=$|:)")
# Calls that return the current accelerator's index: a device string formatted with one is a device.
_DEVICE_INDEX = frozenset({"torch.cuda.current_device", "torch.npu.current_device",
                           "torch.accelerator.current_device_index"})


def npu_device_text(text: str) -> Optional[str]:
    """`cuda`, `cuda:1`, `cuda:{i}` (leading part) -> `npu...`; anything else stays."""
    return _CUDA_DEVICE.sub("npu", text, count=1) if _CUDA_DEVICE.match(text) else None


class DeviceString(StringPositionRule):
    """Rewrite `"cuda"`/`"cuda:N"`/`f"cuda:{i}"` to npu where the string is a device.

    What it does:
        Changes device strings only where the value flows into a device position: `device=`,
        `map_location=` (also dict maps), `device_ids=`, `.to(...)`, `torch.device(...)`,
        `torch.set_default_device`, the device argument of `torch.cuda.*`/`torch.npu.*` calls, assignments,
        dataclass fields, parameter defaults and argparse defaults/choices of settings named for a device
        (`device`, `*_device`, `*_devices`, `device_name`), dict entries keyed by such a name, and
        comparisons with `x.device.type`, `device` or `str(x.device)` (and their `startswith`), the
        `Literal[...]` choices of such a setting, the default of a lookup of one (`getattr(args, "device",
        "cuda")`, `kwargs.get("device", "cuda")`), the first argument of `init_device_mesh` / `DeviceMesh`, the
        values a test's parameter named for a device takes (`@pytest.mark.parametrize("device", ["cpu",
        "cuda"])`, its tuples and `pytest.param(...)` cases).
        Conditional values (`"cuda" if ok else "cpu"`), `"cuda:" + str(i)` and `"cuda:{}".format(i)` are
        followed, and so are values that reach a position through the file's own functions: a parameter
        used as a device makes that argument of every call of the function, and its default, a position
        (`average(x, "cuda")` for `def average(x, dev): ... device=dev`; module-level functions called by
        name, not methods). Code that picks a branch by device is left (docs/device-aware.md), and so is a
        device that the error a test expects quotes (`with pytest.raises(E, match="no device cuda:1")`),
        with a warning: the call and the expected message go together (the same for every string rule).

    Why:
        The same text in a log message, docstring, comment, path (`runs/cuda_exp/ckpt.pt`), URL or user
        identifier (`use_cuda`, `Backend.CUDA`) is not a device and must not change. Variables holding a
        device stay as they are.

    Example:
        x = x.to("cuda:0")                          ->  x = x.to("npu:0")
        dev = torch.device(f"cuda:{rank}")          ->  dev = torch.device(f"npu:{rank}")
        print("running on cuda")                    ->  (unchanged)

    With --keep-cuda:
        x = x.to("cuda:0")   ->  x = x.to(f"{(torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else 'cpu')}:0")
        torch.device("cuda" if torch.cuda.is_available() else "cpu")
                             ->  torch.device(torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu")
        x.device.type == "cuda"
                             ->  x.device.type == (torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else None)
                                 (false on a CPU host, as before)
        (verl files: get_device_name(); torch older than 2.6: "npu" if hasattr(torch, "npu") else "cuda")

    Fix safety:
        safe: only literal device strings in device positions change, to the same device on the NPU.
    """

    ID = "device-string"
    SAFETY = "safe"
    TRIGGERS = ()
    TRIGGER_PATTERNS = (CUDA_WORD,)
    POSITION = "device"

    def __init__(self, ctx):
        super().__init__(ctx)
        self._checked = set()  # ids of strings whose conditional has checked for an accelerator
        self._takes_device: set[int] = set()  # ids of `device=` / `.to(...)` argument values
        self._equated: set[int] = set()  # ids of `"cuda"` operands of == / != (not `in`, not "cuda:0")

    @staticmethod
    def new_text(text: str) -> Optional[str]:
        return npu_device_text(text)

    def agnostic_value(self, node, agnostic):
        if id(node) in self._takes_device and isinstance(node, cst.SimpleString) and node.raw_value == "cuda" \
                and agnostic.framework_device_module:
            return agnostic.device()  # verl writes device=get_device_id(), .to(get_device_id())
        return agnostic_device(node, agnostic.device_type(available=id(node) in self._checked,
                                                          compared=id(node) in self._equated))

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        # `device="cuda"` and `.to("cuda")`: positions that take a device object or index as well.
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                self._takes_device.add(id(arg.value))
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "to" and node.args and node.args[0].keyword is None:
            self._takes_device.add(id(node.args[0].value))

        # `"cuda:{}".format(torch.cuda.current_device())`: a string formatted with the current device's
        # index names that device wherever it goes (the index is ported, so the text must be too).
        if isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(func.value, cst.SimpleString) \
                and any(self._device_index(a.value) for a in node.args):
            self._mark([func.value], node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        super().visit_Comparison(node)
        operands = (node.left, *(c.comparator for c in node.comparisons))
        if all(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in node.comparisons):
            self._equated.update(id(o) for o in operands if isinstance(o, cst.SimpleString) and o.raw_value == "cuda")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        super().visit_BinaryOperation(node)
        if isinstance(node.operator, cst.Modulo) and isinstance(node.left, cst.SimpleString):
            values = [e.value for e in node.right.elements] if isinstance(node.right, cst.Tuple) else [node.right]
            if any(self._device_index(v) for v in values):
                self._mark([node.left], node)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if any(isinstance(p, cst.FormattedStringExpression) and self._device_index(p.expression) for p in node.parts):
            self._mark([node], node)

    def _device_index(self, value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.Call) and self.ctx.resolve(value.func) in _DEVICE_INDEX

    def visit_IfExp(self, node: cst.IfExp) -> None:
        # `"cuda" if torch.cuda.is_available() else "cpu"`: the test has asked already.
        test = node.test
        if isinstance(test, cst.Call) and self.ctx.resolve(test.func) == "torch.cuda.is_available":
            self._checked.add(id(node.body))


def agnostic_device(node, device: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`"cuda"` -> device, `"cuda:1"` -> f"{device}:1", f"cuda:{i}" -> f"{device}:{i}" (--keep-cuda)."""
    if isinstance(node, cst.SimpleString):
        text = node.raw_value
        if not _CUDA_DEVICE.match(text):
            return None
        quote = node.quote
        rest = text[4:].replace("{", "{{").replace("}", "}}")  # "cuda:{}".format(i) keeps its template
        return device_text_expr(rest, device, [], "f" + node.prefix + quote, quote) \
            if text != "cuda" else device
    first = node.parts[0]
    if not isinstance(first, cst.FormattedStringText) or not _CUDA_DEVICE.match(first.value):
        return None
    return device_text_expr(first.value[4:], device, list(node.parts[1:]), node.start, node.end)

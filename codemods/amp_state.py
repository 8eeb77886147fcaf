"""`amp-state`: torch's AMP state functions that ask CUDA's autocast state without naming CUDA."""

from __future__ import annotations

from functools import cache

import libcst as cst

from npu_port.codemods._device_agnostic import DeviceAgnostic
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table


@cache
def amp_state_calls(target: str) -> dict[str, tuple[int, str]]:
    """The AMP state functions that mean CUDA (amp_state.yaml): name -> (positional arguments, NPU function)."""
    return {row["cuda"]: (row["args"], row["npu"]) for row in load_table(target, "amp_state")["calls"]}


class AmpState(PythonRule):
    """Ask the NPU's autocast state where code asks torch for CUDA's without naming a device.

    What it does:
        `torch.is_autocast_enabled()`, `torch.get_autocast_gpu_dtype()`, `torch.set_autocast_gpu_dtype(d)` and
        `torch.set_autocast_enabled(b)` (the forms without a device type; codemods/data/<target>/amp_state.yaml)
        become the torch.npu functions that answer for the NPU: `torch.npu.is_autocast_enabled()`,
        `torch.npu.get_autocast_dtype()`, ... A call that names its device (`torch.is_autocast_enabled("cuda")`)
        is amp-device's. Code that picks a branch by device is left, as every rule leaves it.

    Why:
        These forms ask CUDA's autocast state. Code that casts by them (llm-foundry's and gpt-neox's low-precision
        norms: `if torch.is_autocast_enabled(): dtype = torch.get_autocast_gpu_dtype()` beside a `device.type ==
        "cuda"` test) would, once the test is ported, read CUDA's state on the NPU: under NPU autocast it never
        casts. torch_npu registers the NPU's functions in every release (not torch.is_autocast_enabled(device_type),
        which needs torch 2.4).

    Example:
        if torch.is_autocast_enabled():                ->  if torch.npu.is_autocast_enabled():
            dtype = torch.get_autocast_gpu_dtype()     ->      dtype = torch.npu.get_autocast_dtype()

    With --keep-cuda:
        `torch.npu.is_autocast_enabled() if <the NPU is there> else torch.is_autocast_enabled()` (the NPU test
        as docs/keep-cuda.md says).

    Fix safety:
        safe: the same question, asked of the device the code now runs on.
    """

    ID = "amp-state"
    SAFETY = "safe"
    TRIGGERS = ("is_autocast_enabled", "get_autocast_gpu_dtype", "set_autocast_gpu_dtype", "set_autocast_enabled")

    def __init__(self, ctx):
        super().__init__(ctx)
        self._table = amp_state_calls(ctx.target)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        name = self.ctx.imports.resolve(original.func)
        found = self._table.get(name or "")
        if found is None or len(original.args) != found[0] or any(a.keyword or a.star for a in original.args):
            return updated
        written = dotted_name(original.func) or ""
        if written.count(".") != 1:
            return updated  # `from torch import is_autocast_enabled`: a bare name has no torch.npu beside it
        npu = found[1]
        torch = written.split(".", 1)[0]  # `import torch as T`: T.npu...
        new = updated.with_changes(func=cst.parse_expression(torch + npu[len("torch"):]))
        return self.rewrite(original, updated, new, f"{name} -> {npu} (the NPU's autocast state)",
                            portable=lambda: DeviceAgnostic.of(self.ctx).choose(new, updated))

"""What the Ray rules write with --keep-cuda: the accelerator resource of a Ray request, picked at run time.

Ray names Ascend devices "NPU" and NVIDIA ones "GPU" (its accelerator managers register each on the nodes
that have it), so a device-agnostic request names whichever the cluster has:
- a VERL file (uses_verl): verl's own helpers, as verl's maintainers write it: the resource name
  `get_resource_name()` from `verl.utils.device` (verl 0.8 and later; verl-*.json in the API snapshot),
  and `is_npu_available` to choose between `num_gpus=` and `resources={"NPU": ...}`;
- elsewhere: ask Ray, `"NPU" in ray.cluster_resources()`. It is the cluster's answer, not the driver
  host's (a CPU-only head node has neither device, and a driver that never imports torch_npu has no
  `torch.npu`). Ray answers only once it is connected, so this form is written only inside function
  bodies: module-level code (a `@ray.remote` decorator, a constant bundle) runs at import, before
  `ray.init`, and is kept for CUDA there, with a warning.

`resources=` refuses the "GPU" key ("Use the 'num_cpus' and 'num_gpus' keyword instead", Ray's
ray_option_utils._validate_resources), so an actor's or task's request is a choice between the two
keywords, spread into the call; a placement-group bundle and a lookup in a resource dict take the name.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from npu_port.codemods._device_agnostic import DeviceAgnostic, uses_verl
from npu_port.transpiler.analysis.project_modules import project_defines
from npu_port.transpiler.core.rules import PythonContext
from npu_port.transpiler.tables.device_agnostic import release

_VERL_RESOURCE_NAME = ("verl.utils.device", "get_resource_name")
_VERL_RESOURCE_NAME_SINCE = "0.8"  # verl-0.8.0.json is the first snapshotted release that has it


class RayAgnostic:
    """The device-agnostic Ray expressions of one file; asking for one records the import it needs."""

    def __init__(self, ctx: PythonContext):
        self.ctx = ctx
        self.verl = uses_verl(ctx)

    def resource_name(self, *, in_function: bool) -> Optional[cst.BaseExpression]:
        """A str at run time: "NPU" or "GPU", the accelerator resource of the cluster; None where there is
        no form that runs here."""
        if self.verl and self._verl_has_resource_name():
            self.ctx.require_import(*_VERL_RESOURCE_NAME)
            return cst.Call(cst.Name(_VERL_RESOURCE_NAME[1]))
        if not in_function:
            return None
        return cst.IfExp(test=self._cluster_has_npu(), body=cst.SimpleString('"NPU"'),
                         orelse=cst.SimpleString('"GPU"'), lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def on_npu(self, *, in_function: bool) -> Optional[cst.BaseExpression]:
        """A bool at run time: the Ray request is for NPUs."""
        if self.verl:
            return DeviceAgnostic.of(self.ctx).is_npu()
        return self._cluster_has_npu() if in_function else None

    def accelerator_request(self, count: cst.BaseExpression, *, in_function: bool,
                            npu: str = "NPU") -> Optional[cst.Arg]:
        """`**({"resources": {"NPU": n}} if <on NPU> else {"num_gpus": n})`: the one argument that asks
        for n accelerators of either kind."""
        test = self.on_npu(in_function=in_function)
        if test is None:
            return None
        on_npu = cst.Dict([cst.DictElement(cst.SimpleString('"resources"'),
                                           cst.Dict([cst.DictElement(cst.SimpleString(f'"{npu}"'), count)]))])
        on_gpu = cst.Dict([cst.DictElement(cst.SimpleString('"num_gpus"'), count)])
        choice = cst.IfExp(test=test, body=on_npu, orelse=on_gpu,
                           lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Arg(value=choice, star="**")

    def _cluster_has_npu(self) -> cst.BaseExpression:
        return cst.Comparison(cst.SimpleString('"NPU"'), [cst.ComparisonTarget(
            cst.In(), cst.Call(cst.Attribute(self._ray(), cst.Name("cluster_resources"))))])

    def _ray(self) -> cst.BaseExpression:
        found = self.ctx.imports.local_for("ray")
        if found is not None and found[1] == "ray":
            return cst.Name(found[0])
        self.ctx.require_import("ray")
        return cst.Name("ray")

    def _verl_has_resource_name(self) -> bool:
        version = getattr(self.ctx.options, "verl_version", None)
        return (version is None or release(version) >= release(_VERL_RESOURCE_NAME_SINCE)) \
            and project_defines(self.ctx.path, *_VERL_RESOURCE_NAME[:1], _VERL_RESOURCE_NAME[1:]) is not False

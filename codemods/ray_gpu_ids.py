"""Ray: `ray.get_gpu_ids()` becomes `ray.get_runtime_context().get_accelerator_ids()["NPU"]`."""

from __future__ import annotations

import libcst as cst

from npu_port.codemods._ray_agnostic import RayAgnostic
from npu_port.codemods.ray_support import RayTable
from npu_port.transpiler.core.rules import PythonContext, PythonRule

_NPU_IDS_OR = '.get_runtime_context().get_accelerator_ids().get("NPU")'


class RayGpuIds(PythonRule):
    """Ask Ray for the worker's NPU ids instead of its GPU ids.

    What it does:
        `ray.get_gpu_ids()` (also `r.get_gpu_ids()` after `import ray as r`) becomes
        `ray.get_runtime_context().get_accelerator_ids()["NPU"]`. A bare `get_gpu_ids()` imported with
        `from ray import get_gpu_ids` is rewritten when the file also imports the ray module (under any
        name), and reported otherwise.

    Why:
        `get_gpu_ids()` only lists the "GPU" resource; on an Ascend node it is always empty. The runtime
        context lists the ids of every accelerator, keyed by resource name.

    Example:
        ids = ray.get_gpu_ids()    ->  ids = ray.get_runtime_context().get_accelerator_ids()["NPU"]

    With --keep-cuda:
        ids = ray.get_gpu_ids()
        ->  ids = (ray.get_runtime_context().get_accelerator_ids().get("NPU") or ray.get_gpu_ids())
        in a VERL file, as verl writes it:
        ->  ids = ray.get_runtime_context().get_accelerator_ids()[get_resource_name()]
        (the worker's NPU ids where Ray gave it NPUs, else its GPU ids as before; a bare
        `get_gpu_ids()` without the ray module stays reported)

    Fix safety:
        Review: the ids come back as strings ("0", "1"), where `get_gpu_ids()` gave ints. Joining them
        into ASCEND_RT_VISIBLE_DEVICES works as before; arithmetic on them or `set_device(ids[0])` needs
        an `int(...)`.
    """

    ID = "ray-gpu-ids"
    NEEDS_TORCH_NPU = False
    SAFETY = "review"
    TRIGGERS = ("get_gpu_ids",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.may_name(RayTable.for_target(options.target).gpu_ids)

    def __init__(self, ctx: PythonContext):
        super().__init__(ctx)
        self.table = RayTable.for_target(ctx.target)
        self._gpu_branches: set[cst.Call] = set()

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        # `<accelerator ids>.get("NPU") or ray.get_gpu_ids()` is this rule's --keep-cuda form: its
        # get_gpu_ids() is the GPU branch, left alone in either mode.
        if isinstance(node.operator, cst.Or) and isinstance(node.right, cst.Call) \
                and _NPU_IDS_OR in self.ctx.module.code_for_node(node.left).replace("'", '"'):
            self._gpu_branches.add(node.right)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if original.args or self.ctx.resolve(original.func) != self.table.gpu_ids or original in self._gpu_branches:
            return updated
        if isinstance(updated.func, cst.Attribute):
            module = self.ctx.module.code_for_node(updated.func.value)
        elif (bound := self.ctx.imports.local_for("ray")) is not None and bound[1] == "ray":
            module = bound[0]
        else:
            self.report(original, "get_gpu_ids() lists no NPUs; import ray and use "
                                  f"ray.{self.table.accelerator_ids}", hint=self.table.accelerator_ids_note)
            return updated
        new = cst.parse_expression(f"{module}.{self.table.accelerator_ids}")
        new = new.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        return self.rewrite(original, updated, new,
                            f"{self.table.gpu_ids}() -> {module}.{self.table.accelerator_ids} "
                            f"({self.table.accelerator_ids_note})",
                            portable=lambda: self._either(module, updated))

    def _either(self, module: str, updated: cst.Call) -> cst.BaseExpression:
        """--keep-cuda: the ids of the worker's accelerators, whichever kind (_ray_agnostic)."""
        agnostic = RayAgnostic(self.ctx)
        name = agnostic.resource_name(in_function=True) if agnostic.verl else None
        if name is not None:  # verl's own spelling (vllm_async_server: get_accelerator_ids()[get_resource_name()])
            ids = cst.parse_expression(f"{module}.get_runtime_context().get_accelerator_ids()")
            return cst.Subscript(ids, [cst.SubscriptElement(cst.Index(name))], lpar=updated.lpar, rpar=updated.rpar)
        # NPU ids where Ray gave the worker NPUs, else get_gpu_ids() as it was (ints on GPU, as before).
        return cst.parse_expression(f'({module}.get_runtime_context().get_accelerator_ids().get("NPU") '
                                    f"or {self.ctx.module.code_for_node(updated.with_changes(lpar=[], rpar=[]))})")

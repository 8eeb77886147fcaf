"""`ray-bundle-gpu-ask`: placement-group bundles that offer "NPU" to actors that ask Ray for GPUs."""

from __future__ import annotations

import ast
import os

import libcst as cst

from npu_port.codemods._ray_project import ray_resource_blockers, spread_lines
from npu_port.codemods.ray_support import RayTable
from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.core.rules import PythonRule


class RayBundleGpuAsk(PythonRule):
    """Reports a placement-group bundle of "NPU" in a project whose actors still ask Ray for GPUs.

    What it does:
        In a file that creates placement groups, a bundle-shaped dict (string keys "NPU" and "CPU") is
        reported (error) when the project (the outermost package the file lies in, read as convert's
        project-wide Ray decision reads it: codemods/_ray_project.py) still spreads a `num_gpus` count into
        Ray options (`options["num_gpus"] = n; A.options(**options)`), the request convert cannot port. A
        project with no such request, or a bundle beside a GPU one (a file that offers both), is not
        reported.

    Why:
        Ray places an actor only in a bundle that holds every resource it asks for. A port that renames the
        bundles to "NPU" while the actors placed in them still ask `num_gpus` leaves every actor pending
        forever (no bundle has a GPU). convert leaves both halves for CUDA and reports why; this finds the
        half port made otherwise (a VERL 0.1 fork's RayResourcePool beside its RayClassWithInitArgs).

    Example:
        pg_scheme = [[{"CPU": max_colocate, "NPU": 1} for _ in range(n)] for n in store]   # error
        ...
        options["num_gpus"] = num_gpus
        return self.cls.options(**options).remote(...)
        should read: options["resources"] = {"NPU": num_gpus} with the bundles (or both left for CUDA).

    Fix safety:
        Report-only: port the requests and the bundles together.
    """

    ID = "ray-bundle-gpu-ask"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("NPU",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        table = RayTable.for_target(options.target)
        return facts.any_string(lambda s: s == table.npu) and facts.has_word(*table.bundle_call_names)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.table = RayTable.for_target(ctx.target)
        self._npu_bundles: list[cst.Dict] = []
        self._gpu_bundle = False

    def visit_Dict(self, node: cst.Dict) -> None:
        keys = {string_value(el.key) for el in node.elements if isinstance(el, cst.DictElement)}
        if "CPU" in keys and self.table.npu in keys:
            self._npu_bundles.append(node)
        elif "CPU" in keys and self.table.gpu in keys:
            self._gpu_bundle = True

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self._npu_bundles or self._gpu_bundle:
            return updated
        here = os.path.abspath(self.ctx.path) if self.ctx.path else ""
        asks = [f"line {b.line}" if b.path == here else b.shown
                for b in ray_resource_blockers(self.ctx.path, self.ctx.target, self.ctx.text) if b.kind == "spread"]
        if not asks and "num_gpus" in self.ctx.text:  # the file alone (no project on disk): its own requests
            try:
                asks = [f"line {line}" for line in spread_lines(ast.parse(self.ctx.text))]
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                asks = []
        if not asks:
            return updated
        shown = ", ".join(asks[:3]) + (f" and {len(asks) - 3} more" if len(asks) > 3 else "")
        for bundle in self._npu_bundles:
            self.report(bundle, f"this placement-group bundle offers \"{self.table.npu}\" while the project's actors "
                                f"ask Ray for GPUs ({shown}: num_gpus spread into .options(**...)): they are never "
                                "placed", severity="error",
                        hint=f"ask options[\"resources\"] = {{\"{self.table.npu}\": n}} there too, or keep the bundles "
                             f"\"{self.table.gpu}\" for CUDA")
        return updated

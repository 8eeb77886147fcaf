"""Ray: `num_gpus=n` becomes `resources={"NPU": n}`."""

from __future__ import annotations

import os
from typing import Optional

import libcst as cst

from npu_port.codemods._ray_agnostic import RayAgnostic
from npu_port.codemods._ray_project import Blocker, blocked_message, ray_resource_blockers
from npu_port.codemods.ray_support import RayTable, ReportedKeyword, is_method_call_on_ray_object
from npu_port.transpiler.analysis.literals import (
    append_dict_elements,
    dict_element,
    dict_string_keys,
    element_keys,
    has_star_args,
    keyword,
    quote_like,
    remove_arg,
    string_value,
)
from npu_port.transpiler.core.cst_walk import visit
from npu_port.transpiler.core.rules import PythonContext, PythonRule


class RayNumGpus(PythonRule):
    """Ask Ray for NPUs instead of GPUs.

    What it does:
        `@ray.remote(num_gpus=n)`, `X.options(num_gpus=n)` and `ray.init(num_gpus=n)` become
        `resources={"NPU": n}`. An existing literal `resources={...}` dict gets the "NPU" entry added, never
        replaced; one given as a variable or any other expression R (a dict or None, chosen elsewhere) becomes
        `resources={**(R or {}), "NPU": n}`. `ray` is resolved through the imports (`import ray as r`, `from
        ray import remote`). Reported instead: a dict that already has "NPU", a call that
        also passes `**kwargs` (they may carry `resources=`), and Ray Train's `ScalingConfig(use_gpu=...)`.
        `num_cpus` and every other option stay.
        One decision for the whole project (codemods/_ray_project.py): where some site of the project asks
        Ray for GPUs in a way no rule converts (num_gpus stored in a dict spread into `.options(**d)`, a
        "GPU" bundle placed in another module), every num_gpus= is left and reported with those sites.

    Why:
        `num_gpus` asks only for Ray's "GPU" resource, which an Ascend node does not have, so the actor
        would never be scheduled. Ray registers Ascend devices as the "NPU" resource.

    Example:
        @ray.remote(num_gpus=1, num_cpus=4)          ->  @ray.remote(resources={"NPU": 1}, num_cpus=4)
        Worker.options(num_gpus=0.5, resources={"disk": 1})
                                                      ->  Worker.options(resources={"disk": 1, "NPU": 0.5})

    With --keep-cuda:
        Worker.options(num_gpus=1).remote()    (in a function body)
        ->  Worker.options(**({"resources": {"NPU": 1}} if "NPU" in ray.cluster_resources() else {"num_gpus": 1})).remote()
        @ray.remote(num_gpus=1)                 (in a VERL file, as verl's RayClassWithInitArgs chooses)
        ->  @ray.remote(**({"resources": {"NPU": 1}} if is_npu_available else {"num_gpus": 1}))
        (Ray refuses a "GPU" key in resources=, so the request is a choice of keyword; the cluster is
        asked only where Ray is connected: a module-level `@ray.remote(num_gpus=...)` outside VERL, and
        a num_gpus= to merge into a literal resources=, and `ray.init(num_gpus=...)` (the node it starts)
        are kept for CUDA, with a warning)

    Fix safety:
        Safe: Ray schedules `resources={"NPU": n}` exactly as it schedules `num_gpus=n` on GPU nodes
        (fractions included) and sets ASCEND_RT_VISIBLE_DEVICES for the worker.
    """

    ID = "ray-num-gpus"
    NEEDS_TORCH_NPU = False
    SAFETY = "safe"
    TRIGGERS = ("num_gpus", "use_gpu")

    @classmethod
    def scout(cls, facts, options) -> bool:
        table = RayTable.for_target(options.target)
        # The methods (`Actor.options`) count only in files that import ray.
        calls = (facts.has_word("num_gpus") and (any(facts.may_name(c) for c in table.num_gpus_calls)
                                                 or facts.has_word("ray")))
        return calls or any(facts.has_word(r.keyword) and facts.may_name(r.call) for r in table.reported_keywords)

    def __init__(self, ctx: PythonContext):
        super().__init__(ctx)
        self.table = RayTable.for_target(ctx.target)
        # Per scope: dicts given a "num_gpus" entry, and names spread into a Ray call as **name. A dict
        # that is both asks Ray for GPUs indirectly: `options["num_gpus"] = n; A.options(**options)`.
        self._scopes: list[tuple[dict[str, cst.CSTNode], set[str]]] = [({}, set())]
        self._at_import: set[cst.Call] = set()  # calls in module-level decorators
        self._blockers: Optional[tuple[Blocker, ...]] = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if len(self._scopes) == 1:  # its decorators run at import, outside any function body
            self._at_import.update(_calls_in(node.decorators))
        self._scopes.append(({}, set()))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if len(self._scopes) == 1:
            self._at_import.update(_calls_in(node.decorators))

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        self._report_indirect(self._scopes.pop())
        return updated

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        self._report_indirect(self._scopes.pop())
        return updated

    def _report_indirect(self, scope: tuple[dict[str, cst.CSTNode], set[str]]) -> None:
        filled, spread = scope
        for name, node in filled.items():
            if name in spread:
                message, hint = indirect_report(name, self.table.npu)
                if self._blocked():  # it is one of the project's blockers (codemods/_ray_project.py)
                    assert self._blockers is not None
                    others = [b.shown for b in self._blockers if b.path != self._here() or b.line != node_line(
                        self.ctx, node)]
                    message += ("; so every Ray GPU request of the project is left for CUDA (each reported)"
                                + (f"; other such sites: {', '.join(others[:5])}" if others else ""))
                self.report(node, message, hint=hint)

    def visit_Assign(self, node: cst.Assign) -> None:
        filled = self._scopes[-1][0]
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and len(t.slice) == 1 \
                    and isinstance(t.slice[0].slice, cst.Index) and string_value(t.slice[0].slice.value) == "num_gpus":
                filled.setdefault(t.value.value, node)
            elif isinstance(t, cst.Name) and isinstance(node.value, cst.Dict) \
                    and "num_gpus" in dict_string_keys(node.value):
                filled.setdefault(t.value, node)

    def _takes_num_gpus(self, call: cst.Call) -> bool:
        return (self.ctx.resolve(call.func) in self.table.num_gpus_calls
                or is_method_call_on_ray_object(self.ctx, call, self.table.num_gpus_methods))

    def visit_Call(self, node: cst.Call) -> None:
        if has_star_args(node) and self._takes_num_gpus(node):
            self._scopes[-1][1].update(a.value.value for a in node.args
                                       if a.star == "**" and isinstance(a.value, cst.Name))
        resolved = self.ctx.resolve(node.func)
        for row in self.table.reported_keywords:
            if resolved == row.call and keyword(node, row.keyword) is not None:
                self.report(node, reported_keyword_message(row, self.table.npu), hint=row.hint)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        num = keyword(updated, "num_gpus")
        if num is None or not self._takes_num_gpus(original):
            return updated
        npu = self.table.npu
        accelerator = keyword(original, "accelerator_type")
        if accelerator is not None:
            # An NVIDIA type ("A100", NVIDIA_TESLA_V100) next to the GPU request: no NPU node has it.
            self.report(accelerator, "accelerator_type= names a GPU type that no NPU node offers",
                        hint="drop it, or use ray.util.accelerators.HUAWEI_NPU_910B / HUAWEI_NPU_910B4")
        if has_star_args(updated):
            self.report(original, f"num_gpus= next to **kwargs: move it into resources={{\"{npu}\": ...}} by hand "
                                  "(the kwargs may already carry resources=)")
            return updated
        if self._blocked():
            assert self._blockers is not None
            message, hint = blocked_message(self._blockers, "num_gpus=")
            self.report(original, message, hint=hint)
            return updated
        resources = keyword(updated, "resources")
        index = list(updated.args).index(num)
        if self.ctx.options.keep_cuda and resources is not None and isinstance(resources.value, cst.Dict) \
                and npu not in dict_string_keys(resources.value):
            # Merged into resources= here; the two requests of a --keep-cuda choice would not merge.
            self.keeps_cuda(original, f"num_gpus= merged into resources= as \"{npu}\"")
            return updated
        if resources is None:
            new_arg = num.with_changes(keyword=cst.Name("resources"),
                                       value=cst.Dict([dict_element(npu, num.value)]))
            args = list(updated.args)
            args[index] = new_arg
            return self.rewrite(original, updated, updated.with_changes(args=args),
                                f"num_gpus= -> resources={{\"{npu}\": ...}}",
                                portable=lambda: self._either(original, updated, index, num))
        if not isinstance(resources.value, cst.Dict):
            if self.ctx.options.keep_cuda:
                self.keeps_cuda(original, f"num_gpus= merged into resources= as \"{npu}\"")
                return updated
            # `resources=self._resources` (a dict or None, chosen elsewhere): the NPU request joins whatever it
            # holds, `{**(R or {}), "NPU": n}`, so the actor still fits the bundles that offer "NPU" now.
            merged = cst.Dict([
                cst.StarredDictElement(cst.BooleanOperation(resources.value, cst.Or(), cst.Dict([]),
                                                            lpar=[cst.LeftParen()], rpar=[cst.RightParen()])),
                dict_element(npu, num.value)])
            args = [a if a is not resources else a.with_changes(value=merged) for a in updated.args]
            return self.rewrite(original, updated, updated.with_changes(args=remove_arg(args, index)),
                                f"num_gpus= merged into resources= as \"{npu}\" (beside what resources= holds)")
        if npu in dict_string_keys(resources.value):
            self.report(original, f"both num_gpus= and resources[\"{npu}\"] are given; keep one")
            return updated
        merged = append_dict_elements(
            resources.value, [dict_element(npu, num.value, quote_like(element_keys(resources.value)))],
            line_indent="")
        args = [a if a is not resources else a.with_changes(value=merged) for a in updated.args]
        return self.rewrite(original, updated, updated.with_changes(args=remove_arg(args, index)),
                            f"num_gpus= merged into resources= as \"{npu}\"")

    def _blocked(self) -> bool:
        """The project asks Ray for GPUs somewhere no rule converts: its resource set stays whole."""
        if self._blockers is None:
            self._blockers = ray_resource_blockers(self.ctx.path, self.ctx.target, self.ctx.text)
        return bool(self._blockers)

    def _here(self) -> str:
        return os.path.abspath(self.ctx.path) if self.ctx.path else ""

    def _either(self, original: cst.Call, updated: cst.Call, index: int, num: cst.Arg) -> Optional[cst.Call]:
        """--keep-cuda: `num_gpus=n` -> `**({"resources": {"NPU": n}} if <on NPU> else {"num_gpus": n})`."""
        if self.ctx.resolve(original.func) == "ray.init":
            return None  # the resources of the node it starts: Ray is not connected yet to be asked
        in_function = len(self._scopes) > 1 and original not in self._at_import
        arg = RayAgnostic(self.ctx).accelerator_request(num.value, in_function=in_function, npu=self.table.npu)
        if arg is None:
            return None
        args = list(updated.args)
        args[index] = arg.with_changes(comma=num.comma)
        return updated.with_changes(args=args)


def node_line(ctx: PythonContext, node: cst.CSTNode) -> int:
    where = ctx.position(node)
    return where.start.line if where is not None else 0


def indirect_report(name: str, npu: str) -> tuple[str, str]:
    """(message, hint) for a dict given a "num_gpus" entry and spread into a Ray call as **name."""
    return (f"num_gpus reaches Ray through **{name}: it asks for GPUs, which an NPU node lacks",
            f'give {name}["resources"] = {{"{npu}": n}} instead (merged into any "resources" entry it already has)')


def reported_keyword_message(row: ReportedKeyword, npu: str) -> str:
    return f"{row.keyword}= in {row.call} asks for GPUs; Ascend devices are the \"{npu}\" resource"


def _calls_in(decorators) -> set[cst.Call]:
    found: set[cst.Call] = set()

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.add(node)

    for decorator in decorators:
        visit(decorator, _Calls())
    return found

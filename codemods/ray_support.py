"""What the Ray rules share: the target's Ray table (codemods/data/<target>/ray.yaml) and the
questions "is this Ray code?" and "does this expression hold a resource dict?". No rule lives here."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.core.rules import PythonContext
from npu_port.transpiler.tables.mapping import MappingError, load_table


@dataclass(frozen=True)
class ReportedKeyword:
    call: str
    keyword: str
    hint: str


@dataclass(frozen=True)
class RayTable:
    gpu: str
    npu: str
    num_gpus_calls: frozenset[str]
    num_gpus_methods: frozenset[str]
    bundle_calls: frozenset[str]
    bundle_arguments: frozenset[str]
    resource_map_calls: frozenset[str]
    runtime_context: str
    resource_map_methods: frozenset[str]
    resource_map_subscripts: frozenset[str]
    gpu_ids: str
    accelerator_ids: str  # what follows `<ray module>.` in the replacement
    accelerator_ids_note: str
    reported_keywords: tuple[ReportedKeyword, ...]

    @cached_property
    def bundle_call_names(self) -> frozenset[str]:
        """Placement-group calls are matched by their last name (`placement_group`, `PlacementGroupFactory`)."""
        return frozenset(c.rsplit(".", 1)[-1] for c in self.bundle_calls)

    def bundles_placed_by(self, call: ast.Call) -> Optional[ast.expr]:
        """The bundle list a placement-group call passes; None for any other call."""
        func = call.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if last not in self.bundle_call_names:
            return None
        return call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg in self.bundle_arguments), None)

    @classmethod
    @cache
    def for_target(cls, target: str) -> RayTable:
        data = load_table(target, "ray")
        try:
            return cls(
                gpu=data["resource"]["cuda"], npu=data["resource"]["npu"],
                num_gpus_calls=frozenset(data["num_gpus_calls"]),
                num_gpus_methods=frozenset(data["num_gpus_methods"]),
                bundle_calls=frozenset(data["bundle_calls"]),
                bundle_arguments=frozenset(data["bundle_arguments"]),
                resource_map_calls=frozenset(data["resource_map_calls"]),
                runtime_context=data["runtime_context"],
                resource_map_methods=frozenset(data["resource_map_methods"]),
                resource_map_subscripts=frozenset(data["resource_map_subscripts"]),
                gpu_ids=data["accelerator_ids"]["cuda"], accelerator_ids=data["accelerator_ids"]["npu"],
                accelerator_ids_note=data["accelerator_ids"].get("note", ""),
                reported_keywords=tuple(ReportedKeyword(**row) for row in data.get("reported_keywords", [])),
            )
        except (KeyError, TypeError) as exc:
            raise MappingError(f"{target}/ray.yaml: missing or malformed entry {exc}") from None


def uses_ray(ctx: PythonContext) -> bool:
    """True when a scope open at this point of the walk imports ray (or something under it)."""
    return ctx.imports.imports_module("ray")


def is_method_call_on_ray_object(ctx: PythonContext, call: cst.Call, methods: frozenset[str]) -> bool:
    """`Actor.options(...)`-style calls: the method name is Ray's and the file uses Ray."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in methods and uses_ray(ctx)


class ResourceMaps:
    """Which expressions hold a {resource name: quantity} dict in one file: `ray.cluster_resources()`,
    `ray.available_resources()`, `ray.get_runtime_context().get_assigned_resources()`, `node["Resources"]`,
    and variables assigned one of these (tracked as the walk meets the assignments)."""

    def __init__(self, ctx: PythonContext, table: RayTable):
        self.ctx = ctx
        self.table = table
        self._names: set[str] = set()

    def holds_resources(self, expr: cst.BaseExpression) -> bool:
        name = dotted_name(expr)
        if name is not None and name in self._names:
            return True
        if isinstance(expr, cst.Call):
            if self.ctx.resolve(expr.func) in self.table.resource_map_calls:
                return True
            func = expr.func
            return (isinstance(func, cst.Attribute) and func.attr.value in self.table.resource_map_methods
                    and isinstance(func.value, cst.Call)
                    and self.ctx.resolve(func.value.func) == self.table.runtime_context)
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            key = string_value(expr.slice[0].slice.value)
            return key in self.table.resource_map_subscripts and uses_ray(self.ctx)
        return False

    def track_assignment(self, targets: Sequence[cst.BaseExpression], value: Optional[cst.BaseExpression]) -> None:
        holds = value is not None and self.holds_resources(value)
        for target in targets:
            name = dotted_name(target)
            if name is None:
                continue
            if holds:
                self._names.add(name)
            else:
                self._names.discard(name)

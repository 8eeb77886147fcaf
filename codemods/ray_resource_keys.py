"""Ray: the "GPU" resource key becomes "NPU" in placement-group bundles and resource lookups."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from typing import Optional

import libcst as cst

from npu_port.codemods._ray_agnostic import RayAgnostic
from npu_port.codemods._ray_project import BUNDLE_BLOCKER, Blocker, blocked_message, ray_resource_blockers
from npu_port.codemods.ray_support import RayTable, ResourceMaps
from npu_port.transpiler.analysis.literals import string_value, with_string_value
from npu_port.transpiler.core.rules import PythonContext, PythonRule

_LOOKUP_METHODS = frozenset({"get", "pop", "setdefault"})


class RayResourceKeys(PythonRule):
    """Rename Ray's "GPU" resource to "NPU" where Ray reads it.

    What it does:
        Renames the key "GPU" -> "NPU" in
        - placement-group bundles: `placement_group([{"GPU": 1, "CPU": 4}] * n)`, list displays, list
          comprehensions, `bundles=`, `PlacementGroupFactory(...)`, and a variable later passed as the bundles;
        - lookups in Ray's resource dicts: `ray.cluster_resources()["GPU"]`, `ray.available_resources().get("GPU")`,
          `"GPU" in ray.cluster_resources()`, `ray.get_runtime_context().get_assigned_resources()["GPU"]`,
          `node["Resources"]["GPU"]` of `ray.nodes()`, and variables assigned one of these.
        User dicts that merely have a "GPU" key (or keys such as "GPU_TYPE") stay.
        One decision for the whole project, with ray-num-gpus: where some site asks Ray for GPUs in a way no
        rule converts (a "GPU"/"CPU" bundle dict not placed in its own module, num_gpus spread into
        `.options(**d)`), every key is left and reported with those sites (file:line), and so is that bundle.

    Why:
        Ray registers Ascend devices as the "NPU" resource; a bundle asking for "GPU" can never be placed
        on an NPU node and a "GPU" lookup finds nothing.

    Example:
        placement_group([{"GPU": 1, "CPU": 4}] * 8)    ->  placement_group([{"NPU": 1, "CPU": 4}] * 8)
        ray.cluster_resources().get("GPU", 0)          ->  ray.cluster_resources().get("NPU", 0)

    With --keep-cuda:
        placement_group([{"GPU": 1, "CPU": 4}] * 8)
        ->  placement_group([{("NPU" if "NPU" in ray.cluster_resources() else "GPU"): 1, "CPU": 4}] * 8)
        in a VERL file, as verl writes it (verl.utils.device, verl 0.8 and later):
        ->  placement_group([{get_resource_name(): 1, "CPU": 4}] * 8)
        (the resource the cluster has, asked of Ray itself; outside a function body, where Ray is not
        connected yet, the key is kept for CUDA, with a warning, except in VERL files)

    Fix safety:
        Safe: only literal "GPU" keys in positions Ray reads as resource names.
    """

    ID = "ray-resource-keys"
    NEEDS_TORCH_NPU = False
    SAFETY = "safe"
    TRIGGERS = ('"GPU"', "'GPU'")

    @classmethod
    def scout(cls, facts, options) -> bool:
        gpu = RayTable.for_target(options.target).gpu
        return facts.any_string(lambda s: s == gpu)  # only a literal "GPU" key is ever renamed

    def __init__(self, ctx: PythonContext):
        super().__init__(ctx)
        self.table = RayTable.for_target(ctx.target)
        self.maps = ResourceMaps(ctx, self.table)
        self._keys: set[cst.BaseExpression] = set()
        self._bundle_names: frozenset[str] = frozenset()
        self._blockers: Optional[tuple[Blocker, ...]] = None
        self._functions = 0  # depth of function bodies (--keep-cuda asks Ray only where it runs connected)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions += 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._functions -= 1
        return updated

    def visit_Module(self, node: cst.Module) -> None:
        self._bundle_names = _names_passed_as_bundles(self.ctx.text, self.table)
        self._blockers = ray_resource_blockers(self.ctx.path, self.ctx.target, self.ctx.text)
        here = os.path.abspath(self.ctx.path) if self.ctx.path else ""
        others = tuple(b for b in self._blockers if b.path != here)
        for b in self._blockers:
            if b.path == here and b.kind == "bundle":
                rest = others + tuple(o for o in self._blockers if o.path == here and o is not b)
                also = f"; also: {', '.join(o.shown for o in rest[:5])}" if rest else ""
                self.ctx.add(self.ID, b.line, 0, BUNDLE_BLOCKER + also, severity="warning",
                             hint="port it and every Ray \"GPU\" site of the project together by hand")

    def _mark(self, node: cst.BaseExpression) -> None:
        if string_value(node) == self.table.gpu:
            self._keys.add(node)

    def _mark_bundles(self, expr: cst.BaseExpression) -> None:
        for bundle in _bundle_dicts(expr):
            for el in bundle.elements:
                if isinstance(el, cst.DictElement):
                    self._mark(el.key)

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = [t.target for t in node.targets]
        self.maps.track_assignment(targets, node.value)
        if any(isinstance(t, cst.Name) and t.value in self._bundle_names for t in targets):
            self._mark_bundles(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.resolve(node.func) in self.table.bundle_calls:
            for arg in node.args:
                if (arg.keyword is None and not arg.star) or (
                        arg.keyword is not None and arg.keyword.value in self.table.bundle_arguments):
                    self._mark_bundles(arg.value)
                    break
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value in _LOOKUP_METHODS and node.args
                and node.args[0].keyword is None and self.maps.holds_resources(func.value)):
            self._mark(node.args[0].value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if (len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
                and self.maps.holds_resources(node.value)):
            self._mark(node.slice[0].slice.value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)) and self.maps.holds_resources(target.comparator):
                self._mark(left)
            left = target.comparator

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.BaseExpression:
        if original not in self._keys:
            return updated
        if self._blockers:
            message, hint = blocked_message(self._blockers, f"Ray resource \"{self.table.gpu}\"")
            self.report(original, message, hint=hint)
            return updated
        return self.rewrite(original, updated, with_string_value(updated, self.table.npu),
                            f"Ray resource \"{self.table.gpu}\" -> \"{self.table.npu}\"",
                            portable=lambda: RayAgnostic(self.ctx).resource_name(in_function=self._functions > 0))


def _bundle_dicts(expr: cst.BaseExpression) -> Iterator[cst.Dict]:
    """The dict displays a bundles expression is built from: `[{...}] * n`, `[{...}, {...}]`, `[{...} for ...]`."""
    if isinstance(expr, cst.Dict):
        yield expr
    elif isinstance(expr, (cst.List, cst.Tuple)):
        for el in expr.elements:
            yield from _bundle_dicts(el.value)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Add)):
        yield from _bundle_dicts(expr.left)
        yield from _bundle_dicts(expr.right)
    elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        yield from _bundle_dicts(expr.elt)
    elif isinstance(expr, cst.IfExp):  # `{"CPU": n, "GPU": 1} if use_gpu else {"CPU": n}`
        yield from _bundle_dicts(expr.body)
        yield from _bundle_dicts(expr.orelse)


def _bundle_names(expr: ast.expr) -> set[str]:
    """Variables standing where `_bundle_dicts` looks for dicts; `n` in `[bundle] * n` is a count, not one."""
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, (ast.List, ast.Tuple)):
        return set().union(*(_bundle_names(e) for e in expr.elts))
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _bundle_names(expr.left) | _bundle_names(expr.right)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        # `[b] * n`, `n * [b]`, `bundles * n`: the count is the side that is not the sequence.
        if isinstance(expr.right, (ast.List, ast.Tuple, ast.ListComp)):
            return _bundle_names(expr.right)
        return _bundle_names(expr.left)
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
        return _bundle_names(expr.elt)
    if isinstance(expr, ast.IfExp):
        return _bundle_names(expr.body) | _bundle_names(expr.orelse)
    return set()


def _iterated(target: ast.expr, iterable: ast.expr, names: set[str]) -> set[str]:
    """The sequences a loop over `iterable` takes bundles from, where its `target` is one of `names`:
    `for bundles in pg_scheme`, `for i, bundles in enumerate(pg_scheme)`."""
    if isinstance(target, ast.Name):
        if target.id not in names:
            return set()
        return {iterable.id} if isinstance(iterable, ast.Name) else set()
    if (isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Name) and iterable.func.id == "enumerate" and iterable.args):
        return _iterated(target.elts[1], iterable.args[0], names)
    return set()


def _names_passed_as_bundles(text: str, table: RayTable, tree: Optional[ast.Module] = None) -> frozenset[str]:
    """Variables that reach a placement-group call as its bundles, directly or through other variables.

    A cheap `ast` pre-pass, because the assignment is met before the call in a single walk. Calls are
    matched by their last name (`placement_group`, `PlacementGroupFactory`); the bundle dicts are still
    only rewritten where their assignment is a bundles expression. `tree`: the text's, where parsed already.
    """
    if not any(name in text for name in table.bundle_call_names):
        return frozenset()
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return frozenset()
    names: set[str] = set()
    assigns: list[tuple[set[str], ast.expr]] = []
    loops: list[tuple[ast.expr, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            bundles = table.bundles_placed_by(node)
            if bundles is not None:
                names |= _bundle_names(bundles)
        elif isinstance(node, ast.Assign):
            assigns.append(({t.id for t in node.targets if isinstance(t, ast.Name)}, node.value))
        elif isinstance(node, (ast.For, ast.comprehension)):
            loops.append((node.target, node.iter))
    grew = True
    while grew:  # `bundle = {...}; bundles = [bundle] * n; placement_group(bundles)`
        grew = False
        for targets, value in assigns:
            if targets & names:
                new = _bundle_names(value) - names
                if new:
                    names |= new
                    grew = True
        for target, iterable in loops:  # `placement_group(bundles) for bundles in pg_scheme`
            new = _iterated(target, iterable, names) - names
            if new:
                names |= new
                grew = True
    return frozenset(names)

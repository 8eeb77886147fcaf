"""ray-num-gpus on Python's `ast` (core/ast_pass), for the files it changes nothing in: a dict given a
"num_gpus" entry and spread into a Ray call (`options["num_gpus"] = n; A.options(**options)`), and the
keywords it reports (Ray Train's `ScalingConfig(use_gpu=...)`). The same findings; it declines at every
call that passes `num_gpus=` to Ray, which the rule rewrites or reports in its own words. Each hook names
the LibCST hook (codemods/ray_num_gpus) it stands for."""

from __future__ import annotations

import ast
from typing import Any

from npu_port.codemods.ray_num_gpus import RayNumGpus, indirect_report, reported_keyword_message
from npu_port.codemods.ray_support import RayTable
from npu_port.transpiler.analysis.ast_source import Decline, plain_string, position
from npu_port.transpiler.core.rules import AstContext


class AstRayNumGpus:
    ID = RayNumGpus.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.table = RayTable.for_target(ctx.target)
        # Per scope, as the rule keeps them: dicts given a "num_gpus" entry, and names spread as **name.
        self._scopes: list[tuple[dict[str, ast.AST], set[str]]] = [({}, set())]

    def visit_FunctionDef(self, node: Any) -> None:
        self._scopes.append(({}, set()))

    visit_AsyncFunctionDef = visit_FunctionDef  # (one FunctionDef node in LibCST)

    def leave_FunctionDef(self, node: Any) -> None:
        self._report_indirect(self._scopes.pop())

    leave_AsyncFunctionDef = leave_FunctionDef

    def leave_Module(self, node: ast.Module) -> None:
        self._report_indirect(self._scopes.pop())

    def _report_indirect(self, scope: tuple[dict[str, ast.AST], set[str]]) -> None:
        filled, spread = scope
        for name, node in filled.items():
            if name in spread:
                message, hint = indirect_report(name, self.table.npu)
                self.ctx.note_at(*position(node), self.ID, message, hint=hint)

    def visit_Assign(self, node: ast.Assign) -> None:
        filled = self._scopes[-1][0]
        source = self.ctx.source
        for t in node.targets:
            # `d["num_gpus"] = n` (one plain string as the whole slice), or `d = {"num_gpus": n, ...}`.
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                    and plain_string(source, t.slice) == "num_gpus":
                filled.setdefault(t.value.id, node)
            elif isinstance(t, ast.Name) and isinstance(node.value, ast.Dict) \
                    and any(plain_string(source, k) == "num_gpus" for k in node.value.keys):
                filled.setdefault(t.id, node)

    def _takes_num_gpus(self, call: ast.Call) -> bool:
        func = call.func
        return (self.ctx.resolve(func) in self.table.num_gpus_calls
                or (isinstance(func, ast.Attribute) and func.attr in self.table.num_gpus_methods
                    and self.ctx.imports.imports_module("ray")))

    def visit_Call(self, node: ast.Call) -> None:
        takes = None
        if any(k.arg == "num_gpus" for k in node.keywords):
            takes = self._takes_num_gpus(node)
            if takes:
                raise Decline("num_gpus= given to Ray")  # leave_Call: rewritten, or reported in its words
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            if takes if takes is not None else self._takes_num_gpus(node):
                self._scopes[-1][1].update(k.value.id for k in node.keywords
                                           if k.arg is None and isinstance(k.value, ast.Name))
        resolved = self.ctx.resolve(node.func)
        for row in self.table.reported_keywords:
            if resolved == row.call and any(k.arg == row.keyword for k in node.keywords):
                self.ctx.note_at(*position(node), self.ID, reported_keyword_message(row, self.table.npu),
                                 hint=row.hint)

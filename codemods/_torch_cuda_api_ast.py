"""torch-cuda-api on Python's `ast` (core/ast_pass), for a file it leaves unchanged: the findings of the
LibCST rule (codemods/torch_cuda_api) where every torch.cuda name it meets stays, because torch_npu has
no such name, the code patches torch.cuda or picks a branch by device, or this file cannot spell the NPU
name. Where the rule would change something (a rename, an import rewritten) the twin declines and the
file takes the LibCST path, as it does with --keep-cuda, whose forms are not mirrored here. Each hook
mirrors the LibCST rule's of the same name; `ast` has no node for the names of a def, a parameter, a
keyword or an import alias, which the rule only skips."""

from __future__ import annotations

import ast
from typing import Optional

from npu_port.codemods._torch_cuda_table import CUDA_ROOT, is_cuda_name, table_for
from npu_port.codemods.torch_cuda_api import TorchCudaApi
from npu_port.transpiler.analysis.ast_source import Decline, FStringDepth, dotted, leftmost
from npu_port.transpiler.analysis.dispatch import NEEDS_TORCH_NPU
from npu_port.transpiler.core.rules import TORCH_NPU_WORD, AstContext

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class AstTorchCudaApi(FStringDepth):
    ID = TorchCudaApi.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.source = ctx.source
        self.table = table_for(ctx.target, ctx.options.rules_files)
        self._inner: set[int] = set()
        self._functions: list[ast.AST] = []
        self._rendered: dict[int, Optional[str]] = {}
        self._plans: dict[int, str] = {}  # id(node) -> the NPU name it would be renamed to
        self._staying = TorchCudaApi.staying_names(self.table, ctx.text)

    def _at(self, node: ast.AST) -> tuple[int, int]:
        if self._fstrings or isinstance(node, (ast.Tuple, ast.GeneratorExp)):
            raise Decline("a position ast gives otherwise")  # ast's includes a tuple's own parentheses
        return node.lineno, node.col_offset  # type: ignore[attr-defined]

    def _report(self, node: ast.AST, message: str, hint: str, severity="warning") -> None:
        self.ctx.note_at(*self._at(node), self.ID, message, severity=severity, hint=hint)

    # -- uses -------------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if id(node) in self._inner:
            self._mark_chain(node.value)
            return
        qualified = self.ctx.resolve(node)
        if qualified is None or not is_cuda_name(qualified):
            return
        self._mark_chain(node.value)
        self._plan(node, qualified)

    def visit_Assign(self, node: ast.Assign) -> None:
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if "npu" in self.ctx.text and any("cuda" in n.lower() for n in names) and self._skip_chains_in(node.value):
            self._report(node.value, f"left as is: `{names[0]}` is the CUDA probe of code that already handles "
                                     "the NPU", "", severity="info")

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self._functions.append(node)

    def leave_FunctionDef(self, node: ast.AST) -> None:
        self._functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    leave_AsyncFunctionDef = leave_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if not self._staying:
            return
        stays = self._stays_in(node, node.body)
        if stays is None and self._functions and _exits(self.source, node.body):
            function = self._functions[-1]
            stays = self._stays_in(function, function.body)  # type: ignore[attr-defined]
        if stays and self._skip_chains_in(node.test):
            self._report(node.test, f"left as is: this test guards `{stays}`, which stays CUDA-only", "",
                         severity="info")

    def _stays_in(self, owner: ast.AST, body: list[ast.stmt]) -> Optional[str]:
        """The staying name LibCST's rendering of the block holds (TorchCudaApi._stays_in). That text lies
        between the block's statements alone and everything from its owner to the next statement after
        it (the header's comment, comment lines before the first statement or after the last); where the
        two give different answers the file is declined."""
        key = id(body)
        if key not in self._rendered:
            source, last = self.source, self.source.end(body[-1])
            inner = self._first_staying(source.text[source.start(body[0]):last])
            outer = self._first_staying(source.text[source.start(owner):source.next_statement_start(last)])
            if inner != outer:
                raise Decline("a staying name beside a block")
            self._rendered[key] = inner
        return self._rendered[key]

    def _first_staying(self, text: str) -> Optional[str]:
        return next((n for n in self._staying if n in text or f".{n.rsplit('.', 1)[-1]}(" in text), None)

    def _skip_chains_in(self, expr: ast.AST) -> bool:
        """Keep the torch.cuda names in `expr` as they are; True if there were any."""
        found = False
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Attribute):
                qualified = self.ctx.resolve(node)
                if qualified and is_cuda_name(qualified):
                    self._mark_chain(node)
                    found = True
                    continue
            stack.extend(ast.iter_child_nodes(node))
        return found

    def visit_Name(self, node: ast.Name) -> None:
        if id(node) in self._inner:
            return
        binding = self.ctx.imports.binding(node.id)
        if binding and binding.kind == "from" and binding.target == CUDA_ROOT and not binding.aliased:
            raise Decline("a name `from torch import cuda` bound: renamed")  # (its import is, too)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # `from torch import cuda` is rewritten (unless guarded), its uses with it.
        if node.module == "torch" and not node.level and any(a.name == "cuda" for a in node.names):
            raise Decline("`from torch import cuda`: renamed")

    def _mark_chain(self, node: ast.AST) -> None:
        while isinstance(node, ast.Attribute):
            self._inner.add(id(node))
            node = node.value
        if isinstance(node, ast.Name):
            self._inner.add(id(node))

    def _plan(self, node: ast.Attribute, qualified: str) -> None:
        row, rest = self.table.lookup(qualified)
        left = TorchCudaApi.left_unchanged(row, qualified)
        if left is not None:
            self._report(node, *left)
            return
        assert row is not None and row.npu is not None
        new_q = row.npu + rest
        base = leftmost(node)
        assert base is not None
        new_local, new_target = self.table.rebind(base.id, self.ctx.imports.binding(base.id))
        spelled = TorchCudaApi.spell(self.table, self.ctx.imports, new_q, new_local, new_target)
        if spelled is None:
            self._report(node, f"`{qualified}` maps to `{new_q}`, which this file cannot name; left unchanged",
                         f"import torch and use {new_q}")
        elif spelled != dotted(node):
            self._plans[id(node)] = spelled

    def leave_Attribute(self, node: ast.Attribute) -> None:
        spelled = self._plans.get(id(node))
        if spelled is not None:
            self._rewrite(node, spelled)

    def _rewrite(self, node: ast.Attribute, spelled: str) -> None:
        """PythonRule.rewrite of a use renamed to `spelled`: the note of a name left as it is, or a decline
        where the name is changed."""
        self._at(node)
        if self.ctx.left_as_is(node, self.ID):
            return
        if self.ctx.dispatch is not None and self.ctx.dispatch.shapes.selects_npu \
                and TORCH_NPU_WORD.search(spelled) is not None and not self.source.search_code(TORCH_NPU_WORD, node):
            self.ctx.note_at(*self._at(node), self.ID, f"left as is: {NEEDS_TORCH_NPU.reason}",
                             severity=NEEDS_TORCH_NPU.severity)
            return
        raise Decline("a torch.cuda name renamed")

    # -- imports ----------------------------------------------------------------------------
    def leave_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            full = alias.name
            if not is_cuda_name(full) or alias.asname is None:
                continue
            new = self.table.translate(full)
            if (self.table.import_path(new) if new else None) is not None:
                raise Decline("an import of a torch.cuda module rewritten")
            row = self.table.lookup(full)[0]
            self._report(node, f"`import {full}` has no torch_npu module to import instead", row.hint if row else "")

    def leave_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module
        if module is None or node.level:
            return
        if any(a.name == "*" for a in node.names):
            if is_cuda_name(module):
                self._report(node, f"`from {module} import *` cannot be ported name by name",
                             "import the names you use from torch.npu")
            return
        if not is_cuda_name(module):
            return
        for alias in node.names:
            left = TorchCudaApi.import_left(self.table, module, alias.name)
            if left is None:
                raise Decline("a torch.cuda import moved to torch_npu")
        for alias in node.names:
            self._report(node, *TorchCudaApi.import_left(self.table, module, alias.name))  # type: ignore[misc]


def _exits(source, body: list[ast.stmt]) -> bool:
    """torch_cuda_api._exits: an indented block (not a one-line suite) whose last statement returns or raises."""
    return source.starts_line(body[0]) and isinstance(body[-1], (ast.Return, ast.Raise))

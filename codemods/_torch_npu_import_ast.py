"""torch-npu-import on Python's `ast` (core/ast_pass), for a file nothing changes: its one finding, a file
that uses torch.npu without importing torch_npu, where the LibCST rule gives it (codemods/torch_npu_import).
The rule only adds the import after another rule's change, and the ast pass runs only where every rule a
file needs has a twin, none of which changes anything."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from typing import Optional

from npu_port.codemods.torch_npu_import import (
    _IMPORTS_TORCH,
    _IMPORTS_TORCH_NPU,
    _USES_NPU,
    HAND_PORT_MESSAGE,
    _is_npu_native,
    _is_torch,
    _is_torch_npu,
    _needs_torch_npu_first,
)
from npu_port.transpiler.analysis.ast_source import COMPOUND, Source, is_elif
from npu_port.transpiler.core.rules import AstContext


class AstTorchNpuImport:
    ID = "torch-npu-import"

    def __init__(self, ctx: AstContext):
        self.ctx = ctx

    def finalize(self) -> None:
        ctx = self.ctx
        dispatch = ctx.dispatch
        if _is_npu_native(ctx.path, ctx.text) or (dispatch is not None and dispatch.shapes.nvidia_stack) \
                or not _IMPORTS_TORCH.search(ctx.text):
            return
        if _USES_NPU.search(ctx.text) and not _IMPORTS_TORCH_NPU.search(ctx.text):
            tree = ctx.source.tree
            anchor = _anchor(ctx.source, tree.body) if tree is not None else None
            line, col = (anchor.lineno, anchor.col_offset) if anchor is not None else (1, 0)
            ctx.note_at(line, col, self.ID, HAND_PORT_MESSAGE, severity="info")


def _anchor(source: Source, body: Sequence[ast.stmt]) -> Optional[ast.stmt]:
    """torch_npu_import._Scope(...).anchor: the first statement of the line the import goes next to."""
    anchor = None
    for line in _lines(source, body):
        names = [name for stmt in line for name in _imported_modules(stmt)]
        if any(_needs_torch_npu_first(m) for m, _ in names) or any(plain for _, plain in names):
            return line[0]
        if anchor is None and any(_is_torch(m) for m, _ in names):
            anchor = line[0]
    return anchor


def _lines(source: Source, body: Sequence[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """The simple-statement lines torch_npu_import._flatten meets (a line of `a; b` is one LibCST
    statement and two `ast` ones), in its order: into a compound statement's indented blocks (_blocks),
    not into defs or classes."""
    line: list[ast.stmt] = []
    for stmt in body:
        if line and not source.starts_line(stmt):
            line.append(stmt)
            continue
        if line:
            yield line
            line = []
        if isinstance(stmt, COMPOUND):
            for block in _blocks(source, stmt):
                yield from _lines(source, block)
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            line = [stmt]
    if line:
        yield line


def _blocks(source: Source, stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    """torch_npu_import._blocks: the indented body, `else:` (not an elif), `finally:`, then each handler
    (a match statement's cases: none)."""
    blocks: list[list[ast.stmt]] = [getattr(stmt, field, None) or [] for field in ("body", "orelse", "finalbody")]
    if isinstance(stmt, ast.If) and len(blocks[1]) == 1 and is_elif(source, blocks[1][0]):
        blocks[1] = []  # an elif is no `else:` block
    blocks += [handler.body for handler in getattr(stmt, "handlers", ()) or ()]
    yield from (block for block in blocks if block and source.starts_line(block[0]))


def _imported_modules(stmt: ast.stmt) -> list[tuple[str, bool]]:
    """torch_npu_import._imported_modules for one statement of a line."""
    out: list[tuple[str, bool]] = []
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            name = alias.name
            if _is_torch_npu(name) and alias.asname is not None:
                name = "(torch_npu as alias)"
            out.append((name, name == "torch"))
    elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module is not None:
        module = stmt.module
        if _is_torch_npu(module):
            return out
        if module == "torch" and any(a.name == "npu" for a in stmt.names):
            module = "torch.npu"
        out.append((module, False))
    return out

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Optional, Union, cast

import libcst as cst

from npu_port.codemods._device_agnostic import framework_loads_torch_npu
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.project_modules import lazy_torch_npu_loader
from npu_port.transpiler.core.cst_walk import transform, visit
from npu_port.transpiler.core.rules import CUDA_WORD, PythonRule

# Signs that a file already uses the NPU without importing torch_npu (e.g. ported by hand).
_USES_NPU = re.compile(r"torch\.npu|from torch import npu|\.npu\(|\.is_npu\b")
_NPU_NATIVE_IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+(?:torch_npu|vllm_ascend|mindspeed\w*)\b", re.M)
_NPU_PACKAGE = re.compile(r"(?:^|[/\\])\w+_(?:ascend|npu)[/\\]")


def _is_npu_native(path: str, text: str) -> bool:
    return bool(_NPU_PACKAGE.search(path) or _NPU_NATIVE_IMPORT.search(text))


HAND_PORT_MESSAGE = ("uses torch.npu without importing torch_npu: fine where torch_npu is loaded elsewhere (its "
                     "autoload on `import torch`, a plugin); otherwise add `import torch_npu`")
_IMPORTS_TORCH = re.compile(r"^[ \t]*(?:import|from)[ \t]+torch\b", re.M)
_IMPORTS_TORCH_NPU = re.compile(r"^[ \t]*(?:import[ \t]+torch_npu\b|from[ \t]+torch_npu\b)", re.M)


def _imported_modules(line: cst.CSTNode) -> list[tuple[str, bool]]:
    """(module, is plain `import torch[ as T]`) for each import in a statement line.

    Only an import that binds the name `torch_npu` counts as `torch_npu` (rules emit `torch_npu.x`
    attributes); `from torch_npu.profiler import profile` loads it without binding it.
    """
    out: list[tuple[str, bool]] = []
    if not isinstance(line, cst.SimpleStatementLine):
        return out
    for small in line.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                name = dotted_name(alias.name) or ""
                if _is_torch_npu(name) and alias.asname is not None:
                    name = "(torch_npu as alias)"
                out.append((name, name == "torch"))
        elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
            module = dotted_name(small.module) or ""
            if _is_torch_npu(module):
                continue
            if module == "torch" and not isinstance(small.names, cst.ImportStar) and any(
                    dotted_name(a.name) == "npu" for a in small.names):
                module = "torch.npu"
            out.append((module, False))
    return out


def _is_torch(module: str) -> bool:
    return module == "torch" or module.startswith("torch.")


def _needs_torch_npu_first(module: str) -> bool:
    return module == "torch.npu" or module.startswith("torch.npu.")


def _is_torch_npu(module: str) -> bool:
    return module == "torch_npu" or module.startswith("torch_npu.")


def _blocks(stmt: cst.CSTNode):
    """The statement lists directly inside a compound statement (not defs or classes), with rebuilders."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or not isinstance(stmt, cst.BaseCompoundStatement):
        return
    for attr in ("body", "orelse", "finalbody"):
        part = getattr(stmt, attr, None)
        if isinstance(part, cst.IndentedBlock):
            yield attr, part
        elif isinstance(part, (cst.Else, cst.Finally)) and isinstance(part.body, cst.IndentedBlock):
            yield attr, part
    for i, handler in enumerate(getattr(stmt, "handlers", ()) or ()):
        yield ("handlers", i), handler


# What a block holds (LibCST's BaseStatement has no leading_lines of its own; these two have).
_Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


def _insert(stmts: Sequence[cst.BaseStatement], anchor: Optional[cst.CSTNode], new: cst.BaseStatement,
            before: bool) -> tuple[list[cst.BaseStatement], bool]:
    out = list(stmts)
    for i, stmt in enumerate(out):
        if stmt is anchor:
            if before:
                new = new.with_changes(leading_lines=cast(_Statement, stmt).leading_lines)
                out[i] = stmt.with_changes(leading_lines=())
                out.insert(i, new)
            else:
                out.insert(i + 1, new)
            return out, True
        for key, part in _blocks(stmt):
            block = part if isinstance(part, cst.IndentedBlock) else part.body
            body, done = _insert(block.body, anchor, new, before)
            if done:
                new_block = block.with_changes(body=body)
                new_part = new_block if isinstance(part, cst.IndentedBlock) else part.with_changes(body=new_block)
                if isinstance(key, tuple):
                    handlers = list(cast(Union[cst.Try, cst.TryStar], stmt).handlers)
                    handlers[key[1]] = new_part
                    out[i] = stmt.with_changes(handlers=handlers)
                else:
                    out[i] = stmt.with_changes(**{key: new_part})
                return out, True
    return out, False


class _Scope:
    """Where `import torch_npu` goes in one scope's statements, or why not."""

    def __init__(self, stmts: Sequence[cst.CSTNode]):
        lines = [(line, _imported_modules(line)) for line in _flatten(stmts)]
        lines = [(line, mods) for line, mods in lines if mods]
        self.has_torch = any(_is_torch(m) for _, mods in lines for m, _ in mods)
        self.anchor: Optional[cst.CSTNode] = None
        self.before = False
        self.has_torch_npu = any(_is_torch_npu(m) for _, mods in lines for m, _ in mods)
        for line, mods in lines:
            names = [m for m, _ in mods]
            if any(_needs_torch_npu_first(m) for m in names):
                # `import torch.npu as tc` needs torch_npu loaded before it.
                self.anchor, self.before = line, True
                return
            if any(plain for _, plain in mods):
                self.anchor = line
                return
            if self.anchor is None and any(_is_torch(m) for m in names):
                self.anchor = line  # `from torch import nn`: after it, unless a plain import follows

    @property
    def wants_import(self) -> bool:
        return self.has_torch and not self.has_torch_npu and self.anchor is not None


def _flatten(stmts: Sequence[cst.CSTNode]):
    for stmt in stmts:
        yield stmt
        for _, part in _blocks(stmt):
            yield from _flatten(part.body if isinstance(part, cst.IndentedBlock) else part.body.body)


def _import_line(guarded: bool) -> cst.BaseStatement:
    if guarded:  # GPU and CPU hosts have no torch_npu: the import must not fail there
        return cst.parse_statement(_GUARDED_IMPORT)
    return cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(name=cst.Name("torch_npu"))])])


_GUARDED_IMPORT = """\
try:
    import torch_npu  # noqa: F401  (registers the Ascend NPU with torch where it is installed)
except ImportError:
    pass
"""


class TorchNpuImport(PythonRule):
    """Add `import torch_npu` right after the first `import torch` of each scope that uses torch.

    What it does:
        In a file that npu-port changed, adds `import torch_npu` after the
        first `import torch` / `import torch as T` of the module; where torch is only imported inside
        functions, after each function-local `import torch`. It goes before an `import torch.npu as x` or
        `from torch import npu` that would otherwise run first. Never twice; never in files that do not
        import torch.

        A module of a package that loads torch_npu only where it is installed (an import inside a function, a
        `try` or an `if`, or `find_spec("torch_npu")`, anywhere in the package: accelerate's
        `is_npu_available()`, ms-swift's NPU patches) gets the guarded import below instead: such a library
        must keep importing on GPU and CPU hosts.

        A file whose changes need nothing torch_npu registers (Ray's "NPU" resource, environment-variable
        names, an error's text: rules with NEEDS_TORCH_NPU = False) gets no import either.
        Files that are NPU code already (they import torch_npu, vllm_ascend or mindspeed somewhere, sit
        in an `*_ascend` or `*_npu` package, or run under transfer_to_npu: docs/device-aware.md) get no import, and neither do files that pick the NPU at run
        time (an `is_torch_npu_available()` or an NPU branch): an info finding says so. A file written
        for the NPU by hand (it uses `torch.npu` and nothing in it changes) gets an info finding, not
        the import: such code often relies on torch_npu being loaded elsewhere on purpose.

    Why:
        torch_npu registers the `npu` device, `torch.npu` and the HCCL backend. torch-npu 2.14 also loads
        itself on `import torch` through an entry point, but the explicit import is the Ascend convention
        and works with older releases and with autoloading turned off.

    Example:
        import torch            ->  import torch
                                    import torch_npu

    With --keep-cuda:
        import torch            ->  import torch
                                    try:
                                        import torch_npu  # noqa: F401  (registers the Ascend NPU ...)
                                    except ImportError:
                                        pass
        (none in verl and vLLM files: verl.utils.device and vllm-ascend's platform plugin import torch_npu
        where it is installed)

    Fix safety:
        safe: importing torch_npu has no effect beyond registering the NPU backend.
    """

    ID = "torch-npu-import"
    SAFETY = "safe"
    TRIGGERS = ("torch.npu", "from torch import npu", ".npu(", ".is_npu")
    TRIGGER_PATTERNS = (CUDA_WORD,)
    FOLLOWS_CHANGES = True
    _loader: Optional[str] = None  # where the file's package loads torch_npu lazily (finalize), or None

    @classmethod
    def scout(cls, facts, options) -> bool:
        # On its own (without another rule's change) it only reports files that use the NPU without
        # importing torch_npu; it runs after any change anyway (FOLLOWS_CHANGES). An `*_ascend` package
        # is NPU code, left alone by path (finalize).
        if not (facts.has_word("torch") and facts.search(_USES_NPU)) or _NPU_PACKAGE.search(facts.path):
            return False
        return facts.unsure or not (_IMPORTS_TORCH_NPU.search(facts.source) or _NPU_NATIVE_IMPORT.search(facts.source))

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        # NPU code already (it imports torch_npu, vllm_ascend or mindspeed somewhere, lives in an
        # *_ascend or *_npu package, or runs under transfer_to_npu: analysis/npu_patching) imports
        # torch_npu where and when it chooses: vllm-ascend keeps it out of its platform module on purpose. A file that picks the NPU at run time must keep importing on
        # GPU and CPU hosts. Neither gets an unconditional import.
        if _is_npu_native(self.ctx.path, self.ctx.text) or self.ctx.dispatch.nvidia_stack \
                or not _IMPORTS_TORCH.search(self.ctx.text) or self.ctx.dispatch.npu_framework:
            return updated
        if not self.ctx.changed:
            # Written for the NPU by hand already: torch_npu may be loaded elsewhere on purpose (its
            # autoload entry point, a platform plugin such as vllm-ascend); say so rather than add it.
            if _USES_NPU.search(self.ctx.text) and not _IMPORTS_TORCH_NPU.search(self.ctx.text):
                self.report(_Scope(original.body).anchor or original, HAND_PORT_MESSAGE, severity="info")
            return updated
        if self.ctx.options.keep_cuda and framework_loads_torch_npu(self.ctx):
            return updated
        if not self.ctx.changes_need_torch_npu():
            return updated  # Ray resource names, env-var names and the like only: nothing torch_npu registers
        if self.ctx.has_npu_branch() or self.ctx.dispatch.selects_npu:
            self.report(_Scope(original.body).anchor or original, "left without `import torch_npu`: this file already selects the NPU at run "
                                  "time; import it where the NPU branch runs", severity="info")
            return updated
        module_scope = _Scope(updated.body)
        if module_scope.has_torch_npu:
            return updated
        # A package that loads torch_npu only where it is installed keeps importing on GPU and CPU hosts.
        self._loader = None if self.ctx.options.keep_cuda else lazy_torch_npu_loader(self.ctx.path)
        if module_scope.wants_import:
            body, _ = _insert(updated.body, module_scope.anchor, self._import_line(), module_scope.before)
            self._note(_Scope(original.body).anchor or original)
            return updated.with_changes(body=body)
        if module_scope.has_torch:
            return updated
        return self._into_functions(original, updated)

    def _into_functions(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        originals = iter(_functions_with_torch(original))

        class AddToFunctions(cst.CSTTransformer):
            def __init__(self, rule):
                super().__init__()
                self.rule = rule

            def on_visit(self, node: cst.CSTNode) -> bool:
                return not isinstance(node, _HOLDS_NO_DEF) and super().on_visit(node)

            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                # A function importing torch gets the import; functions nested in it share it.
                return not (isinstance(node.body, cst.IndentedBlock) and _Scope(node.body.body).has_torch)

            def leave_FunctionDef(self, orig: cst.FunctionDef, node: cst.FunctionDef):
                if not isinstance(node.body, cst.IndentedBlock):
                    return node
                scope = _Scope(node.body.body)
                if not scope.has_torch:
                    return node
                orig_fn = next(originals, None)
                if not scope.wants_import:
                    return node
                body, _ = _insert(node.body.body, scope.anchor, self.rule._import_line(), scope.before)
                if orig_fn is not None:
                    self.rule._note(_Scope(orig_fn.body.body).anchor or orig_fn)
                return node.with_changes(body=node.body.with_changes(body=body))

        return cast(cst.Module, transform(updated, AddToFunctions(self)))

    def _import_line(self) -> cst.BaseStatement:
        return _import_line(self.ctx.options.keep_cuda or self._loader is not None)

    def _note(self, anchor: cst.CSTNode) -> None:
        if not self.ctx.is_silenced(anchor, self.ID):
            why = f" where installed (the package loads it so: {self._loader})" if self._loader else ""
            self.ctx.note(anchor, self.ID, f"added `import torch_npu`{why}", kind="change")


# Nodes no `def` statement can be inside: the function walks below skip them (most of a tree).
_HOLDS_NO_DEF = (cst.SimpleStatementLine, cst.BaseExpression)


def _functions_with_torch(module: cst.Module) -> list[cst.FunctionDef]:
    found: list[cst.FunctionDef] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            return not isinstance(node, _HOLDS_NO_DEF) and super().on_visit(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            if isinstance(node.body, cst.IndentedBlock) and _Scope(node.body.body).has_torch:
                found.append(node)
                return False
            return True

    visit(module, Collect())
    return found

"""vLLM (extras): start vLLM's worker processes with spawn, as the vllm-ascend examples do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import scan_scope
from npu_port.transpiler.analysis.project_modules import in_checkout_of
from npu_port.transpiler.core.rules import PythonContext, PythonRule

VARIABLE = "VLLM_WORKER_MULTIPROC_METHOD"
VALUE = "spawn"


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _is_guarded_import(stmt: cst.CSTNode) -> bool:
    """`try: import x / except ImportError: ...`: part of the import block."""
    return isinstance(stmt, cst.Try) and isinstance(stmt.body, cst.IndentedBlock) and all(
        _is_import_line(s) for s in stmt.body.body)


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.SimpleString))


def insertion_index(body: Sequence[cst.CSTNode]) -> int:
    """Just after the module's leading import block (docstring, `__future__` and plain statements such
    as `sys.path.insert` may sit among the imports; the first def, class or other block ends it)."""
    last_import: Optional[int] = None
    for i, stmt in enumerate(body):
        if _is_import_line(stmt) or _is_guarded_import(stmt):
            last_import = i
        elif isinstance(stmt, cst.BaseCompoundStatement):
            break
    if last_import is not None:
        return last_import + 1
    return 1 if body and _is_docstring(body[0]) else 0


class VllmSpawnEnv(PythonRule):
    """Set VLLM_WORKER_MULTIPROC_METHOD=spawn in scripts that use vLLM (extras).

    What it does:
        In a file that imports vllm (anywhere), adds once, after the module's imports:
            os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        using the file's own name for `os` (or `environ` from `from os import environ`), and adds
        `import os` when the file has none. A file that already names the variable is left alone; one
        that uses a name `os` no import binds is reported instead.

    Why:
        The vllm-ascend offline examples set it: the NPU runtime cannot be used from a forked child once
        the parent initialised it, which is what vLLM's default `fork` does with tensor parallelism.

    Example:
        from vllm import LLM, SamplingParams       ->  from vllm import LLM, SamplingParams

                                                    ->  os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")

    With --keep-cuda:
        import importlib.util
        ...
        if importlib.util.find_spec("vllm_ascend") is not None:  # Ascend NPU host (vllm-ascend)
            os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        (only where the vllm-ascend plugin is installed: on GPU hosts vLLM keeps its own start method;
        in vllm-ascend's own tree, its examples and tests, the setting as in the default mode)

    Fix safety:
        Safe: `setdefault` keeps a value the user exported; vLLM reads the variable when it starts its
        workers, after the module's imports ran.
    """

    ID = "vllm-spawn-env"
    SAFETY = "safe"
    GROUP = "extras"
    TRIGGERS = ("vllm",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # It acts on a file that imports vllm and does not name the variable in quotes yet: the same two
        # tests as leave_Module's, the second on the same text (quotes and the name are ASCII, alike in
        # any encoding Python reads). vllm-ascend names vllm in nearly every file and imports it in few
        # of those its other rules parse: with --extras, 381 of the 390 it parsed for nothing were this
        # rule's.
        return facts.imports_root("vllm") and not any(f"{q}{VARIABLE}{q}" in facts.source for q in "\"'")

    def __init__(self, ctx: PythonContext):
        super().__init__(ctx)
        self._imports_vllm = False
        self._uses_name_os = False

    def visit_Name(self, node: cst.Name) -> None:
        self._uses_name_os |= node.value == "os"

    def visit_Import(self, node: cst.Import) -> None:
        self._imports_vllm |= any(self.ctx.module.code_for_node(a.name).split(".")[0] == "vllm" for a in node.names)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            self._imports_vllm |= self.ctx.module.code_for_node(node.module).split(".")[0] == "vllm"

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self._imports_vllm or f'"{VARIABLE}"' in self.ctx.text or f"'{VARIABLE}'" in self.ctx.text:
            return updated
        bound = scan_scope(original.body)
        environ = next((local for local, b in bound.items() if b.target == "os.environ"), None)
        os_name = next((local for local, b in bound.items() if b.target == "os"), None)
        statements = []
        if environ is None and os_name is None:
            if self._uses_name_os:
                # The file uses an `os` no import binds: an `import os` added here would change what
                # that name means (and what the other rules make of it on the next run).
                self.report(original, f"`os` is used without `import os`: set {VARIABLE}={VALUE} by hand",
                            hint=f'import os, then os.environ.setdefault("{VARIABLE}", "{VALUE}")')
                return updated
            os_name = "os"
            statements.append(cst.parse_statement("import os\n"))
        mapping = environ or f"{os_name}.environ"
        setter = cst.parse_statement(f'{mapping}.setdefault("{VARIABLE}", "{VALUE}")\n')
        body = list(updated.body)
        at = insertion_index(body)
        new = updated.with_changes(body=body[:at] + statements + [
            setter.with_changes(leading_lines=[cst.EmptyLine()])] + body[at:])

        def on_npu_hosts() -> cst.Module:
            # --keep-cuda: only where vllm-ascend is installed; GPU hosts keep vLLM's own choice (a
            # script without a __main__ guard that runs with fork there would not run with spawn). In
            # vllm-ascend's own tree the plugin is always there: the setting as in the default mode.
            if in_checkout_of(self.ctx.path, "vllm_ascend"):
                return new
            self.ctx.require_import("importlib.util")
            guarded = cst.parse_statement(
                f'if importlib.util.find_spec("vllm_ascend") is not None:  # Ascend NPU host (vllm-ascend)\n'
                f'    {mapping}.setdefault("{VARIABLE}", "{VALUE}")\n')
            return updated.with_changes(body=body[:at] + statements + [
                guarded.with_changes(leading_lines=[cst.EmptyLine()])] + body[at:])
        # Anchor the change on the statement it follows, so that an ignore comment elsewhere in the
        # file does not silence it.
        anchor_at = insertion_index(list(original.body))
        anchor = original.body[anchor_at - 1] if anchor_at else (original.body[0] if original.body else original)
        return self.rewrite(anchor, updated, new, f"{VARIABLE}={VALUE} set for vLLM's NPU workers",
                            portable=on_npu_hosts)

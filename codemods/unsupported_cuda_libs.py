"""CUDA-only libraries and CUDA extension builds: reported where they are imported and used, never rewritten."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name, iter_scope_statements
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table

# Exceptions whose handler makes an import optional: the code already runs without the library.
_IMPORT_GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
_DYNAMIC_IMPORTS = {"importlib.import_module", "__import__"}


@dataclass(frozen=True)
class LibraryRow:
    module: str
    what: str
    hint: str
    uses: bool = False


@dataclass(frozen=True)
class CudaBuilds:
    callables: frozenset[str]
    keywords: frozenset[str]
    suffixes: tuple[str, ...]
    what: str
    hint: str


@cache
def library_rows(target: str) -> tuple[LibraryRow, ...]:
    """The rows of codemods/data/<target>/unsupported_libraries.yaml, longest module first."""
    raw = load_table(target, "unsupported_libraries")
    rows = [LibraryRow(r["module"], r["what"], r["hint"], bool(r.get("uses", False))) for r in raw["rows"]]
    return tuple(sorted(rows, key=lambda r: -len(r.module)))


@cache
def cuda_builds(target: str) -> CudaBuilds:
    raw = load_table(target, "unsupported_libraries")["cuda_builds"]
    return CudaBuilds(frozenset(raw["callables"]), frozenset(raw["keywords"]), tuple(raw["suffixes"]),
                      raw["what"], raw["hint"])


@cache
def compiled_extension_row(target: str) -> tuple[tuple[str, ...], LibraryRow]:
    raw = load_table(target, "unsupported_libraries")["compiled_extensions"]
    return tuple(raw["suffixes"]), LibraryRow("", raw["what"], raw["hint"])


def match_library(target: str, name: str) -> Optional[LibraryRow]:
    for row in library_rows(target):
        if name == row.module or name.startswith(row.module + "."):
            return row
    suffixes, row = compiled_extension_row(target)
    if name.split(".", 1)[0].endswith(suffixes):
        return row
    return None


def _catches_import_errors(node: cst.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        types = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
        for t in types:
            expr = t.value if isinstance(t, cst.Element) else t
            if (dotted_name(expr) or "").rsplit(".", 1)[-1] in _IMPORT_GUARDS:
                return True
    return False


def _strings_in(node: cst.CSTNode) -> Iterator[str]:
    """The string literals in `node`; an f-string reads with `{}` where its expressions are."""
    if isinstance(node, cst.FormattedString):
        yield "".join(p.value if isinstance(p, cst.FormattedStringText) else "{}" for p in node.parts)
        return
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # an invalid escape: not a path we can read
            return
        if isinstance(value, str):
            yield value
        return
    for child in node.children:
        yield from _strings_in(child)


class UnsupportedCudaLibraries(PythonRule):
    """Reports CUDA-only libraries, Triton kernels and CUDA extension builds, with what to use on Ascend.

    What it does:
        Reports every import of a CUDA-only library (triton, cupy, pycuda, numba.cuda, pynvml,
        bitsandbytes, xformers, liger_kernel, flash_attn, apex, amp_C, mamba_ssm, causal_conv1d,
        transformer_engine, tensorrt, and modules named like compiled CUDA extensions, `*_cuda`, also
        through importlib.import_module), one finding per import statement and library, and each use
        of the APIs that must be ported
        call by call (`@triton.jit` and `@triton.autotune` kernels, flash_attn and xformers calls,
        apex.amp, apex optimisers and layers, `CUDAExtension(...)`). Calls that build CUDA code
        (`load_inline(cuda_sources=...)`, `load(..., sources=[...".cu"], extra_cuda_cflags=...)`, an
        Extension with `.cu` sources) are reported too. Each finding carries a hint: triton-ascend for Triton kernels,
        `torch_npu.npu_fusion_attention` for flash_attn (not a 1:1 rename), torch_npu.optim's fused
        optimisers for apex's. Imports inside `try: ... except ImportError` are info, not warnings.
        The table is codemods/data/<target>/unsupported_libraries.yaml.

    Why:
        These libraries ship CUDA kernels (or compile them), so they fail to import or to run on
        an NPU; no mechanical rewrite exists, and a silent leftover is the worst outcome.
        `attn_implementation="flash_attention_2"` in transformers is not reported: transformers
        routes it to torch_npu on Ascend.

    Example:
        from flash_attn import flash_attn_func   ->  unchanged; warning with the npu_fusion_attention recipe
        @triton.jit                              ->  unchanged; warning: triton-ascend, retune

    Fix safety:
        Report-only: nothing is rewritten.
    """

    ID = "unsupported-cuda-libs"
    SAFETY = "report-only"
    TRIGGERS = ("triton", "cupy", "pycuda", "numba", "pynvml", "bitsandbytes", "xformers", "liger_kernel",
                "flash_attn", "apex", "amp_C", "mamba_ssm", "causal_conv1d", "transformer_engine", "tensorrt",
                "cpp_extension")
    # `.cu`/`.cuh` sources and `*_cuda` extension modules, without matching `.cuda` or `_cuda_x`.
    TRIGGER_PATTERNS = (r"\.cuh?(?![A-Za-z0-9_])", r"_cuda(?![A-Za-z0-9_])")

    @classmethod
    def scout(cls, facts, options) -> bool:
        # A library is reported where an import statement names it, or where a name resolves through
        # such an import: either way an import names its top-level package and the code spells the rest.
        target = options.target
        suffixes, _ = compiled_extension_row(target)
        builds = cuda_builds(target)
        return (any(facts.imports_root(row.module.split(".")[0]) and facts.may_name(row.module)
                    for row in library_rows(target))
                or facts.unsure or any(root.endswith(suffixes) for root in facts.imported_roots)
                or any(facts.may_name(name) for name in (*_DYNAMIC_IMPORTS, *builds.callables)))

    def __init__(self, ctx):
        super().__init__(ctx)
        self._guarded: set[int] = set()  # ids of imports whose ImportError is handled
        self._decorated: set[int] = set()  # ids of calls already reported as a decorator

    def visit_Try(self, node: cst.Try) -> None:
        if not _catches_import_errors(node):
            return
        body = node.body
        smalls = body.body if isinstance(body, cst.SimpleStatementSuite) else iter_scope_statements(body.body)
        self._guarded.update(id(s) for s in smalls if isinstance(s, (cst.Import, cst.ImportFrom)))

    # -- imports -------------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted_name(alias.name)
            row = match_library(self.ctx.target, name) if name else None
            if row is not None:
                self._report_import(alias, node, row, f"import {name}")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module)
        if module is None:
            return
        if isinstance(node.names, cst.ImportStar):
            row = match_library(self.ctx.target, module)
            if row is not None:
                self._report_import(node, node, row, f"from {module} import *")
            return
        # One finding per library row and statement, at the first name that needs it.
        seen: dict[LibraryRow, list[str]] = {}
        first: dict[LibraryRow, cst.ImportAlias] = {}
        for alias in node.names:
            name = dotted_name(alias.name)
            row = match_library(self.ctx.target, f"{module}.{name}") if name else None
            if row is not None:
                seen.setdefault(row, []).append(name)
                first.setdefault(row, alias)
        for row, names in seen.items():
            self._report_import(first[row], node, row, f"from {module} import {', '.join(names)}")

    def _report_import(self, at: cst.CSTNode, stmt: cst.CSTNode, row: LibraryRow, text: str) -> None:
        if id(stmt) in self._guarded:
            self.report(at, f"{row.what}: `{text}` is optional here (ImportError handled); it will not "
                            f"import on Ascend NPU", severity="info", hint=row.hint)
        else:
            self.report(at, f"{row.what}: `{text}` does not work on Ascend NPU", hint=row.hint)

    # -- uses ----------------------------------------------------------------------------------
    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        target = expr.func if isinstance(expr, cst.Call) else expr
        name = self.ctx.resolve(target)
        row = match_library(self.ctx.target, name) if name else None
        if row is not None and row.uses:
            self._decorated.add(id(expr))
            self.report(node, f"{row.what}: `@{name}` does not work on Ascend NPU", hint=row.hint)

    def visit_Call(self, node: cst.Call) -> None:
        if id(node) in self._decorated:
            return
        name = self.ctx.resolve(node.func)
        if name is None and isinstance(node.func, cst.Name) and node.func.value == "__import__":
            name = "__import__"  # a builtin: no import binds it
        if name is None:
            return
        row = match_library(self.ctx.target, name)
        if row is not None and row.uses:
            self.report(node, f"{row.what}: `{name}(...)` does not work on Ascend NPU", hint=row.hint)
            return
        if name in _DYNAMIC_IMPORTS and node.args and isinstance(node.args[0].value, cst.SimpleString):
            module = node.args[0].value.evaluated_value
            row = match_library(self.ctx.target, module) if isinstance(module, str) else None
            if row is not None:
                self.report(node, f"{row.what}: `{name}({module!r})` does not work on Ascend NPU", hint=row.hint)
            return
        builds = cuda_builds(self.ctx.target)
        if name in builds.callables and self._builds_cuda(node, builds):
            self.report(node, f"{builds.what}: `{name}(...)` compiles CUDA code", hint=builds.hint)

    @staticmethod
    def _builds_cuda(node: cst.Call, builds: CudaBuilds) -> bool:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in builds.keywords:
                if not (isinstance(arg.value, cst.Name) and arg.value.value in ("None", "False")):
                    return True
        return any(s.endswith(builds.suffixes) for arg in node.args for s in _strings_in(arg.value))

"""CUDA-only libraries and CUDA extension builds: reported where they are imported and used, never rewritten."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Optional, cast

import libcst as cst

from npu_port.codemods._communicators import portable_statement
from npu_port.transpiler.analysis.imports import dotted_name, iter_scope_statements, leftmost_name
from npu_port.transpiler.analysis.kernels import kernel_functions
from npu_port.transpiler.core.report import Severity
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
    severity: Severity = "warning"  # info: host-side API that runs once its package has an Ascend build


@dataclass(frozen=True)
class CudaBuilds:
    callables: frozenset[str]
    extension_loaders: frozenset[str]  # the builders that return the built module
    keywords: frozenset[str]
    suffixes: tuple[str, ...]
    what: str
    hint: str


@cache
def library_rows(target: str) -> tuple[LibraryRow, ...]:
    """The rows of codemods/data/<target>/unsupported_libraries.yaml, longest module first."""
    raw = load_table(target, "unsupported_libraries")
    rows = [LibraryRow(r["module"], r["what"], r["hint"], bool(r.get("uses", False)), r.get("severity", "warning"))
            for r in raw["rows"]]
    return tuple(sorted(rows, key=lambda r: -len(r.module)))


@cache
def cuda_builds(target: str) -> CudaBuilds:
    raw = load_table(target, "unsupported_libraries")["cuda_builds"]
    return CudaBuilds(frozenset(raw["callables"]), frozenset(raw["extension_loaders"]),
                      frozenset(raw["keywords"]), tuple(raw["suffixes"]), raw["what"], raw["hint"])


@cache
def compiled_extension_row(target: str) -> tuple[tuple[str, ...], LibraryRow]:
    raw = load_table(target, "unsupported_libraries")["compiled_extensions"]
    return tuple(raw["suffixes"]), LibraryRow("", raw["what"], raw["hint"])


def _use_message(row: LibraryRow, name: str, call: bool) -> str:
    # An info row is host code that runs once the package has an Ascend build: "does not work" would
    # be wrong there, so the message says what it needs instead.
    if row.severity == "info":
        return f"{row.what}: `{name}{'(...)' if call else ''}` is host code that needs the Ascend build of its package"
    if call:
        return f"{row.what}: `{name}(...)` does not work on Ascend NPU"
    return f"{row.what}: `{name}` is used here and does not work on Ascend NPU"


def import_row(target: str, name: str) -> Optional[LibraryRow]:
    """The row an import of `name` is reported with: an info row (a host API such as `triton.cdiv`) is
    about its uses, so the import of it is the import of its package."""
    row = match_library(target, name)
    if row is not None and row.severity == "info":
        return match_library(target, name.split(".", 1)[0])
    return row


def match_library(target: str, name: str) -> Optional[LibraryRow]:
    for row in library_rows(target):
        if name == row.module or name.startswith(row.module + "."):
            return row
    suffixes, row = compiled_extension_row(target)
    if name.split(".", 1)[0].endswith(suffixes):
        return row
    return None


# Triton kernels compile for the NPU with triton-ascend; its rows are no proof that a file is CUDA-only.
_PORTABLE_KERNEL_TOPS = frozenset({"triton"})


def cuda_only_kernel_import(target: str, module: str) -> Optional[str]:
    """What unsupported-cuda-libs knows `module` to be, where it is a CUDA-only kernel library (CuTe, CUTLASS,
    cuda.bindings, CuPy, a `*_cuda` extension; not Triton, which triton-ascend compiles, nor a host-side
    info row), else None."""
    row = match_library(target, module)
    if row is None or row.severity == "info" or module.split(".", 1)[0] in _PORTABLE_KERNEL_TOPS:
        return None
    return row.what


class KernelScopes:
    """Whether the innermost function a rule's walk is in launches a GPU kernel (analysis/kernels, with this
    table's CUDA-only kernel libraries): `enter` / `leave` at each FunctionDef; the file is read on the first
    question."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx
        self._open: list[int] = []  # the source-order indices of the enclosing functions
        self._next = 0
        self._launches: Optional[list[bool]] = None

    def enter(self) -> None:
        self._open.append(self._next)
        self._next += 1

    def leave(self) -> None:
        self._open.pop()

    def innermost_launches(self) -> bool:
        if not self._open:
            return False
        if self._launches is None:
            target = self._ctx.target
            self._launches = kernel_functions(
                self._ctx.path, self._ctx.text, lambda m: cuda_only_kernel_import(target, m) is not None) or []
        index = self._open[-1]
        return index < len(self._launches) and self._launches[index]


def import_finding(row: LibraryRow, text: str, local: str, optional: bool,
                   elsewhere: set[str]) -> tuple[str, Severity]:
    """(message, severity) of an import of a library (judged once the whole file is read)."""
    if local and local in elsewhere:
        return (f"{row.what}: `{text}` does not work on Ascend NPU; `{local}` is also imported from a non-CUDA "
                f"module here, the NPU path", "info")
    if optional:
        return (f"{row.what}: `{text}` is optional here (ImportError handled or an NPU check); it will not import "
                f"on Ascend NPU", "info")
    return f"{row.what}: `{text}` does not work on Ascend NPU", "warning"


def use_finding(message: str, local: str, guarded: bool, severity: Severity, ported: set[str],
                elsewhere: set[str]) -> Optional[tuple[str, Severity]]:
    """(message, severity) of a use site, None where another rule ports the name: info where the code
    already has another path (optional import, NPU guard, or the name also imported from a non-CUDA module)."""
    if local and local in ported:
        return None
    if local and local in elsewhere:
        return (f"{message}; `{local}` is also imported from a non-CUDA module here, so this may be the NPU path",
                "info")
    if guarded:
        return f"{message} (optional here: the code has another path)", "info"
    return message, severity


def launch_message(name: str) -> str:
    return f"launch of Triton kernel `{name}` does not run on Ascend NPU without triton-ascend"


def is_launched_kernel(name: str, kernels: set[str], triton_file: bool) -> bool:
    """A kernel of this file, or (in a file that uses Triton) one imported under a kernel's name."""
    last = name.rsplit(".", 1)[-1]
    return last in kernels or (triton_file and "kernel" in last.lower())


def _catches_import_errors(node: cst.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        types = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
        for t in types:
            expr = t.value if isinstance(t, cst.Element) else t
            if (dotted_name(cast(cst.BaseExpression, expr)) or "").rsplit(".", 1)[-1] in _IMPORT_GUARDS:
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
    """Reports CUDA-only libraries, Triton kernels and CUDA extension builds where they are imported and used.

    What it does:
        Reports every import of a CUDA-only library (triton, cupy, pycuda, numba.cuda, pynvml,
        bitsandbytes, xformers, liger_kernel, flash_attn, apex, amp_C, mamba_ssm, causal_conv1d, unsloth,
        transformer_engine, tensorrt, vLLM's PyNcclCommunicator and NCCL weight-transfer engine, and
        modules named like compiled CUDA extensions, `*_cuda`, also through importlib.import_module),
        one finding per import statement and library, and then every use site, one finding each:
        calls and references of names bound from those libraries (`cp.asarray(t)`,
        `pynvml.nvmlInit()`, `bnb.optim.Adam8bit(...)`, `isinstance(m, bnb.nn.Linear8bitLt)`),
        `@triton.jit` / `@triton.autotune` kernels and their launches (`kernel[grid]` called), and the
        calls into a CUDA extension built with `load(...)` / `load_inline(cuda_sources=...)`
        (`_ext.bias_gelu(x)`). Builds of CUDA code (`load_inline(cuda_sources=...)`,
        `load(..., sources=[...".cu"])`, `CUDAExtension(...)`, an Extension with `.cu` sources) are
        reported too. Each finding carries the hint of its table row, right for the name:
        triton-ascend for Triton kernels, `torch_npu.npu_fusion_attention` for flash_attn's attention
        functions (not a 1:1 rename) but plain torch indexing for its `bert_padding` helpers,
        torch_npu.optim's fused optimisers for apex's, vllm-ascend's PyHcclCommunicator for
        PyNcclCommunicator (not reported where vllm-pyhccl ports it: the file calls no method the HCCL
        communicator lacks). Imports inside `try: ... except ImportError`, and the uses of what they
        bind, are info, not warnings; so is a use under an NPU guard or of a name that is also
        imported from a non-CUDA module (`... import PyHcclCommunicator as PyNcclCommunicator`),
        and so is Triton's host-side API outside kernels (`triton.cdiv`, `triton.next_power_of_2`,
        `triton.Config`, `triton.runtime`, `triton.language` probes): triton-ascend has the same
        names, and the hint says what to check (grids and configs tuned for NVIDIA GPUs).
        The table is codemods/data/<target>/unsupported_libraries.yaml.

    Why:
        These libraries ship CUDA kernels (or compile them), so they fail to import or to run on
        an NPU; no mechanical rewrite exists, and a silent leftover is the worst outcome. The import
        alone says a file needs work; the use sites say where, so the list of what is left is
        complete. `attn_implementation="flash_attention_2"` in transformers is not reported:
        transformers routes it to torch_npu on Ascend.

    Example:
        from flash_attn import flash_attn_func   ->  unchanged; warning with the npu_fusion_attention recipe
        out = flash_attn_func(q, k, v)           ->  unchanged; warning at the call
        @triton.jit                              ->  unchanged; warning: triton-ascend, retune
        add_kernel[grid](x, y, out, n)           ->  unchanged; warning: a Triton kernel launch
        grid = (triton.cdiv(n, BLOCK),)          ->  unchanged; info: triton-ascend has it, check the grid

    Fix safety:
        Report-only: nothing is rewritten.
    """

    ID = "unsupported-cuda-libs"
    SAFETY = "report-only"
    TRIGGERS = ("triton", "cupy", "pycuda", "numba", "pynvml", "bitsandbytes", "xformers", "liger_kernel",
                "flash_attn", "apex", "amp_C", "mamba_ssm", "causal_conv1d", "transformer_engine", "tensorrt",
                "cpp_extension", "pynccl", "nccl_engine", "nvtx", "cutlass", "bindings", "quack", "unsloth",
                "deep_gemm", "deep_ep", "sgl_kernel", "flashinfer", "flash_mla", "megablocks", "grouped_gemm")
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
                or any(facts.may_name(name) for name in builds.callables)
                # A dynamic import is reported for a string literal that names a library.
                or (any(facts.may_name(name) for name in _DYNAMIC_IMPORTS)
                    and facts.any_string(lambda s: match_library(target, s) is not None)))

    def __init__(self, ctx):
        super().__init__(ctx)
        self._guarded: set[int] = set()  # ids of imports whose ImportError is handled
        self._decorated: set[int] = set()  # ids of calls already reported as a decorator
        self._judged: set[int] = set()  # ids of expressions a finding covers (call funcs, inner attributes)
        self._optional: set[str] = set()  # local names bound by an import whose ImportError is handled
        self._elsewhere: set[str] = set()  # local names also imported from a module with no row
        self._kernels: set[str] = set()  # functions decorated with a Triton decorator in this file
        self._launches: list[tuple[cst.Call, str]] = []  # `name[grid](...)` calls, judged at the end
        self._extensions: dict[str, str] = {}  # `_ext = load(...)` targets (dotted) -> the builder called
        self._kernel_depth = 0  # inside a Triton kernel body: its tl.* calls are the kernel, reported once
        self._decorator_depth = 0  # inside a decorator: host code even on a kernel (`autotune(configs=...)`)
        self._imports_triton = False
        self._imports: list[tuple[cst.CSTNode, LibraryRow, str, bool, str]] = []  # reported at the end
        self._uses: list[tuple[cst.CSTNode, str, str, str, bool, Severity]] = []  # likewise, with the row's severity
        self._ported: set[str] = set()  # local names another rule ports (vllm-pyhccl): not reported

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
            row = import_row(self.ctx.target, name) if name else None
            self._bind(alias, name or "", row, node)
            if row is not None:
                self._report_import(alias, node, row, f"import {name}")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None:
            self._judged.add(id(node.module))  # `from bnb.nn import X` names its module, no use of `bnb`
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module)
        if module is None:
            return
        if isinstance(node.names, cst.ImportStar):
            row = import_row(self.ctx.target, module)
            if row is not None:
                self._report_import(node, node, row, f"from {module} import *")
            return
        # One finding per library row and statement, at the first name that needs it.
        seen: dict[LibraryRow, list[str]] = {}
        first: dict[LibraryRow, cst.ImportAlias] = {}
        ported = portable_statement(self.ctx.target, module, [dotted_name(a.name) or "" for a in node.names],
                                    self.ctx.text)
        for alias in node.names:
            name = dotted_name(alias.name)
            row = import_row(self.ctx.target, f"{module}.{name}") if name else None
            if row is not None and ported:
                self._ported.add(self._local_of(alias))  # vllm-pyhccl ports it: neither it nor its uses are left
                continue
            self._bind(alias, f"{module}.{name}", row, node, from_import=True)
            if row is not None:
                seen.setdefault(row, []).append(cast(str, name))  # a row is found for a name only
                first.setdefault(row, alias)
        for row, names in seen.items():
            self._report_import(first[row], node, row, f"from {module} import {', '.join(names)}")

    # The names in an import statement are the import, not a use (one walk runs every rule, so a
    # visit_ImportAlias returning False would not stop it: the names are marked judged instead).
    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        self._judged.add(id(node.name))
        if node.asname is not None:
            self._judged.add(id(node.asname.name))

    def _bind(self, alias: cst.ImportAlias, name: str, row: Optional[LibraryRow], stmt: cst.CSTNode,
              from_import: bool = False) -> None:
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        else:
            local = name.rsplit(".", 1)[-1] if from_import else name.split(".", 1)[0]
        if name.split(".", 1)[0] == "triton":
            self._imports_triton = True
        if row is None:
            self._elsewhere.add(local)
        elif id(stmt) in self._guarded:
            self._optional.add(local)

    def _report_import(self, at: cst.CSTNode, stmt: cst.CSTNode, row: LibraryRow, text: str) -> None:
        # Judged at the end: whether the name is also imported from a non-CUDA module (the NPU
        # alternative of a dispatch) may only show further down the file.
        local = self._local_of(at)
        self._imports.append((at, row, text, id(stmt) in self._guarded or self.ctx.guard_of(stmt) is not None, local))

    @staticmethod
    def _local_of(at: cst.CSTNode) -> str:
        if isinstance(at, cst.ImportAlias):
            if at.asname is not None and isinstance(at.asname.name, cst.Name):
                return at.asname.name.value
            name = dotted_name(at.name) or ""
            return name.rsplit(".", 1)[-1]
        return ""

    def _emit_imports(self) -> None:
        for at, row, text, optional, local in self._imports:
            message, severity = import_finding(row, text, local, optional, self._elsewhere)
            self.report(at, message, severity=severity, hint=row.hint)

    # -- uses ----------------------------------------------------------------------------------
    def _report_use(self, node: cst.CSTNode, message: str, hint: str, severity: Severity = "warning") -> None:
        """A use site: info where the code already has another path (optional import, NPU guard, or the
        name also imported from a non-CUDA module). Judged at the end, when every import is known."""
        target = node.func if isinstance(node, cst.Call) else node
        root = leftmost_name(target) if isinstance(target, cst.BaseExpression) else None
        local = root.value if root is not None else ""
        guarded = local in self._optional or self.ctx.guard_of(node) is not None
        self._uses.append((node, message, hint, local, guarded, severity))

    def _emit_uses(self) -> None:
        for node, message, hint, local, guarded, severity in self._uses:
            found = use_finding(message, local, guarded, severity, self._ported, self._elsewhere)
            if found is not None:
                self.report(node, found[0], severity=found[1], hint=hint)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._judged.add(id(node.name))
        if any(self._triton_decorator(d) for d in node.decorators):
            self._kernels.add(node.name.value)
            self._kernel_depth += 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if any(self._triton_decorator(d) for d in original.decorators):
            self._kernel_depth -= 1
        return updated

    def _triton_decorator(self, node: cst.Decorator) -> bool:
        expr = node.decorator
        name = self.ctx.resolve(expr.func if isinstance(expr, cst.Call) else expr)
        return name is not None and name.split(".", 1)[0] == "triton"

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator:
        self._decorator_depth -= 1
        return updated

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self._decorator_depth += 1
        expr = node.decorator
        target = expr.func if isinstance(expr, cst.Call) else expr
        self._judged.add(id(target))
        name = self.ctx.resolve(target)
        row = match_library(self.ctx.target, name) if name else None
        if row is not None and row.uses:
            self._decorated.add(id(expr))
            self._report_use(node, f"{row.what}: `@{name}` does not work on Ascend NPU", row.hint, row.severity)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._judged.add(id(node.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._judged.add(id(node.target))

    def visit_Assign(self, node: cst.Assign) -> None:
        # What is assigned to is no use (`xops = None` after a failed import).
        self._judged.update(id(t.target) for t in node.targets)
        # `_ext = load(name=..., sources=[... ".cu"])`: every later `_ext.fn(...)` runs CUDA code.
        value = node.value
        if not isinstance(value, cst.Call):
            return
        name = self.ctx.resolve(value.func)
        builds = cuda_builds(self.ctx.target)
        if name in builds.extension_loaders and self._builds_cuda(value, builds):
            for target in node.targets:
                dotted = dotted_name(target.target)
                if dotted is not None:
                    self._extensions[dotted] = name

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._judged.add(id(node.attr))  # `obj.cupy` is an attribute of obj, never the library
        if id(node) in self._judged or self.ctx.is_patched(node):
            self._judged.add(id(node.value))
            return
        self._judged.add(id(node.value))
        self._reference(node)

    # Names that bind or label rather than use: a def's or class's name, parameters, keywords, the
    # names a `global` / `nonlocal` declares, `except ... as NAME`, a match pattern's captures.
    def visit_Global(self, node: cst.Global) -> None:
        self._judged.update(id(item.name) for item in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self._judged.update(id(item.name) for item in node.names)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._judged.add(id(node.name.name))

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self._judged.add(id(node.name))

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self._judged.add(id(node.name))

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:
            self._judged.add(id(node.rest))

    def visit_MatchKeywordElement(self, node: cst.MatchKeywordElement) -> None:
        self._judged.add(id(node.key))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._judged.add(id(node.name))

    def visit_Param(self, node: cst.Param) -> None:
        self._judged.add(id(node.name))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._judged.add(id(node.keyword))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._judged:
            self._reference(node)

    def _reference(self, node: cst.BaseExpression) -> None:
        """A name of a library used as a value (`isinstance(m, bnb.nn.Linear8bitLt)`, `fn = flash_attn_func`)."""
        if self._kernel_depth or self.ctx.is_patched(node):
            return
        name = self.ctx.resolve(node)
        row = match_library(self.ctx.target, name) if name else None
        if row is not None and row.uses:
            self._report_use(node, _use_message(row, cast(str, name), call=False), row.hint, row.severity)

    def visit_Call(self, node: cst.Call) -> None:
        self._judged.add(id(node.func))
        if id(node) in self._decorated:
            return
        if isinstance(node.func, cst.Subscript):
            self._launch(node)
            return
        extension = self._extension_call(node)
        if extension is not None:
            builds = cuda_builds(self.ctx.target)
            self._report_use(node, f"{builds.what}: `{dotted_name(node.func)}(...)` calls into the CUDA "
                                   f"extension built by `{extension}(...)`", builds.hint)
            return
        name = self.ctx.resolve(node.func)
        if name is None and isinstance(node.func, cst.Name) and node.func.value == "__import__":
            name = "__import__"  # a builtin: no import binds it
        if name is None:
            return
        row = match_library(self.ctx.target, name)
        if row is not None and row.uses:
            # A kernel's decorators run on the host: the `triton.Config`s an autotune list holds are host API.
            if not self._kernel_depth or (self._decorator_depth and row.severity == "info"):
                self._report_use(node, _use_message(row, name, call=True), row.hint, row.severity)
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

    def _extension_call(self, node: cst.Call) -> Optional[str]:
        func = node.func
        if isinstance(func, cst.Attribute):
            owner = dotted_name(func.value)
            if owner is not None and owner in self._extensions:
                return self._extensions[owner]
        return None

    def _launch(self, node: cst.Call) -> None:
        """`kernel[grid](...)`: a Triton launch when `kernel` is a Triton kernel (decided at the end)."""
        subscript = node.func
        assert isinstance(subscript, cst.Subscript)
        name = dotted_name(subscript.value)
        if name is not None:
            self._judged.add(id(subscript.value))
            self._launches.append((node, name))

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        self._judge_launches()
        self._emit_imports()
        self._emit_uses()
        return updated

    def _judge_launches(self) -> None:
        if not self._launches:
            return
        row = match_library(self.ctx.target, "triton.jit")
        triton_file = self._imports_triton or bool(self._kernels)
        for node, name in self._launches:
            if is_launched_kernel(name, self._kernels, triton_file):
                self._report_use(node, launch_message(name), row.hint if row is not None else "")

    @staticmethod
    def _builds_cuda(node: cst.Call, builds: CudaBuilds) -> bool:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in builds.keywords:
                if not (isinstance(arg.value, cst.Name) and arg.value.value in ("None", "False")):
                    return True
        return any(s.endswith(builds.suffixes) for arg in node.args for s in _strings_in(arg.value))

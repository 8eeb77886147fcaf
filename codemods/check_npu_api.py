"""`unknown-npu-api`: torch.npu / torch_npu names that the real torch_npu does not have."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Iterable
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.source_facts import dotted
from npu_port.transpiler.core.report import Severity
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables import api_facts
from npu_port.transpiler.tables.api_facts import missing_npu_name

_ROOTS = ("torch.npu", "torch_npu")
# Attributes every module object has: no snapshot lists them, none is ever missing.
_MODULE_DUNDERS = {"__file__", "__name__", "__path__", "__spec__", "__doc__", "__loader__", "__package__",
                   "__dict__", "__all__", "__cached__", "__builtins__"}
# Calls that load a native library or extension module into the process: an op library built outside
# torch_npu (a CANN custom op, vllm-ascend's csrc) registers its ops in the `npu` namespace, where
# torch_npu's own top level does not list them.
_OP_LIBRARY_LOADERS = {"torch.ops.load_library", "importlib.util.spec_from_file_location",
                       "torch.utils.cpp_extension.load", "torch_npu.utils.cpp_extension.load", "ctypes.CDLL"}


def _is_npu_name(qualified: str) -> bool:
    return any(qualified == r or qualified.startswith(r + ".") for r in _ROOTS)


def judged_missing(qualified: Optional[str]) -> Optional[tuple[str, str]]:
    """(module, name) where the rule reports `qualified` (a name its imports resolve to: a torch.npu /
    torch_npu name the snapshot lacks), else None."""
    if qualified is None or not _is_npu_name(qualified):
        return None
    missing = missing_npu_name(qualified)
    return None if missing is None or missing[1] in _MODULE_DUNDERS else missing


def missing_message(module: str, name: str, qualified: str) -> tuple[str, str]:
    """(message, hint) of the error for `module.name`, which torch_npu lacks."""
    known = api_facts.load("torch_npu").names(module)
    if not name.startswith("_"):  # the private names exist, but are no suggestion for a public one
        known = [k for k in known if not k.startswith("_")]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(f'`{module}.{c}`' for c in close)}?" if close else \
        f"see `npu-port explain {UnknownNpuApi.ID}`; torch_npu 2.14 has no such name"
    shown = "torch.npu" if module == "torch_npu.npu" and qualified.startswith("torch.npu") else module
    return f"`{shown}.{name}` does not exist in torch_npu 2.14", hint


def missing_op_message(name: str, loader: Optional[str]) -> tuple[str, str, Severity]:
    """(message, hint, severity) for `torch_npu.<name>`, which torch_npu lacks, in a file that loads a
    native op library with `loader` (None: none)."""
    if loader is None:
        return (*missing_message("torch_npu", name, f"torch_npu.{name}"), "error")
    return (f"`torch_npu.{name}` is not in torch_npu 2.14; taken to be an op of the library this file loads "
            f"with `{loader}(...)`", "check that the custom op library is built for this CANN version", "info")


def _may_name_a_missing_api(imports: Iterable[ast.stmt],
                            chains: Callable[[frozenset[str]], Optional[Iterable[str]]]) -> bool:
    """Whether the rule could report in a file with these import statements and whose outermost name
    chains (`a.b.c`) starting with given dotted prefixes `chains` lists: the names it judges, resolved
    through every import of the file as if all were in one scope (a local name bound by two imports is
    judged both ways), so the answer is yes wherever the rule's scoped resolution reports. `chains` giving
    None (it cannot tell) makes the answer yes."""
    bound: dict[str, set[str]] = {}
    modules = []
    for node in imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if judged_missing(alias.name):
                    return True
                local, target = (alias.asname, alias.name) if alias.asname else ((top := alias.name.split(".")[0]), top)
                bound.setdefault(local, set()).add(target)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module is not None:
            modules.append(node.module)
            if any(alias.name == "*" for alias in node.names):
                continue
            if judged_missing(node.module):
                return True
            for alias in node.names:
                bound.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")
                if (node.module == "torch" or _is_npu_name(node.module)) and judged_missing(f"{node.module}.{alias.name}"):
                    return True
    # Only a chain from a name bound to an NPU module, or from `torch` then `npu`, leads to an NPU name.
    prefixes = frozenset(h if _is_npu_name(t) else f"{h}.npu" for h, targets in bound.items() for t in targets
                         if t == "torch" or _is_npu_name(t))
    names = chains(prefixes) if prefixes else ()
    if names is None:
        return True
    for name in (*names, *modules):
        head, _, rest = name.partition(".")
        targets = bound.get(head)
        if targets and any(judged_missing(f"{target}.{rest}" if rest else target) for target in targets):
            return True
    return False


def _outermost_chains(nodes: tuple[ast.AST, ...], prefixes: frozenset[str]) -> list[str]:
    """The names of the `ast`'s outermost Name/Attribute chains (`a.b.c`, not also `a.b`) that start
    with one of the dotted `prefixes` (whole names)."""
    inner = {id(node.value) for node in nodes if isinstance(node, ast.Attribute)}
    return [name for node in nodes if isinstance(node, ast.Attribute) and id(node) not in inner
            for name in [dotted(node)] if name and any(name == p or name.startswith(p + ".") for p in prefixes)]


class UnknownNpuApi(PythonRule):
    """Reports `torch.npu` / `torch_npu` names that do not exist in the real torch_npu.

    What it does:
        Follows every `torch.npu.X`, `torch_npu.X` and `torch_npu.npu.X` use, through imports and
        aliases, and every `from torch.npu import X` / `import torch_npu.X`, and checks X against
        the torch-npu 2.14 API snapshot (codemods/data/api/torch_npu.json). A name that is not there
        is an error, with the closest real names as a hint. The snapshot holds every name an attribute
        read finds, private ones and what torch_npu sets on itself at import included (`torch_npu._C`,
        the ops of `torch.ops.npu`, the DType symbols such as `torch_npu.float8_e8m0fnu`). A top-level
        `torch_npu.<op>` that is not there, in a file that loads a native library itself
        (`torch.ops.load_library`, `importlib.util.spec_from_file_location`, `cpp_extension.load`), is
        an info: custom op libraries register their ops in the same `npu` namespace.

    Why:
        A typo (`torch.npu.synchronise`) or a hand port that renamed a CUDA-only API
        (`torch.npu.nvtx.range_push`, `torch.npu.get_arch_list`) fails only when that line runs on
        the NPU host, often hours into a job.

    Example:
            torch.npu.nvtx.range_push("fwd")      # error: torch.npu has no nvtx
        should read:
            torch.npu.mstx.range_push("fwd")

    Fix safety:
        Report-only: the right replacement depends on what the code meant; the hint lists the
        nearest real names.
    """

    ID = "unknown-npu-api"
    SAFETY = "report-only"
    GROUP = "check"
    # Every name it judges is spelled `torch_npu`, or has `npu` as an identifier of its own (torch.npu,
    # `from torch import npu`, an alias of either). In code an identifier never touches a quote, so the
    # NPU named as a string ("npu", a port's device values) does not let a file through.
    TRIGGERS = ("torch_npu",)
    TRIGGER_PATTERNS = (r"""npu(?<![A-Za-z0-9_"']npu)(?![A-Za-z0-9_"'])""",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Every name it judges resolves through an import to torch.npu... or torch_npu...: the code spells
        # `torch_npu`, or both `torch` and `npu` (a `npu` in a comment or a log message is not enough).
        if not (facts.has_word("torch_npu") or facts.has_all_words("torch", "npu")):
            return False
        # Then the judgement itself: on a tree that names the NPU throughout (a port), most files name
        # nothing torch_npu lacks, and a parse would be for nothing. On the code's import statements and
        # name chains as the lexer finds them (a superset of the ast's), which settles nearly every file
        # without an ast (a yes there is nearly always a finding: the file's parse follows anyway); the
        # ast's where the lexer cannot vouch for them.
        imports = facts.code_imports
        if imports is not None:
            return _may_name_a_missing_api(imports, facts.dotted_chains)
        nodes = facts.nodes
        return nodes is None or _may_name_a_missing_api(nodes, lambda prefixes: _outermost_chains(nodes, prefixes))

    def __init__(self, ctx):
        super().__init__(ctx)
        self._inner: set[int] = set()  # attribute chains already judged through their outermost node
        self._missing_ops: list[tuple[cst.CSTNode, str]] = []  # torch_npu.<op> names, judged at the end
        self._loads_op_library: Optional[str] = None  # the loader call this file makes, if any

    def _judge(self, node: cst.CSTNode, qualified: Optional[str]) -> None:
        missing = judged_missing(qualified)
        if missing is None:
            return
        module, name = missing
        if module == "torch_npu":
            # An op a library loaded by this very file may register: decided once the file is read.
            self._missing_ops.append((node, name))
            return
        message, hint = missing_message(module, name, qualified or "")
        self.report(node, message, severity="error", hint=hint)

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve(node.func)
        if name in _OP_LIBRARY_LOADERS and self._loads_op_library is None:
            self._loads_op_library = name

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        for node, name in self._missing_ops:
            message, hint, severity = missing_op_message(name, self._loads_op_library)
            self.report(node, message, severity=severity, hint=hint)
        return updated

    def visit_Attribute(self, node: cst.Attribute) -> None:
        inner = id(node) in self._inner
        self._inner.add(id(node.value))
        if not inner:
            self._judge(node, self.ctx.resolve(node))

    # The names of an import statement are judged as the statement's (below), once each: the walk goes on
    # into them, so their Attribute chains are marked judged here.
    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None:
            self._inner.add(id(node.module))
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        if module is None:
            return
        # the module itself (`from torch_npu.nope import x`), else each imported name
        if judged_missing(module) is not None:
            self._judge(node.module, module)
        elif module == "torch" or _is_npu_name(module):
            for alias in node.names:
                name = dotted_name(alias.name)
                if name is not None:
                    self._judge(alias, f"{module}.{name}")

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._judge(alias, dotted_name(alias.name))

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        self._inner.add(id(node.name))

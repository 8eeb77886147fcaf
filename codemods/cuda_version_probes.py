"""`cuda-version-probes`: code that asks which CUDA it runs on, whose answer changes on an Ascend NPU."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Optional

import libcst as cst

from npu_port.transpiler.core.rules import CUDA_WORD, PythonRule
from npu_port.transpiler.tables.mapping import load_table

_RUNNERS = {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
            "subprocess.Popen", "subprocess.getoutput", "subprocess.getstatusoutput", "os.system", "os.popen"}
_ENV_READERS = {"os.getenv", "os.environ.get"}
_OUTPUT_CALLS = {"print", "debug", "info", "warning", "warn", "error", "exception", "critical", "log",
                 "info_rank0", "warning_rank0", "write"}


@dataclass(frozen=True)
class Probes:
    reads: dict[str, tuple[str, str]]  # qualified name -> (what, hint)
    calls: dict[str, tuple[str, str]]
    capability_calls: frozenset[str]
    property_calls: frozenset[str]
    fields: frozenset[str]
    capability: tuple[str, str]
    env: frozenset[str]
    env_text: tuple[str, str]
    programs: frozenset[str]
    program_hint: str


@cache
def probes(target: str) -> Probes:
    raw = load_table(target, "cuda_probes")
    cap = raw["capability"]
    return Probes(
        {r["name"]: (r["what"], r["hint"]) for r in raw["reads"]},
        {r["name"]: (r["what"], r["hint"]) for r in raw["calls"]},
        frozenset(cap["calls"]), frozenset(cap["properties"]), frozenset(cap["fields"]),
        (cap["what"], cap["hint"]),
        frozenset(raw["toolkit_env"]), (raw["toolkit_env_what"], raw["toolkit_env_hint"]),
        frozenset(raw["toolkit_programs"]), raw["toolkit_program_hint"],
    )


def _string(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _first_word(text: str) -> str:
    words = text.split()
    return words[0] if words else ""


def _is_number(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.Tuple):
        return bool(node.elements) and all(_is_number(e.value) for e in node.elements)
    return False


class CudaVersionProbes(PythonRule):
    """Reports probes of the CUDA stack whose answer is different (or None) on an Ascend NPU.

    What it does:
        Reports, one finding per site: reads of `torch.version.cuda` and
        `torch.utils.cpp_extension.CUDA_HOME`; calls of `torch.backends.cudnn.version()`; the compute
        capability compared with SM numbers (`torch.cuda.get_device_capability() >= (8, 0)`,
        `...capability()[0] >= 8`, `major >= 9` after `major, minor = ...capability()`,
        `get_device_properties(0).major >= 8`, also through `torch.npu`); reads of the CUDA toolkit's
        environment variables (`os.environ["CUDA_HOME"]`, `os.getenv("CUDA_PATH")`); and CUDA toolkit
        programs run from Python (`subprocess.run(["nvcc", "--version"])`). The table is
        codemods/data/<target>/cuda_probes.yaml.

    Why:
        On an Ascend host torch is a CPU build, so `torch.version.cuda` and `cudnn.version()` are None,
        `torch.npu.get_device_capability()` returns None unless `TORCH_NPU_DEVICE_CAPABILITY` is set,
        and there is no CUDA toolkit: a test on any of these silently takes the CPU or fallback path,
        or fails far from the probe. Converting `torch.cuda` to `torch.npu` does not fix the question
        the code asks.

    Example:
        if torch.cuda.get_device_capability()[0] >= 8:   ->  unchanged; warning: SM numbers
        cuda = torch.version.cuda                        ->  unchanged; warning: None on Ascend NPU

    Fix safety:
        Report-only: what to test instead (the device, the feature) depends on what the code wants.
    """

    ID = "cuda-version-probes"
    SAFETY = "report-only"
    # A part of each probe the table names (the code spells every part of a name the imports resolve to:
    # `cuda` of torch.version.cuda, `cudnn` of cudnn.version), each variable, and each program followed
    # by no word character (`ncu` is in `concurrent`). tests/test_pytorch_rules.py holds them to the table.
    TRIGGERS = ("cudnn", "get_device_capability", "get_device_properties", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT",
                "CUDA_TOOLKIT_ROOT_DIR", "nvcc", "cuobjdump", "nvdisasm")
    TRIGGER_PATTERNS = (CUDA_WORD, r"ncu(?![A-Za-z0-9_])", r"nsys(?![A-Za-z0-9_])")

    @classmethod
    def scout(cls, facts, options) -> bool:
        table = probes(options.target)
        names = (*table.reads, *table.calls, *table.capability_calls)
        # Device properties count only through a capability field they are read for (`.major`): vLLM
        # plugins call torch.npu.get_device_properties for core counts. A toolkit variable counts where
        # the environment is read, a program where a runner runs it (verl compares `tool == "nsys"` in
        # many files and runs nothing); the first word is split as _runs splits it, at any whitespace.
        return (any(facts.may_name(n) for n in names)
                or (facts.has_word(*table.fields) and any(facts.may_name(n) for n in table.property_calls))
                or ((facts.may_name("os.environ") or facts.may_name("os.getenv"))
                    and facts.any_string(lambda s: s in table.env))
                or (any(facts.may_name(r) for r in _RUNNERS)
                    and facts.any_string(lambda s: _first_word(s).rsplit("/", 1)[-1] in table.programs)))

    def __init__(self, ctx):
        super().__init__(ctx)
        self._table = probes(ctx.target)
        self._capability_names: set[str] = set()  # names assigned a capability (or its parts)
        self._property_names: set[str] = set()  # names assigned get_device_properties(...)
        self._judged: set[int] = set()  # nodes that name or set rather than read (imports, targets)
        self._shown = 0  # inside an f-string or a print / logging call

    # -- reads and calls ------------------------------------------------------------------------
    # What an import names or an assignment sets is no read.
    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        self._judged.add(id(node.name))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._judged.add(id(node.attr))
        self._read(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._read(node)

    # A value only printed or formatted (`print(f"CUDA {torch.version.cuda}")`) decides nothing: None
    # prints as well as a version does.
    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._shown += 1

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString):
        self._shown -= 1
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self._is_output(original):
            self._shown -= 1
        return updated

    @staticmethod
    def _is_output(node: cst.Call) -> bool:
        func = node.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        return name in _OUTPUT_CALLS

    def _read(self, node: cst.BaseExpression) -> None:
        if id(node) in self._judged or self.ctx.is_patched(node) or self._shown:
            return
        name = self.ctx.resolve(node)
        if name in self._table.reads:
            what, hint = self._table.reads[name]
            self.report(node, what, hint=hint)

    def visit_Call(self, node: cst.Call) -> None:
        if self._is_output(node):
            self._shown += 1
        name = self.ctx.resolve(node.func)
        if name in self._table.calls and not self._shown:
            what, hint = self._table.calls[name]
            self.report(node, what, hint=hint)
        elif name in _ENV_READERS and node.args:
            self._env(node, _string(node.args[0].value))
        elif name in _RUNNERS and node.args:
            self._runs(node, node.args[0].value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if id(node) in self._judged:
            return
        if self.ctx.resolve(node.value) == "os.environ" and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index):
            self._env(node, _string(node.slice[0].slice.value))

    def _env(self, node: cst.CSTNode, variable: Optional[str]) -> None:
        if variable in self._table.env:
            what, hint = self._table.env_text
            self.report(node, f"${variable}: {what}", hint=hint)

    def _runs(self, node: cst.Call, command: cst.BaseExpression) -> None:
        first: Optional[str] = None
        if isinstance(command, (cst.List, cst.Tuple)) and command.elements:
            first = _string(command.elements[0].value)
        else:
            text = _string(command)
            first = text.split()[0] if text and text.split() else None
        program = first.rsplit("/", 1)[-1] if first else None
        if program in self._table.programs:
            self.report(node, f"runs `{program}`, a CUDA toolkit program an Ascend host does not have",
                        hint=self._table.program_hint)

    # -- the compute capability compared with SM numbers -------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        self._judged.update(id(t.target) for t in node.targets)
        value = node.value
        if not isinstance(value, cst.Call):
            return
        name = self.ctx.resolve(value.func)
        if name in self._table.capability_calls:
            names = self._capability_names
        elif name in self._table.property_calls:
            names = self._property_names
        else:
            return
        for target in node.targets:
            t = target.target
            elements = t.elements if isinstance(t, (cst.Tuple, cst.List)) else [t]
            for e in elements:
                inner = e.value if isinstance(e, cst.BaseElement) else e
                if isinstance(inner, cst.Name):
                    names.add(inner.value)

    def _is_capability(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Call):
            return self.ctx.resolve(node.func) in self._table.capability_calls
        if isinstance(node, cst.Name):
            return node.value in self._capability_names
        if isinstance(node, cst.Tuple):  # `(major, minor) >= (9, 0)`
            return bool(node.elements) and all(self._is_capability(e.value) for e in node.elements)
        if isinstance(node, cst.Subscript):
            return self._is_capability(node.value)
        if isinstance(node, cst.Attribute) and node.attr.value in self._table.fields:
            owner = node.value
            if isinstance(owner, cst.Call):
                return self.ctx.resolve(owner.func) in self._table.property_calls
            return isinstance(owner, cst.Name) and owner.value in self._property_names
        return False

    def visit_Comparison(self, node: cst.Comparison) -> None:
        sides = [node.left, *(c.comparator for c in node.comparisons)]
        if any(self._is_capability(s) for s in sides) and any(_is_number(s) for s in sides):
            what, hint = self._table.capability
            self.report(node, f"{what}; an Ascend NPU has no SM number", hint=hint)

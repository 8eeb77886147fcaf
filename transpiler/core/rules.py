"""What every rule is made of, and the per-file context the rules read and report into.

A rule is one class in one module of this package with a stable `ID`. Its docstring is its user
documentation (`npu-port explain`, docs/rules.md), written in the sections
What it does / Why / Example / Fix safety.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Optional, get_args

import libcst as cst

from npu_port.transpiler.analysis.imports import ImportTable
from npu_port.transpiler.analysis.locations import NodeLocations
from npu_port.transpiler.core.report import Finding, FindingKind, Severity

if TYPE_CHECKING:
    from npu_port.transpiler.analysis.source_facts import SourceFacts

# The words a rule is described with; the registry refuses a rule that uses another.
RuleLanguage = Literal["python", "shell", "yaml", "cuda", "manifest"]  # the files a rule reads
Safety = Literal["safe", "review", "report-only"]  # how far its change can be trusted unreviewed
# default: convert runs it; extras: only with --extras or --select; check: `check` runs it; policy: `check`
# runs it when its setting is on.
Group = Literal["default", "extras", "check", "policy"]
RULE_LANGUAGES: tuple[RuleLanguage, ...] = get_args(RuleLanguage)
SAFETY_LEVELS: tuple[Safety, ...] = get_args(Safety)
GROUPS: tuple[Group, ...] = get_args(Group)

# `cuda` as a token of its own (torch.cuda, "cuda:0", .cuda(), --device cuda), not part of an identifier
# such as `is_cuda_available` or `cuda_graph`, which no rule acts on.
CUDA_WORD = r"cuda(?<![A-Za-z0-9_]cuda)(?![A-Za-z0-9_])"

_IGNORE_RE = re.compile(r"(?:#|//)\s*npu-port:\s*ignore(?:\[([A-Za-z0-9_,\s-]+)\])?")  # // in CUDA C++


def ignore_comments(text: str) -> dict[int, Optional[frozenset[str]]]:
    """Line number -> the rule ids a `# npu-port: ignore[...]` comment silences there (None: all rules)."""
    if "npu-port" not in text:
        return {}
    out: dict[int, Optional[frozenset[str]]] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _IGNORE_RE.search(line)
        if m:
            ids = m.group(1)
            out[lineno] = frozenset(s.strip() for s in ids.split(",") if s.strip()) if ids else None
    return out


def silenced(ignores: dict[int, Optional[frozenset[str]]], first: int, last: int, rule: str) -> bool:
    for line in range(first, last + 1):
        if line in ignores:
            ids = ignores[line]
            if ids is None or rule in ids:
                return True
    return False


# "npu" as a word of its own (torch.npu, is_npu_available, device == "npu", NPU), not inside `inputs`.
_NPU_WORD = re.compile(r"(?<![a-z])npu(?![a-z])", re.I)


def _mentions_npu(node: cst.CSTNode) -> bool:
    return _NPU_WORD.search(cst.Module(body=[]).code_for_node(node)) is not None


def _chain_tests(node: cst.If):
    while isinstance(node, cst.If):
        yield node.test
        node = node.orelse


def _names_npu_value(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleString) and _NPU_WORD.search(node.value) is not None


def is_npu_guard(node: cst.CSTNode) -> bool:
    """The root of code that already handles both devices, whose CUDA side stays as written:
    - an if/elif chain whose tests mention the NPU;
    - a conditional expression that mentions it in its test or either arm (`"nccl" if ... else "hccl"`
      must not become `"hccl" if ... else "hccl"`);
    - a list, tuple or set that names the NPU beside CUDA (`device=["cuda", "npu"]`, a registration
      for both devices, must not become `["npu", "npu"]`)."""
    if isinstance(node, cst.If):
        return any(_mentions_npu(t) for t in _chain_tests(node))
    if isinstance(node, cst.IfExp):
        return _mentions_npu(node)
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return any(_names_npu_value(e.value) for e in node.elements)
    return False


def sibling_guards(body: Sequence[cst.CSTNode]) -> list[cst.If]:
    """`if` statements of one block that dispatch on the device beside one that handles the NPU:
    `if name == "cuda": opts["num_gpus"] = n` followed by `if name == "npu": opts["resources"] = ...`.
    Rewriting the first would make both run on the NPU."""
    ifs = [s for s in body if isinstance(s, cst.If)]
    if len(ifs) < 2 or not any(is_npu_guard(i) for i in ifs):
        return []
    return [i for i in ifs if not is_npu_guard(i) and any(_CUDA_TEST.search(_code(t)) for t in _chain_tests(i))]


# A test that picks the CUDA side: a comparison with the device name, or a CUDA availability check.
_CUDA_TEST = re.compile(r"""(?:==|!=|\bin\b)\s*["']cuda["']|["']cuda["']\s*(?:==|!=)|is_(?:torch_)?cuda_available|"""
                        r"""torch\.cuda\.is_available|\bis_nvidia\b|\bis_cuda\b""")


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


class Rule:
    """Base of all rules. Subclasses set the class attributes below."""

    ID: ClassVar[str]
    LANGUAGE: ClassVar[RuleLanguage]
    SAFETY: ClassVar[Safety]
    GROUP: ClassVar[Group] = "default"
    # Substrings a file must contain for this rule to act on it; a file with none of the selected
    # rules' triggers is never parsed, so a missing trigger is a missed rewrite (tests enforce it).
    TRIGGERS: ClassVar[tuple[str, ...]]
    # Regular expressions (over the file's bytes) that also count as triggers, for tokens a substring
    # would over-match: `cuda` as a word, not inside `is_cuda_available`.
    TRIGGER_PATTERNS: ClassVar[tuple[str, ...]] = ()
    # True for a rule that also acts because another rule changed the file (torch-npu-import): its own
    # triggers cover only what it does on its own, the other rules' triggers cover the rest.
    FOLLOWS_CHANGES: ClassVar[bool] = False

    @classmethod
    def description(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        return cls.description().split("\n", 1)[0]

    @classmethod
    def matches(cls, text: str) -> bool:
        return any(t in text for t in cls.TRIGGERS) or any(re.search(p, text) for p in cls.TRIGGER_PATTERNS)

    @classmethod
    def scout(cls, facts: SourceFacts, options: RunOptions) -> bool:
        """Python rules: False only if this rule can neither change nor report anything in a file with
        these facts (its code words and string literals, transpiler/analysis/source_facts.py). The engine
        does not parse a file no selected rule's scout wants. Must over-approximate: the tests run each
        rule alone on every source its scout declines and require nothing to happen."""
        return True


@dataclass
class RunOptions:
    """Settings a rule may read; filled from the CLI and config by the engine (Settings.run_options)."""

    target: str = "ascend"
    runtime_env_profile: Optional[str] = None
    rules_files: tuple[str, ...] = ()  # the user's custom mapping rows (--rules, `rules = [...]`)
    forbid: tuple[str, ...] = ()  # the packages forbidden-import reports (--forbid, `forbid = [...]`)


class FileContext:
    """Shared per-file state: path, source, options and the findings list. Fresh for every file."""

    def __init__(self, path: str, text: str, options: RunOptions):
        self.path = path
        self.text = text
        self.options = options
        self.ignores = ignore_comments(text)
        self.findings: list[Finding] = []

    @property
    def target(self) -> str:
        return self.options.target

    def add(self, rule: str, line: int, col: int, message: str, *, severity: Severity = "info",
            kind: FindingKind = "finding", hint: str = "", fix: str = "") -> None:
        if silenced(self.ignores, line, line, rule):
            return
        self.findings.append(Finding(self.path, line, col, rule, severity, message, kind, hint, fix))


class PythonContext(FileContext):
    """Adds the parsed module, the import table and lazily computed positions."""

    def __init__(self, path: str, text: str, module: cst.Module, options: RunOptions):
        super().__init__(path, text, options)
        self.module = module
        self.imports = ImportTable()
        self._positions = None
        # Findings whose line is only known once positions are computed: (node, Finding-kwargs).
        self._pending: list[tuple[cst.CSTNode, dict]] = []
        # Ids of the nodes inside an NPU guard, filled by the engine's walk as it meets them (a rule asks
        # only about nodes already visited); only files that mention the NPU can have any.
        self.npu_aware = "npu" in text
        self.npu_guarded: set[int] = set()
        self.patched: set[int] = set()  # ids of nodes inside assignment, del and patch targets
        self.changed = False

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        return self.imports.resolve(node)

    def position(self, node: cst.CSTNode):
        # Computed once per file and only when a rule needs a line: most parsed files need it,
        # but never before the first change or finding.
        if self._positions is None:
            self._positions = NodeLocations(self.module)
        return self._positions.get(node)

    def is_patched(self, node: cst.CSTNode) -> bool:
        """True inside what the code assigns, deletes or patches (`torch.cuda.Event = torch.npu.Event`,
        `setattr(torch.cuda, ...)`, `mock.patch("torch.cuda.x")`): renaming it would patch torch.npu."""
        return id(node) in self.patched

    def in_npu_branch(self, node: cst.CSTNode) -> bool:
        """True inside an `if`/`elif` chain or conditional expression that already tests for the NPU
        (`if is_npu_available: ... else: torch.cuda...`): such device-agnostic code is left as it is."""
        return id(node) in self.npu_guarded

    def is_silenced(self, node: cst.CSTNode, rule: str) -> bool:
        if not self.ignores:
            return False
        pos = self.position(node)
        return pos is not None and silenced(self.ignores, pos.start.line, pos.end.line, rule)

    def note(self, node: cst.CSTNode, rule: str, message: str, *, severity: Severity = "info",
             kind: FindingKind = "finding", hint: str = "", fix: str = "") -> None:
        if kind == "change":
            self.changed = True
        self._pending.append((node, dict(rule=rule, severity=severity, message=message,
                                         kind=kind, hint=hint, fix=fix)))

    def resolve_pending(self) -> None:
        for node, kw in self._pending:
            pos = self.position(node)
            line, col = (pos.start.line, pos.start.column + 1) if pos else (1, 1)
            self.findings.append(Finding(self.path, line, col, **kw))
        self._pending.clear()


class PythonRule(Rule):
    """A LibCST rule. Define `visit_<Node>(node)` / `leave_<Node>(original, updated)` methods; the
    engine runs every selected rule in one traversal of one parse. `finalize` runs after it."""

    LANGUAGE = "python"

    def __init__(self, ctx: PythonContext):
        self.ctx = ctx

    # -- helpers for subclasses -------------------------------------------------------------
    def rewrite(self, original: cst.CSTNode, updated: cst.CSTNode, new: cst.CSTNode, message: str):
        """Return `new` and record the change, unless an ignore comment covers `original` or it sits in
        code that already handles the NPU."""
        if self.ctx.is_silenced(original, self.ID):
            return updated
        if self.ctx.is_patched(original):
            self.ctx.note(original, self.ID, "left as is: this name is assigned or patched here (a shim that "
                                             "points torch.cuda at NPU objects on purpose)", severity="info")
            return updated
        if self.ctx.in_npu_branch(original):
            self.ctx.note(original, self.ID, "left as is: this branch is the CUDA side of code that already "
                                             "handles the NPU", severity="info")
            return updated
        self.ctx.note(original, self.ID, message, kind="change")
        return new

    def report(self, node: cst.CSTNode, message: str, *, severity: Severity = "warning", hint: str = "",
               fix: str = "") -> None:
        if not self.ctx.is_silenced(node, self.ID):
            self.ctx.note(node, self.ID, message, severity=severity, hint=hint, fix=fix)

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        return updated


class TextRule(Rule):
    """A rule over a non-Python file (shell, YAML): `apply(text)` returns the new text and records
    each change with `self.ctx.add(..., kind="change")`."""

    def __init__(self, ctx: FileContext):
        self.ctx = ctx

    def apply(self, text: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError

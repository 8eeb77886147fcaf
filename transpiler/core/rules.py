"""What every rule is made of, and the per-file context the rules read and report into.

A rule is one class in one module of this package with a stable `ID`. Its docstring is its user
documentation (`npu-port explain`, docs/rules.md), written in the sections
What it does / Why / Example / Fix safety.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Optional, get_args

import libcst as cst

from npu_port.transpiler.analysis.dispatch import (
    DEVICE_COMPARISON,
    DISPATCH_PARAMETER,
    IMPORTED_DEVICE_VALUE,
    NEEDS_TORCH_NPU,
    NPU_BRANCH,
    RESOLVER_COMPARISON,
    FileDispatch,
    Guard,
    code,
    npu_framework_guard,
    nvidia_stack_guard,
)
from npu_port.transpiler.analysis.imports import ImportTable
from npu_port.transpiler.analysis.locations import StatementLocations
from npu_port.transpiler.analysis.project_devices import imported_npu_values
from npu_port.transpiler.core.report import Finding, FindingKind, Severity

if TYPE_CHECKING:
    import ast

    from npu_port.transpiler.analysis.source_facts import SourceFacts

# The words a rule is described with; the registry refuses a rule that uses another.
RuleLanguage = Literal["python", "shell", "yaml", "cuda", "manifest"]  # the files a rule reads
Safety = Literal["safe", "review", "report-only"]  # how far its change can be trusted unreviewed
# default: convert runs it; extras: only with --extras or --select; check: `check` runs it; policy: `check`
# runs it when its setting is on.
Group = Literal["default", "extras", "check", "policy"]
# A rule's device-agnostic form of a change (PythonRule.rewrite): called only when the change is made.
Portable = Callable[[], Optional[cst.CSTNode]]
KEPT_FOR_CUDA_HINT = "port this line by hand (a branch on the device), or convert without --keep-cuda"
RULE_LANGUAGES: tuple[RuleLanguage, ...] = get_args(RuleLanguage)
SAFETY_LEVELS: tuple[Safety, ...] = get_args(Safety)
GROUPS: tuple[Group, ...] = get_args(Group)

# `cuda` as a token of its own (torch.cuda, "cuda:0", .cuda(), --device cuda), not part of an identifier
# such as `is_cuda_available` or `cuda_graph`, which no rule acts on.
CUDA_WORD = r"cuda(?<![A-Za-z0-9_]cuda)(?![A-Za-z0-9_])"

TORCH_NPU_WORD = re.compile(r"\btorch_npu\b")
PATCHED_REASON = ("left as is: this name is assigned or patched here (a shim that points torch.cuda at "
                  "NPU objects on purpose)")
SAVED_REASON = ("left as is: the file also assigns this torch.cuda name; this reference saves the original to put "
                "it back, part of the same patch (ported alone, the restore would write torch.npu's function onto "
                "torch.cuda)")
SAVED_HINT = "if the NPU path needs the same workaround, save, patch and restore the torch.npu name the same way"
_IGNORE_RE = re.compile(r"(?:#|//)\s*npu-port:\s*ignore(?:\[([A-Za-z0-9_,\s-]+)\])?")  # // in CUDA C++


def kept_for_cuda(message: str) -> str:
    """The finding of a change that --keep-cuda leaves as written (PythonRule.keeps_cuda, SpanEditRule)."""
    return f"kept for CUDA (--keep-cuda): {message} has no device-agnostic form here"


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
    # False for a rule whose changes rely on nothing torch_npu registers (the npu device, torch.npu, hccl):
    # Ray's resource names, environment-variable names, an error's text. A file changed by such rules
    # alone gets no `import torch_npu` (a Ray driver that only names "NPU" resources needs no CANN).
    NEEDS_TORCH_NPU: ClassVar[bool] = True

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
    # Device-agnostic output (convert --keep-cuda): each rule writes the form that picks the accelerator at
    # run time (its `portable` output) and leaves, with a warning, what has none.
    keep_cuda: bool = False
    torch_version: Optional[str] = None  # the oldest torch that output must run on; None: the newest known
    runtime_env_profile: Optional[str] = None
    rules_files: tuple[str, ...] = ()  # the user's custom mapping rows (--rules, `rules = [...]`)
    forbid: tuple[str, ...] = ()  # the packages forbidden-import reports (--forbid, `forbid = [...]`)
    verl_version: Optional[str] = None  # the VERL release a project's config keys are checked against (check)
    # Nothing names that release (no flag, config value, pin or checkout: the newest snapshotted is assumed):
    # a key another release has is then not known to be wrong (a warning, not an error).
    verl_unpinned: bool = False


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

    def __init__(self, path: str, text: str, module: cst.Module, options: RunOptions,
                 tree: Optional[ast.Module] = None):
        """`tree`: the file's `ast`, where it was parsed already (the worker's parse_refusal)."""
        super().__init__(path, text, options)
        self.module = module
        self._tree = tree
        self.imports = ImportTable()
        self._positions: Optional[StatementLocations] = None
        # id(node) -> the statement it lies in (top-level, or in the body of such a class), and each
        # such statement's indentation, filled by the engine's walk: positions are generated for those
        # statements alone (analysis/locations.StatementLocations).
        self.statement_of: dict[int, cst.CSTNode] = {}
        self.statement_indents: dict[int, tuple[str, ...]] = {}
        # Findings whose line is only known once positions are computed: (node, Finding-kwargs).
        self._pending: list[tuple[cst.CSTNode, dict]] = []
        # Which device-dispatch shapes the text can hold (analysis/dispatch), and the nodes inside one,
        # with the reason they are left: filled by the engine's walk as it meets them (a rule asks only
        # about nodes already visited).
        self.dispatch = FileDispatch.of(path, text, imported_npu_values(path, text))
        self.npu_guarded: dict[int, Guard] = {}
        self._stack_noted = False
        self.patched: set[int] = set()  # ids of nodes inside assignment, del and patch targets
        self.saved_originals: set[int] = set()  # ids of references to a patched name's original (saved)
        self.changed = False
        # (module, name or None) the applied changes refer to: the engine adds the imports the file lacks.
        self.needed_imports: dict[tuple[str, Optional[str]], None] = {}
        # (module, name, asname) of imports the changes may have left unused: removed if nothing uses them.
        self.unused_imports: dict[tuple[str, Optional[str], Optional[str]], None] = {}
        # What the file's rules compute once and share (a helper's per-file state), keyed by its class;
        # it goes with the context.
        self.shared: dict[type, object] = {}
        self.torch_npu_free: frozenset[str] = frozenset()  # ids of the rules whose changes need no torch_npu
        # Runs a rule over another file of the project and gives back its state (core/python_source's
        # analyse_python); None inside such a run, so that one file's analysis reads no third file.
        self.analyse: Optional[Callable[[str, str, type, RunOptions], Optional[PythonRule]]] = None

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        return self.imports.resolve(node)

    def require_import(self, module: str, name: Optional[str] = None) -> None:
        """The change being made names `module` (`import module`) or `name` from it (`from module import
        name`); added after the walk unless the file has it."""
        self.needed_imports[(module, name)] = None

    def drop_if_unused(self, module: str, name: Optional[str] = None, asname: Optional[str] = None) -> None:
        """After the walk, remove this import if nothing in the file uses it any more."""
        self.unused_imports[(module, name, asname)] = None

    def position(self, node: cst.CSTNode):
        # Computed once per file and only when a rule needs a line: most parsed files need it,
        # but never before the first change or finding.
        if self._positions is None:
            self._positions = StatementLocations(self.module, self.text, self.statement_of, self.statement_indents,
                                                 self._tree)
        return self._positions.get(node)

    def is_patched(self, node: cst.CSTNode) -> bool:
        """True inside what the code assigns, deletes or patches (`torch.cuda.Event = torch.npu.Event`,
        `setattr(torch.cuda, ...)`, `mock.patch("torch.cuda.x")`): renaming it would patch torch.npu."""
        return id(node) in self.patched

    def guard_of(self, node: cst.CSTNode) -> Optional[Guard]:
        """Why `node` sits in code that picks a branch by device and is left as written (an `if` chain that
        already tests for the NPU, a device-name mapping, an NVIDIA-only test, a registry key, ...), or
        None. See analysis/dispatch."""
        return self.npu_guarded.get(id(node))

    def has_npu_branch(self) -> bool:
        """The walk met an NPU branch in the file: it runs on GPU and CPU hosts too and must keep doing so."""
        return any(g in (NPU_BRANCH, DEVICE_COMPARISON, RESOLVER_COMPARISON, IMPORTED_DEVICE_VALUE, DISPATCH_PARAMETER)
                   for g in self.npu_guarded.values())

    def left_as_is(self, node: cst.CSTNode, rule: str) -> bool:
        """True when no rule may change `node`, having said why: an ignore comment, a shim target, code
        that picks a branch by device, an NVIDIA-only module (said once per file), or a module that picks among
        several accelerators (XPU, MLU, HPU, MPS, ...: accelerate's, said at each site)."""
        if self.is_silenced(node, rule):
            return True
        if self.is_patched(node):
            if id(node) in self.saved_originals:
                self.note(node, rule, SAVED_REASON, severity="warning", hint=SAVED_HINT)
            else:
                self.note(node, rule, PATCHED_REASON, severity="info")
            return True
        whole = npu_framework_guard(self.dispatch.npu_framework) if self.dispatch.npu_framework else \
            nvidia_stack_guard(self.dispatch.nvidia_stack) if self.dispatch.nvidia_stack else None
        if whole is not None:
            if not self._stack_noted:
                self._stack_noted = True
                self.note(node, rule, f"left as is: {whole.reason}", severity=whole.severity)
            return True
        if self.dispatch.multi_vendor:
            # Each site said: each is a place where the NPU needs an arm of its own beside CUDA's.
            self.note(node, rule, "left as is: this module picks among accelerators at run time (it tests "
                                  f"{self.dispatch.vendor_names} too), so this is CUDA's part of that choice; "
                                  "renamed, the NPU would run CUDA's code",
                      severity="warning", hint="give the NPU an arm of its own beside CUDA's (torch.npu, \"npu\", \"hccl\")")
            return True
        guard = self.guard_of(node)
        if guard is not None:
            self.note(node, rule, f"left as is: {guard.reason}", severity=guard.severity)
            return True
        return False

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

    def mark(self) -> tuple[int, int]:
        """Where the notes and needed imports stand now, for `withdraw_changes` (the engine marks the
        start of a decision)."""
        return len(self._pending), len(self.needed_imports)

    def changes_need_torch_npu(self) -> bool:
        """Whether a change made so far relies on what torch_npu registers: made by a rule other than those
        that declare NEEDS_TORCH_NPU = False (`torch_npu_free`, set by the engine from the rules it runs)."""
        changed = {kw["rule"] for _, kw in self._pending if kw["kind"] == "change"} \
            | {f.rule for f in self.findings if f.kind == "change"}
        return bool(changed - self.torch_npu_free)

    def changes_since(self, mark: tuple[int, int]) -> list[str]:
        """The rule ids of the changes noted since `mark`, in order."""
        return [kw["rule"] for _, kw in self._pending[mark[0]:] if kw["kind"] == "change"]

    def withdraw_changes(self, mark: tuple[int, int]) -> None:
        """Forget the changes noted since `mark` and the imports they asked for (the code they were made
        in is put back as it was); their findings stay."""
        start, imports = mark
        self._pending[start:] = [p for p in self._pending[start:] if p[1]["kind"] != "change"]
        for key in list(self.needed_imports)[imports:]:
            del self.needed_imports[key]
        self.changed = any(kw["kind"] == "change" for _, kw in self._pending) \
            or any(f.kind == "change" for f in self.findings)

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
    def rewrite(self, original: cst.CSTNode, updated: cst.CSTNode, new: cst.CSTNode, message: str, *,
                portable: Optional[Portable] = None):
        """Return `new` and record the change, unless the code is to be left as it is (`left_as_is`).

        With --keep-cuda the change is `portable()` instead: the device-agnostic form of the same change
        (codemods/_device_agnostic.py), called only once the change is to be made, as it may ask for
        imports. A rule that gives none, or a None from it, leaves the code, with a warning."""
        if self.ctx.left_as_is(original, self.ID):
            return updated
        if self.ctx.options.keep_cuda:
            form = portable() if portable is not None else None
            if form is None:
                self.keeps_cuda(original, message)
                return updated
            self.ctx.note(original, self.ID, f"{message} (device-agnostic: --keep-cuda)", kind="change")
            return form
        if self._needs_torch_npu(original, new):
            return updated
        self.ctx.note(original, self.ID, message, kind="change")
        return new

    def keeps_cuda(self, node: cst.CSTNode, message: str, hint: str = "") -> None:
        """--keep-cuda: a change this rule makes in the default mode has no device-agnostic form here."""
        self.report(node, kept_for_cuda(message), hint=hint or KEPT_FOR_CUDA_HINT)

    def _needs_torch_npu(self, original: cst.CSTNode, new: cst.CSTNode) -> bool:
        """A file that picks the NPU at run time keeps importing on GPU and CPU hosts: a change that would
        bring in `torch_npu` there (torch_npu.profiler, `from torch_npu... import`) is left, with why."""
        # The same question torch-npu-import asks before it adds the import (an NPU branch met so far counts).
        if not (self.ctx.dispatch.selects_npu or self.ctx.has_npu_branch()) or TORCH_NPU_WORD.search(code(new)) is None \
                or TORCH_NPU_WORD.search(code(original)) is not None:
            return False
        self.ctx.note(original, self.ID, f"left as is: {NEEDS_TORCH_NPU.reason}", severity=NEEDS_TORCH_NPU.severity)
        return True

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

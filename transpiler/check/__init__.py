"""`npu-port check`: run the conversion rules and the check rules, and turn the result into findings.

Everything `convert` would change is CUDA left over and becomes an error; what convert only reports
keeps its severity (warnings with a hint); the check rules (group `check`, and `policy` when asked
for) report errors of their own. The validators themselves are ordinary report-only rules in
`codemods/check_*.py`, so `npu-port rules`, `explain`, ignore comments and the prefilter cover them.
"""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Optional

from npu_port.transpiler.bulk.cache import Cache
from npu_port.transpiler.bulk.configured import discover_files, run_configured
from npu_port.transpiler.bulk.runner import RunConfig, SourceFile
from npu_port.transpiler.core.config import ProjectConfig
from npu_port.transpiler.core.engine import Converted
from npu_port.transpiler.core.registry import rule_specs, select_specs
from npu_port.transpiler.core.report import CheckReport, Edit, Finding
from npu_port.transpiler.core.rules import Group

CHECK_GROUP: Group = "check"  # validators that always run in `check` (group "policy": when their setting is on)


def check_rule_ids(config: ProjectConfig) -> tuple[str, ...]:
    """The rules `check` runs: the selection (default: what convert runs, plus the check group), plus
    the policy rules whose settings are on."""
    rules = rule_specs()  # metadata only: imports no rule
    if config["select"]:
        ids = [r.ID for r in select_specs(config["select"], (), config["extras"])]
    else:
        ids = [r.ID for r in select_specs((), (), config["extras"])]
        ids += [i for i, r in rules.items() if r.GROUP == CHECK_GROUP]
    if config["forbid"]:
        ids.append("forbidden-import")
    if config["no-relative"]:
        ids.append("relative-import")
    return tuple(sorted(set(ids)))


def as_check_finding(f: Finding) -> Finding:
    """A change convert would make is CUDA left over: an error whose fix is that change."""
    if f.kind != "change":
        return f
    return replace(f, severity="error", message=f"CUDA left over: {f.message}")


def line_edits(before: str, after: str) -> dict[int, Edit]:
    """For each original line that convert rewrites or inserts after, the edit (from a line diff)."""
    a, b = before.splitlines(), after.splitlines()
    out: dict[int, Edit] = {}
    for tag, i1, i2, j1, j2 in _line_opcodes(a, b):
        text = "\n".join(b[j1:j2])
        if tag == "replace" and i2 - i1 == j2 - j1:
            # Line for line: each finding gets its own line's fix, not the whole hunk.
            for k in range(i2 - i1):
                out.setdefault(i1 + k + 1, Edit(i1 + k + 1, i1 + k + 1, b[j1 + k]))
        elif tag == "replace" and _pair_lines(a, b, i1, i2, j1, j2, out):
            pass  # an added line next to a rewritten one: each got its own edit
        elif tag in ("replace", "delete"):
            for line in range(i1 + 1, i2 + 1):
                out.setdefault(line, Edit(i1 + 1, i2, text))
        elif tag == "insert" and i1 > 0:
            out.setdefault(i1, Edit(i1 + 1, i1, text))  # after original line i1
    return out


def _line_opcodes(a: list[str], b: list[str]) -> Sequence[tuple[str, int, int, int, int]]:
    """difflib's opcodes from `a` to `b`, found without its matcher where they are certain: lines rewritten
    in place (as many lines after as before), none of the rewritten lines found anywhere in the other
    text. Then no matching block can leave the diagonal (a block through a rewritten line would need that
    line in the other text; one beside the diagonal implies a diagonal one that starts earlier, which
    the matcher prefers), so its answer is each unchanged run equal and each rewritten run replaced. The
    matcher costs far more on a long file (trl's 4,540-line test_grpo_trainer.py: 0.1 s)."""
    if len(a) == len(b):
        rewritten = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        if rewritten:
            before, after = set(a), set(b)
            if not any(a[i] in after or b[i] in before for i in rewritten):
                out: list[tuple[str, int, int, int, int]] = []
                start = 0
                for i in rewritten:
                    if out and out[-1][2] == i:  # the run of rewritten lines goes on
                        out[-1] = ("replace", out[-1][1], i + 1, out[-1][3], i + 1)
                    else:
                        if i > start:
                            out.append(("equal", start, i, start, i))
                        out.append(("replace", i, i + 1, i, i + 1))
                    start = i + 1
                if start < len(a):
                    out.append(("equal", start, len(a), start, len(a)))
                return out
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


_MAX_ADDED, _MAX_PAIRED, _MAX_LINE = 8, 40, 400


def _similarity(x: str, y: str) -> float:
    if len(y) > _MAX_LINE:
        return 0.0
    return difflib.SequenceMatcher(None, x, y, autojunk=False).ratio()


def _pair_lines(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int, out: dict[int, Edit]) -> bool:
    """A hunk of n old lines that became m != n new ones, where each old line still resembles one new
    line (`import torch_npu` added above a rewritten call): each old line gets its new line, each added
    line is an insertion after the old line before it. False (nothing recorded) when the lines do not
    pair up."""
    extra = (j2 - j1) - (i2 - i1)  # new lines without an old twin
    # Bounded: a few added lines next to a few rewritten ones is the case this is for; a large or hostile
    # hunk keeps the whole-hunk edit instead of costing (lines x lines x length^2) similarity checks.
    if not 0 < extra <= _MAX_ADDED or i2 - i1 > _MAX_PAIRED or any(len(x) > _MAX_LINE for x in a[i1:i2]):
        return False
    pairs: list[tuple[int, int]] = []
    start = j1
    for i in range(i1, i2):
        # Old line i can only pair with one of the next `extra + 1` new lines (each later old line needs one).
        window = range(start, min(j2, start + extra + 1))
        scores = {j: _similarity(a[i], b[j]) for j in window}
        best = max(scores, key=scores.__getitem__)
        if scores[best] < 0.6:
            return False
        pairs.append((i, best))
        extra -= best - start
        start = best + 1
    def insert(after: int, lines: list[str]) -> None:
        if not lines or after == 0:
            return
        if after > i1:  # after a line of this hunk: that line becomes itself plus the added ones
            out[after] = Edit(after, after, "\n".join([out[after].text, *lines]))
        else:
            out.setdefault(after, Edit(after + 1, after, "\n".join(lines)))

    after, j = i1, j1  # new lines before the first pair go after the old line above the hunk
    for i, k in pairs:
        insert(after, b[j:k])
        out.setdefault(i + 1, Edit(i + 1, i + 1, b[k]))
        after, j = i + 1, k + 1
    insert(after, b[j:j2])
    return True


def fix_text(f: Finding, edit: Optional[Edit]) -> str:
    if f.fix:
        return f.fix
    if edit is None:
        return ""
    if edit.end < edit.start:
        return f"insert after line {edit.start - 1}: {edit.text.strip()}"
    new = edit.text.strip() if edit.text.count("\n") == 0 else textwrap.dedent(edit.text)
    return f"becomes: {new}" if new else "delete the line"


class _Collector:
    """Receives each file's result from the runner and keeps what the report needs, not the files."""

    def __init__(self) -> None:
        self.edits: dict[Finding, Edit] = {}
        self.sources: dict[str, list[str]] = {}
        self.fixed: dict[str, list[Finding]] = {}

    def __call__(self, src: SourceFile, result: Converted, original: Optional[bytes]) -> None:
        findings = result.outcome.findings
        if not findings or original is None:
            return
        before = original.decode("utf-8", errors="replace")
        self.sources[result.outcome.path] = before.splitlines()
        edits = {}
        if result.output is not None:
            edits = line_edits(before, result.output.decode("utf-8", errors="replace"))
        out = []
        for f in findings:
            edit = edits.get(f.line) if f.kind == "change" else None
            g = as_check_finding(replace(f, fix=fix_text(f, edit)) if f.kind == "change" else f)
            if edit is not None:
                self.edits[g] = edit
            out.append(g)
        self.fixed[result.outcome.path] = out


def run_check(paths: list[Path], config: ProjectConfig, jobs: int = 1,
              extra_options: tuple[tuple[str, tuple[str, ...]], ...] = (), cache: bool = True) -> CheckReport:
    """Check `paths` as `convert` would run over them: the same prefilter and scouts, and, as convert
    has them, worker processes for `jobs` other than 1 (small runs stay in this process) and the
    result cache for a folder (`cache=False`: none); nothing is emitted or written but the cache."""
    settings = config.settings(jobs=jobs, select=check_rule_ids(config), extra_options=extra_options)
    files = discover_files(paths, config)
    collect = _Collector()
    run_config = RunConfig(executor="inline" if jobs == 1 else "local")
    if cache and any(p.is_dir() and not p.is_symlink() for p in paths):
        run_config.cache = Cache.open(None, paths)
    outcomes = run_configured(files, config, settings, collect, run_config).outcomes
    outcomes = [replace(o, findings=collect.fixed.get(o.path, o.findings)) for o in outcomes]
    return CheckReport(outcomes, collect.edits, collect.sources)

"""The one model every command reports in: a `Finding` per change made or construct seen, a
`FileOutcome` per input file, and the words they are made of (Severity, FindingKind, Status, Language)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Literal, get_args

from npu_port.transpiler.core.exit_codes import ExitCode

Severity = Literal["info", "warning", "error"]
FindingKind = Literal["change", "finding"]  # a change convert made, or something for a human to look at
Status = Literal["converted", "unchanged", "skipped", "failed", "copied"]  # what happened to an input file
# A file's kind (core/files.language_of); "other" files are copied as they are. "manifest": dependency
# lists and build or container recipes (requirements*.txt, pyproject.toml, Dockerfile, Makefile), read by
# report-only rules.
# "notebook": Jupyter notebooks, whose code cells the Python rules convert (core/notebook.py).
Language = Literal["python", "shell", "yaml", "cuda", "manifest", "notebook", "other"]
# What an outcome says of its file: its Language, "link" (a symbolic link, copied as one), or "" (not said:
# standalone, pipeline).
OutcomeLanguage = Literal[Language, "link", ""]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
FINDING_KINDS: tuple[FindingKind, ...] = get_args(FindingKind)
STATUSES: tuple[Status, ...] = get_args(Status)

# Bumped whenever a key is renamed or removed; adding keys keeps the version.
REPORT_SCHEMA_VERSION = 1


@dataclass(frozen=True, order=True)
class Finding:
    """A change `convert` made (kind="change") or something a human must look at (kind="finding").

    `file`, `line` (1-based) and `col` (1-based) point at the original source.
    """

    file: str
    line: int
    col: int
    rule: str
    severity: Severity
    message: str
    kind: FindingKind = "finding"
    hint: str = ""
    fix: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FileOutcome:
    """What happened to one input file."""

    path: str
    status: Status
    findings: list[Finding] = field(default_factory=list)
    error: str = ""
    language: OutcomeLanguage = ""

    @property
    def changes(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "change"]


@dataclass(frozen=True)
class Edit:
    """What convert does to the lines around a finding: lines start..end (1-based, inclusive) become `text`.

    end == start - 1 means an insertion before line `start`."""

    start: int
    end: int
    text: str


@dataclass
class CheckReport:
    """What `check` found: each file's outcome, what convert would do about each finding, and the
    lines of the files with findings (for the text and SARIF renderings)."""

    outcomes: list[FileOutcome]
    edits: dict[Finding, Edit] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)  # file -> its lines, for files with findings

    @property
    def findings(self) -> list[Finding]:
        return [f for o in self.outcomes for f in sorted(o.findings)]

    @property
    def failed(self) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def internal_errors(self) -> list[FileOutcome]:
        return [o for o in self.failed if o.error.startswith("internal error")]

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def exit_code(self, strict: bool = False) -> ExitCode:
        if self.internal_errors:
            return ExitCode.INTERNAL
        if self.failed or self.count("error") or (strict and self.count("warning")):
            return ExitCode.FAILED
        return ExitCode.OK

    def source_line(self, finding: Finding) -> str:
        lines = self.sources.get(finding.file, [])
        return lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""


def findings_to_json(outcomes: Iterable[FileOutcome], **summary) -> str:
    """The `--report` JSON: a stable, documented schema (see docs/report-schema.md)."""
    outcomes = list(outcomes)
    items = [f.to_dict() for o in outcomes for f in sorted(o.findings)]
    errors = [
        {"file": o.path, "error": o.error} for o in outcomes if o.status == "failed"
    ]
    doc = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "summary": summary,
        "findings": items,
        "errors": errors,
        # Every file looked at, with what happened to it: a skipped or copied file is in the report too.
        "files": [{"file": o.path, "status": o.status, "language": o.language} for o in outcomes],
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"

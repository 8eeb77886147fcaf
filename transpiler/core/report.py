"""The one model every command reports in: a `Finding` per change made or construct seen."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Iterable

SEVERITIES = ("info", "warning", "error")

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
    severity: str
    message: str
    kind: str = "finding"
    hint: str = ""
    fix: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FileOutcome:
    """What happened to one input file."""

    path: str
    status: str  # "converted" | "unchanged" | "skipped" | "failed" | "copied"
    findings: list[Finding] = field(default_factory=list)
    error: str = ""
    language: str = ""

    @property
    def changes(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "change"]


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
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"

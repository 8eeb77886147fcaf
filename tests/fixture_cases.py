"""Finds fixture cases: fixtures/rules/<rule-id>/<case>.input.<ext> (+ <case>.expected.<ext>, <case>.findings).

No expected file means the input must come out unchanged; no `.findings` file means the case must
report no finding. Cases under fixtures/rules/<rule-id>/ run with that rule alone; cases under
fixtures/examples/ run with the default rules, and those whose name contains `.extras` with --extras
as well.

`NPU_PORT_UPDATE_FIXTURES=1 python -m pytest tests/test_fixtures.py` rewrites every `.findings` file
from what the rules report now (and removes those of cases that report nothing): review the diff.
"""

from __future__ import annotations

import ast
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@dataclass(frozen=True)
class Case:
    input: Path
    expected: Optional[Path]
    select: tuple[str, ...]
    extras: bool

    @property
    def convert_path(self) -> str:
        """The path the case is converted under: its bare name, or, where its folder holds a package beside the
        cases (what a cross-file rule reads: fixtures/rules/npu-value-to-cuda-test/devlib), its place there."""
        name = self.input.name.replace(".input", "")
        if any(p.is_dir() and (p / "__init__.py").is_file() for p in self.input.parent.iterdir()):
            return str(self.input.with_name(name))
        return name

    @property
    def findings_path(self) -> Path:
        """<case>.findings: the expected findings (not changes), one `LINE:COL RULE SEVERITY: MESSAGE`
        a line (see finding_line)."""
        return self.input.with_name(self.input.name.split(".input.")[0] + ".findings")

    @property
    def findings(self) -> Optional[Path]:
        """The `.findings` file, or None where the case expects no finding."""
        path = self.findings_path
        return path if path.exists() else None

    def expected_findings(self) -> list[str]:
        """The lines of the `.findings` file, sorted; none without one."""
        if self.findings is None:
            return []
        return sorted(line.strip() for line in self.findings.read_text(encoding="utf-8").splitlines() if line.strip())

    @property
    def options(self) -> tuple[tuple[str, object], ...]:
        """<case>.options.yaml: the run options this case needs (RunOptions.extra, e.g. `forbid: [pkg]`)."""
        path = self.input.with_name(self.input.name.split(".input.")[0] + ".options.yaml")
        if not path.exists():
            return ()
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(doc.items()))

    # --keep-cuda (tests/test_fixtures_keep_cuda.py): the same input in device-agnostic mode, expected in
    # <case>.keep-cuda.expected.<ext> (none: unchanged) and <case>.keep-cuda.findings.
    @property
    def keep_cuda_expected(self) -> Path:
        stem, ext = self.input.name.split(".input.")
        return self.input.with_name(f"{stem}.keep-cuda.expected.{ext}")

    @property
    def keep_cuda_findings_path(self) -> Path:
        return self.input.with_name(self.input.name.split(".input.")[0] + ".keep-cuda.findings")

    @property
    def id(self) -> str:
        return str(self.input.relative_to(FIXTURES))


def finding_line(finding) -> str:
    """How a `.findings` file lists a finding: `LINE:COL RULE SEVERITY: MESSAGE`."""
    return f"{finding.line}:{finding.col} {finding.rule} {finding.severity}: {finding.message}"


def parse_finding_line(line: str) -> tuple[str, str, str, str]:
    """(LINE:COL, RULE, SEVERITY, MESSAGE) of a `.findings` line."""
    head, sep, message = line.partition(": ")
    assert sep, f"a .findings line is `LINE:COL RULE SEVERITY: MESSAGE`, not {line!r}"
    position, rule, severity = head.split(" ")
    return position, rule, severity, message


def update_requested() -> bool:
    return bool(os.environ.get("NPU_PORT_UPDATE_FIXTURES"))


def write_findings(case: Case, findings) -> None:
    """The `.findings` file of `case` for these findings (in line order), none if there are none."""
    path = case.findings_path
    ordered = sorted(findings, key=lambda f: (f.line, f.col, f.rule, f.severity, f.message))
    if ordered:
        path.write_text("".join(finding_line(f) + "\n" for f in ordered), encoding="utf-8")
    else:
        path.unlink(missing_ok=True)


def expected_lines(path: Path) -> list[str]:
    """The lines of a findings file, sorted; none where there is no file."""
    if not path.exists():
        return []
    return sorted(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def _expected_for(path: Path) -> Optional[Path]:
    exp = path.with_name(path.name.replace(".input.", ".expected.", 1))
    return exp if exp.exists() else None


def all_cases() -> list[Case]:
    cases = []
    for path in sorted((FIXTURES / "rules").glob("*/*.input.*")):
        cases.append(Case(path, _expected_for(path), (path.parent.name,), False))
    for path in sorted((FIXTURES / "examples").glob("**/*.input.*")):
        cases.append(Case(path, _expected_for(path), (), ".extras" in path.name))
    return cases


def assert_valid(path_name: str, data: bytes) -> None:
    """The output must still be valid in its language."""
    if path_name.endswith(".py"):
        ast.parse(data)
    elif path_name.endswith((".sh", ".bash")):
        proc = subprocess.run(["bash", "-n"], input=data, capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()
    elif path_name.endswith((".yaml", ".yml")):
        list(yaml.safe_load_all(data))

"""Finds fixture cases: fixtures/rules/<rule-id>/<case>.input.<ext> (+ <case>.expected.<ext>).

No expected file means the input must come out unchanged. Cases under fixtures/rules/<rule-id>/ run
with that rule alone; cases under fixtures/examples/ run with the default rules, and those whose
name contains `.extras` with --extras as well.
"""

from __future__ import annotations

import ast
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
    def findings(self) -> Optional[Path]:
        """<case>.findings: the expected findings (not changes), one `LINE:COL RULE SEVERITY` a line."""
        name = self.input.name.split(".input.")[0] + ".findings"
        path = self.input.with_name(name)
        return path if path.exists() else None

    @property
    def options(self) -> tuple[tuple[str, object], ...]:
        """<case>.options.yaml: the run options this case needs (RunOptions.extra, e.g. `forbid: [pkg]`)."""
        path = self.input.with_name(self.input.name.split(".input.")[0] + ".options.yaml")
        if not path.exists():
            return ()
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(doc.items()))

    @property
    def id(self) -> str:
        return str(self.input.relative_to(FIXTURES))


def _expected_for(path: Path) -> Optional[Path]:
    exp = path.with_name(path.name.replace(".input.", ".expected."))
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

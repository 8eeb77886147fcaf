"""Whole projects convert in one command: `--out DIR` mirrors the tree, one report covers every kind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_cases import FIXTURES, assert_valid

from npu_port.transpiler.cli import cli

PROJECTS = sorted(p for p in (FIXTURES / "projects").iterdir() if (p / "input").is_dir())


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _convert(*args: str):
    return CliRunner().invoke(cli, ["convert", "-j", "1", "-q", *args], catch_exceptions=False)


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_project_converts_to_the_expected_tree(project, tmp_path):
    before = _tree(project / "input")
    out, report = tmp_path / "out", tmp_path / "report.json"
    result = _convert(str(project / "input"), "--out", str(out), "--report", str(report))
    assert result.exit_code == 0, result.output
    assert _tree(project / "input") == before, "the input tree was modified"

    got, want = _tree(out), _tree(project / "expected")
    assert sorted(got) == sorted(want)
    for rel in want:
        assert got[rel].decode() == want[rel].decode(), rel
        assert_valid(rel, got[rel])
    for rel in want:  # executable scripts stay executable
        assert os.access(out / rel, os.X_OK) == os.access(project / "input" / rel, os.X_OK), rel

    doc = json.loads(report.read_text())
    assert not doc["errors"]
    languages = {Path(f["file"]).suffix for f in doc["findings"] if f["kind"] == "change"}
    kinds = {Path(rel).suffix for rel in before} & {".py", ".sh", ".yaml"}
    assert kinds <= languages, "one report covers Python, shell and YAML"

    again = _convert(str(out), "--check")
    assert again.exit_code == 0, "a second run would change the converted project:\n" + again.output

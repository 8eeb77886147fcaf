"""`--out`, `--report`, `--summary` (and `check -o`) never overwrite an input: one of the paths given, a
link to one, or a source file under an input folder is refused with exit 2 before anything runs. Reports
are written by rename, so a link at the destination is replaced instead of written through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.files import TMP_SUFFIX

CUDA = "import torch\nx = torch.ones(1).cuda()\n"


def run(*args: str):
    return CliRunner().invoke(cli, [*args], catch_exceptions=False)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "model.py").write_text(CUDA)
    (tmp_path / "src" / "run.sh").write_text("#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0\n")
    (tmp_path / "src" / "notes.md").write_text("# notes\n")
    (tmp_path / "a.py").write_text(CUDA)
    (tmp_path / "b.py").write_text(CUDA)
    (tmp_path / "link.py").symlink_to("a.py")
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_refused(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert "would overwrite" in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.mark.parametrize("args,needle", [
    (["a.py", "--out", "a.py"], "the input a.py"),
    (["a.py", "--out", "link.py"], "the input a.py"),  # a link to the input
    (["a.py", "--out", "."], "the input a.py"),  # a folder: a.py would land on itself
    (["a.py", "b.py", "--out", ".", "--force"], "the input a.py"),
    (["src", "a.py", "--out", ".", "--force"], "the input src"),  # src/ would land on src/
])
def test_out_may_not_land_on_an_input(tree, args, needle):
    before = snapshot(tree)
    assert_refused(run("convert", "--no-cache", *args), "--out", needle)
    assert snapshot(tree) == before


@pytest.mark.parametrize("args,needle", [
    (["a.py", "--report", "a.py"], "the input a.py"),
    (["a.py", "--report", "link.py"], "the input a.py"),
    (["a.py", "b.py", "--report", "b.py", "--out", "out"], "the input b.py"),
    (["src", "--report", "src/pkg/model.py", "--out", "out"], "a source file under the input src"),
    (["src", "--report", "src/run.sh", "--in-place", "--force"], "a source file under the input src"),
    (["src/notes.md", "a.py", "--summary", "src/notes.md", "--out", "out"], "the input src/notes.md"),
    (["a.py", "--out", "x.py", "--report", "x.py"], "the --out file"),
])
def test_report_and_summary_may_not_overwrite_an_input(tree, args, needle):
    before = snapshot(tree)
    assert_refused(run("convert", "--no-cache", *args), needle)
    assert snapshot(tree) == before


@pytest.mark.parametrize("args,needle", [
    (["a.py", "-o", "a.py"], "the input a.py"),
    (["src", "-o", "src/pkg/model.py"], "a source file under the input src"),
    (["src", "--output-format", "json", "-o", "link.py"], None),  # link.py is not an input of this run
    (["a.py", "src", "--output-format", "json", "-o", "link.py"], "the input a.py"),
    (["src/notes.md", "--summary", "src/notes.md"], "the input src/notes.md"),
])
def test_check_outputs_may_not_overwrite_an_input(tree, args, needle):
    before = snapshot(tree)
    result = run("check", "--isolated", *args)
    if needle is None:
        assert result.exit_code in (0, 1), result.output
        assert (tree / "link.py").is_file() and not (tree / "link.py").is_symlink()  # the link was replaced
        assert (tree / "a.py").read_bytes() == before["a.py"]
        json.loads((tree / "link.py").read_text())
        return
    assert_refused(result, needle)
    assert snapshot(tree) == before


def test_a_link_at_a_report_destination_is_replaced_not_followed(tree):
    elsewhere = tree / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim.json").write_text("precious\n")
    (elsewhere / "victim.md").write_text("precious\n")
    (tree / "report.json").symlink_to(elsewhere / "victim.json")
    (tree / "summary.md").symlink_to(elsewhere / "victim.md")
    r = run("convert", "--no-cache", "src", "--out", "out", "--report", "report.json", "--summary", "summary.md")
    assert r.exit_code == 0, r.output
    assert (elsewhere / "victim.json").read_text() == "precious\n"
    assert (elsewhere / "victim.md").read_text() == "precious\n"
    assert not (tree / "report.json").is_symlink() and not (tree / "summary.md").is_symlink()
    assert json.loads((tree / "report.json").read_text())["summary"]["files"] == 3
    assert (tree / "summary.md").read_text().startswith("# npu-port convert")
    assert not list(tree.rglob(f"*{TMP_SUFFIX}*"))

    (tree / "check.md").symlink_to(elsewhere / "victim.md")
    (tree / "check.txt").symlink_to(elsewhere / "victim.json")
    r = run("check", "--isolated", "src", "--summary", "check.md", "-o", "check.txt")
    assert r.exit_code == 1, r.output  # CUDA left over in src
    assert (elsewhere / "victim.md").read_text() == "precious\n"
    assert (elsewhere / "victim.json").read_text() == "precious\n"
    assert "CUDA left over" in (tree / "check.txt").read_text()
    assert (tree / "check.md").read_text().startswith("# npu-port check")


def test_a_report_inside_the_input_tree_that_is_not_source_is_fine(tree):
    for _ in range(2):  # the second run finds the first run's report in the tree
        r = run("convert", "--no-cache", "src", "--in-place", "--force", "--report", "src/report.json",
                "--summary", "src/summary.md")
        assert r.exit_code == 0, r.output
    assert json.loads((tree / "src" / "report.json").read_text())["summary"]["files"] >= 3
    assert ".npu()" in (tree / "src" / "pkg" / "model.py").read_text()


def test_an_existing_report_keeps_its_mode_and_a_stream_is_written_as_it_is(tree):
    (tree / "report.json").write_text("old\n")
    (tree / "report.json").chmod(0o640)
    assert run("convert", "--no-cache", "a.py", "--out", "out.py", "--report", "report.json").exit_code == 0
    assert (tree / "report.json").stat().st_mode & 0o777 == 0o640
    assert json.loads((tree / "report.json").read_text())["summary"]["files"] == 1
    assert run("convert", "--no-cache", "a.py", "--out", "out.py", "--report", "/dev/null").exit_code == 0


def test_a_report_that_cannot_be_written_is_an_error_not_a_traceback(tree):
    (tree / "plain.txt").write_text("a file, not a folder\n")
    r = run("convert", "--no-cache", "a.py", "--out", "out.py", "--report", "plain.txt/report.json")
    assert r.exit_code == 1
    assert "cannot write --report plain.txt/report.json: plain.txt is a file, not a folder" in r.stderr
    r = run("check", "--isolated", "a.py", "--summary", "plain.txt/summary.md")
    assert r.exit_code == 2 and "cannot write --summary plain.txt/summary.md: plain.txt is a file" in r.stderr


def test_missing_folders_above_a_report_are_created(tree):
    r = run("convert", "--no-cache", "a.py", "--out", "out.py", "--report", "reports/ci/report.json")
    assert r.exit_code == 0 and json.loads((tree / "reports/ci/report.json").read_text())["summary"]["files"] == 1
    r = run("check", "--isolated", "a.py", "-o", "reports/check.txt", "--exit-zero")
    assert r.exit_code == 0 and "a.py" in (tree / "reports/check.txt").read_text()

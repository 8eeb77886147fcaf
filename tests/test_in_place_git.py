"""`convert --in-place` overwrites a file only when git holds exactly its current bytes (in the index or
in HEAD), so everything it replaces can be restored; other files are refused one by one, with the reason,
while the rest of the run is converted. Asking git never runs a program the repository configures."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.bulk.git_copy import blob_id
from npu_port.transpiler.cli import cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

CUDA = "import torch\nx = torch.ones(1).cuda()\n"
EDITED = "import torch\ny = torch.zeros(2).cuda()  # edited, not committed\n"


def converted(path: Path) -> bool:
    text = path.read_text()
    return ".npu()" in text and ".cuda()" not in text


def convert(*args: str):
    return CliRunner().invoke(cli, ["convert", "--no-cache", "-j", "1", *args], catch_exceptions=False)


def git(repo: Path, *args: str, **kw) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t",
                           "-c", "core.fsmonitor=false", *args],
                          check=True, capture_output=True, text=True, **kw).stdout


def make_repo(root: Path, files: dict[str, str], *, init_args: tuple[str, ...] = ()) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", *init_args)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def refusal(output: str, name: str) -> str:
    """The line that refuses `name`."""
    lines = [line for line in output.splitlines() if name in line and "not written in place" in line]
    assert lines, f"{name} was not refused:\n{output}"
    return lines[0]


def test_only_files_whose_bytes_git_holds_are_overwritten(tmp_path):
    repo = make_repo(tmp_path / "repo", {
        "clean.py": CUDA, "edited.py": CUDA, "staged.py": CUDA, "assumed.py": CUDA, "skipped.py": CUDA,
        "restored.py": CUDA, ".gitignore": "ignored.py\nbuild/\n",
    })
    (repo / "edited.py").write_text(EDITED)  # changed, not staged: the only copy
    (repo / "staged.py").write_text(EDITED)
    git(repo, "add", "staged.py")  # staged: the index keeps a copy
    (repo / "untracked.py").write_text(CUDA)
    (repo / "ignored.py").write_text(CUDA)
    (repo / "build").mkdir()
    (repo / "build" / "gen.py").write_text(CUDA)
    git(repo, "update-index", "--assume-unchanged", "assumed.py")
    (repo / "assumed.py").write_text(EDITED)  # git status would not show it; its index entry is the old bytes
    git(repo, "update-index", "--skip-worktree", "skipped.py")
    (repo / "skipped.py").write_text(EDITED)
    (repo / "restored.py").write_text(EDITED)
    git(repo, "add", "restored.py")
    (repo / "restored.py").write_text(CUDA)  # the index holds another version, HEAD holds these bytes
    before = {p: p.read_bytes() for p in repo.rglob("*.py")}

    r = convert(str(repo), "--in-place")
    assert r.exit_code == 1, r.output
    assert "changed and not staged" in refusal(r.output, "edited.py")
    assert "changed and not staged" in refusal(r.output, "assumed.py")
    assert "changed and not staged" in refusal(r.output, "skipped.py")
    for name in ("untracked.py", "ignored.py", "gen.py"):
        assert "untracked or ignored" in refusal(r.output, name)
    assert "--force" in refusal(r.output, "edited.py")
    for name in ("edited.py", "assumed.py", "skipped.py", "untracked.py", "ignored.py", "build/gen.py"):
        assert (repo / name).read_bytes() == before[repo / name], name
    assert converted(repo / "clean.py")
    assert ".npu()" in (repo / "staged.py").read_text()
    assert converted(repo / "restored.py")
    assert "3 converted" in r.output and "6 failed" in r.output

    r = convert(str(repo), "--in-place", "--force")
    assert r.exit_code == 0, r.output
    assert all(".cuda()" not in p.read_text() for p in repo.rglob("*.py"))


def test_a_single_file_outside_any_repository(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    script = folder / "tool.py"
    script.write_text(CUDA)
    script.chmod(0o751)
    r = convert(str(script), "--in-place")
    assert r.exit_code == 1 and "not inside a git repository" in refusal(r.output, "tool.py")
    assert script.read_text() == CUDA
    r = convert(str(script), "--in-place", "--force")
    assert r.exit_code == 0 and converted(script)
    assert stat.S_IMODE(script.stat().st_mode) == 0o751


def test_unchanged_files_need_no_copy(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "plain.py").write_text("import torch\nx = torch.ones(1)\n")
    assert convert(str(folder), "--in-place").exit_code == 0  # nothing to overwrite, nothing refused


def test_a_repository_git_refuses_to_read(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo", {"a.py": CUDA})
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")  # git's own switch for "dubious ownership"
    probe = subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True)
    if probe.returncode == 0:
        pytest.skip("this git does not check repository ownership")
    r = convert(str(repo), "--in-place")
    assert r.exit_code == 1
    line = refusal(r.output, "a.py")
    assert "git cannot read its repository" in line and "dubious ownership" in line
    assert (repo / "a.py").read_text() == CUDA


def test_a_git_that_fails_or_is_missing(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo", {"a.py": CUDA})
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\necho 'fatal: not today' >&2\nexit 128\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    r = convert(str(repo), "--in-place")
    assert r.exit_code == 1 and "fatal: not today" in refusal(r.output, "a.py")
    empty = tmp_path / "nobin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    r = convert(str(repo), "--in-place")
    assert r.exit_code == 1 and "git is not installed" in refusal(r.output, "a.py")
    assert (repo / "a.py").read_text() == CUDA


def test_asking_git_runs_nothing_the_repository_configures(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": CUDA, "b.py": CUDA})
    marks = tmp_path / "marks"
    marks.mkdir()
    hooks = repo / "evil-hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "post-checkout", "post-index-change", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marks}/hook-{hook}\n")
        (hooks / hook).chmod(0o755)
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    for key, value in [("core.fsmonitor", f"touch {marks}/fsmonitor; echo"),
                       ("filter.evil.clean", f"touch {marks}/clean; cat"),
                       ("filter.evil.smudge", f"touch {marks}/smudge; cat"),
                       ("filter.evil.process", f"touch {marks}/process"),
                       ("diff.evil.textconv", f"touch {marks}/textconv; cat"),
                       ("core.hooksPath", str(hooks)), ("core.pager", f"touch {marks}/pager; cat"),
                       ("core.sshCommand", f"touch {marks}/ssh")]:
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    (repo / "b.py").write_text(EDITED)  # HEAD is read too for a file the index does not hold
    r = convert(str(repo), "--in-place")
    assert r.exit_code == 1, r.output
    assert converted(repo / "a.py")
    assert "changed and not staged" in refusal(r.output, "b.py")
    assert list(marks.iterdir()) == []


def test_the_blob_id_is_gits(tmp_path):
    data = b"import torch\r\n\x00\xff binary and CRLF\n"
    (tmp_path / "f").write_bytes(data)
    expected = subprocess.run(["git", "hash-object", "--no-filters", str(tmp_path / "f")], check=True,
                              capture_output=True, text=True).stdout.strip()
    assert blob_id(data, 40) == expected


def test_a_sha256_repository(tmp_path):
    try:
        repo = make_repo(tmp_path / "repo", {"a.py": CUDA}, init_args=("--object-format=sha256",))
    except subprocess.CalledProcessError:
        pytest.skip("this git cannot make SHA-256 repositories")
    r = convert(str(repo), "--in-place")
    assert r.exit_code == 0, r.output
    assert converted(repo / "a.py")


def test_a_submodule_file_is_judged_by_its_own_repository(tmp_path):
    inner = make_repo(tmp_path / "outer" / "lib", {"k.py": CUDA})
    outer = tmp_path / "outer"
    (outer / "main.py").write_text(CUDA)
    git(outer, "init", "-q")
    git(outer, "add", "main.py")
    git(outer, "commit", "-qm", "outer")  # lib/ is an embedded repository the outer one does not track
    r = convert(str(outer), "--in-place")
    assert r.exit_code == 0, r.output
    assert converted(inner / "k.py") and converted(outer / "main.py")
    assert os.path.isdir(inner / ".git")

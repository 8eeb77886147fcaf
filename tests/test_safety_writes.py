"""Where convert may write: never outside --out, never into a non-empty --out or over a file git holds
no copy of without --force, atomically and with the file's mode; and Ctrl-C leaves no partial file."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bulk_support import CUDA_MODEL, PLAIN_MODULE, tree_digest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.files import TMP_SUFFIX, atomic_copy, is_copy_of

ROOT = Path(__file__).resolve().parent.parent


def convert(*args: str):
    return CliRunner().invoke(cli, ["convert", *args], catch_exceptions=False)


def _small_tree(root: Path) -> Path:
    src = root / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "model.py").write_text(CUDA_MODEL.format(i=1))
    (src / "pkg" / "util.py").write_text(PLAIN_MODULE.format(i=1))
    (src / "tool.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    (src / "tool.py").chmod(0o751)
    return src


def test_out_must_be_empty_unless_forced(tmp_path):
    src = _small_tree(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = convert(str(src), "--out", str(out), "--no-cache")
    assert r.exit_code == 2 and "not empty" in r.output
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    r = convert(str(src), "--out", str(out), "--no-cache", "--force")
    assert r.exit_code == 0, r.output
    assert (out / "keep.txt").read_text() == "mine"
    assert ".npu()" in (out / "tool.py").read_text()


def test_a_rerun_into_the_same_out_rewrites_only_what_differs(tmp_path):
    src = _small_tree(tmp_path)
    out = tmp_path / "out"
    assert convert(str(src), "--out", str(out), "--no-cache").exit_code == 0
    inodes = {p.name: p.stat().st_ino for p in out.rglob("*.py")}
    (src / "pkg" / "util.py").write_text(PLAIN_MODULE.format(i=2))  # the source changed
    (out / "tool.py").write_text("edited by hand\n")  # the output was edited
    assert convert(str(src), "--out", str(out), "--no-cache", "--force").exit_code == 0
    again = {p.name: p.stat().st_ino for p in out.rglob("*.py")}
    assert again["model.py"] == inodes["model.py"]  # converted, and already the same bytes: not rewritten
    assert again["util.py"] != inodes["util.py"] and (out / "pkg" / "util.py").read_text() == PLAIN_MODULE.format(i=2)
    assert ".npu()" in (out / "tool.py").read_text()
    assert tree_digest(out) == tree_digest(_converted_afresh(src, tmp_path / "fresh"))


def test_a_copy_keeps_bytes_mode_and_times_and_never_follows_a_link(tmp_path):
    src = tmp_path / "run.sh"
    src.write_bytes(b"#!/bin/sh\necho hi\n" * 100_000)  # past one read of the copy loop
    src.chmod(0o751)
    os.utime(src, ns=(1_600_000_000_123_456_789, 1_600_000_000_987_654_321))
    dest = tmp_path / "out" / "bin" / "run.sh"
    atomic_copy(src, dest)
    assert dest.read_bytes() == src.read_bytes() and is_copy_of(src, dest)  # what a re-run trusts
    assert (dest.stat().st_mode & 0o7777, dest.stat().st_mtime_ns) == (0o751, 1_600_000_000_987_654_321)
    link = tmp_path / "link.sh"
    link.symlink_to(src)
    with pytest.raises(OSError):
        atomic_copy(link, tmp_path / "out" / "bin" / "link.sh")  # (the writer copies links as links)
    if hasattr(os, "mkfifo"):  # a FIFO where a file was: refused at once, never waited on
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(OSError):
            atomic_copy(tmp_path / "fifo", tmp_path / "out" / "bin" / "fifo")
    assert sorted(p.name for p in (tmp_path / "out" / "bin").iterdir()) == ["run.sh"]  # no temporary file left


def _converted_afresh(src: Path, out: Path) -> Path:
    assert convert(str(src), "--out", str(out), "--no-cache").exit_code == 0
    return out


def test_out_may_not_be_the_input(tmp_path):
    src = _small_tree(tmp_path)
    before = tree_digest(src)
    r = convert(str(src), "--out", str(src), "--force", "--no-cache")
    assert r.exit_code == 2 and "--in-place" in r.output
    assert tree_digest(src) == before


def test_out_inside_the_input_is_not_converted_again(tmp_path):
    src = _small_tree(tmp_path)
    out = src / "npu"
    for _ in range(2):
        r = convert(str(src), "--out", str(out), "--force", "--no-cache")
        assert r.exit_code == 0, r.output
    assert not (out / "npu").exists()
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.py")) == ["pkg/model.py", "pkg/util.py", "tool.py"]


def test_a_link_inside_out_does_not_lead_writes_outside(tmp_path):
    src = _small_tree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "pkg").symlink_to(elsewhere)  # e.g. left behind by someone else
    r = convert(str(src), "--out", str(out), "--force", "--no-cache")
    assert r.exit_code == 1
    assert "leads outside" in r.output
    assert list(elsewhere.iterdir()) == []
    assert ".npu()" in (out / "tool.py").read_text()


def test_in_place_keeps_modes_and_refuses_changes_git_holds_no_copy_of(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    src = _small_tree(tmp_path)
    git = ["git", "-C", str(src), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "init"], check=True)
    edited = "import torch\ny = torch.zeros(1).cuda()  # edited, not committed\n"
    (src / "pkg" / "util.py").write_text(edited)
    (src / "new.py").write_text("import torch\nz = torch.ones(2).cuda()\n")
    r = convert(str(src), "--in-place", "--no-cache")
    assert r.exit_code == 1 and "git holds no copy" in r.output and "util.py" in r.output and "new.py" in r.output
    assert (src / "pkg" / "util.py").read_text() == edited  # refused, file by file
    assert ".npu()" in (src / "tool.py").read_text()  # committed: converted in the same run
    assert (src / "tool.py").stat().st_mode & 0o777 == 0o751
    subprocess.run(git + ["add", "pkg/util.py"], check=True)  # staged: the index keeps a copy
    r = convert(str(src), "--in-place", "--no-cache")
    assert r.exit_code == 1 and "new.py" in r.output and "util.py" not in r.output
    assert ".npu()" in (src / "pkg" / "util.py").read_text()
    r = convert(str(src), "--in-place", "--no-cache", "--force")
    assert r.exit_code == 0, r.output
    assert ".npu()" in (src / "new.py").read_text()
    assert not list(src.rglob(f"*{TMP_SUFFIX}"))


def test_ctrl_c_leaves_only_complete_files(tmp_path):
    src = tmp_path / "repo"
    src.mkdir()
    expected = {}
    for i in range(600):
        sub = src / f"d{i % 20}"
        sub.mkdir(exist_ok=True)
        name = f"m{i}.py"
        if i % 3:
            text = CUDA_MODEL.format(i=i) * 8
            expected[f"{sub.name}/{name}"] = text.replace(".cuda()", ".npu()").replace(".is_cuda", ".is_npu")
        else:
            text = PLAIN_MODULE.format(i=i) * 8
            expected[f"{sub.name}/{name}"] = text
        (sub / name).write_text(text)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "npu_port.transpiler", "convert", str(src), "--out", str(out),
                             "-j", "2", "--no-cache", "--select", "tensor-cuda-method"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Interrupt once some converted files are written, i.e. in the middle of writing them.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and sum(1 for p in out.rglob("*.py") if b".npu()" in p.read_bytes()) >= 10:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert b"interrupted" in err
    assert not list(out.rglob(f"*{TMP_SUFFIX}"))
    written = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*.py")}
    assert 0 < len(written) < len(expected)
    assert sum(".npu()" in text for text in written.values()) >= 10
    for rel, text in written.items():
        assert text == expected[rel], f"{rel} is incomplete"

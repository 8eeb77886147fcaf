"""Outputs that are not regular files, parses that could crash the tool's own process, and the traces
a killed or raced run could leave: each through the CLI as a user types it."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from bulk_support import EditWhileConvertingRule
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core import registry
from npu_port.transpiler.core.files import TMP_SUFFIX

SCRIPT = ('import torch\n\n\ndef main():\n    model = torch.nn.Linear(2, 2).cuda()\n    return model\n\n\n'
          'if __name__ == "__main__":\n    main()\n')
DEEP_CHAIN = "x = a" + ".b" * 100_000 + ".cuda()\n"


def _cli(*args: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """The console entry point in a fresh process, so a crash or a traceback would show."""
    return subprocess.run([sys.executable, "-c", "import sys; sys.path[:] = [p for p in sys.path if p]; "
                           "from npu_port.transpiler.cli import main; main()", *args],
                          cwd=cwd, input=stdin, capture_output=True, timeout=120)


@pytest.fixture
def work(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    return tmp_path


def _char_device(path: Path) -> Path:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    except (PermissionError, OSError):
        pytest.skip("this machine does not let us make a device node")
    return path


OUTPUT_COMMANDS = [
    ["convert", "train.py", "--out", "{o}"],
    ["standalone", "train.py", "--strip", "agentic_rl", "-o", "{o}"],
    ["weave", "train.py", "--adapter", "vllm", "-o", "{o}"],
    ["pipeline", "train.py", "--strip", "agentic_rl", "-o", "{o}"],
    ["generate", "verl-train", "--algorithm", "grpo", "-o", "{o}", "--force"],
    ["generate", "verl-train", "--algorithm", "grpo", "-o", "run.py", "--config-out", "{o}", "--force"],
]


@pytest.mark.parametrize("args", OUTPUT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_device_named_as_the_output_is_written_to_never_replaced(work, args):
    node = _char_device(work / "null")
    proc = _cli(*[a.format(o="null") for a in args], cwd=work)
    assert b"Traceback" not in proc.stderr
    assert stat.S_ISCHR(os.lstat(node).st_mode), "the device node was replaced"
    assert os.lstat(node).st_rdev == os.makedev(1, 3)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("args", OUTPUT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_fifo_named_as_the_output_is_written_through(work, args):
    fifo = work / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = _cli(*[a.format(o="pipe") for a in args], cwd=work)
    if reader.is_alive():  # the command never opened it (it failed first): let the reader go
        with open(fifo, "wb"):
            pass
    reader.join(10)
    assert b"Traceback" not in proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert proc.returncode == 0, proc.stderr
    if proc.returncode == 0:
        assert got and got[0].strip(), "nothing reached the reader"


@pytest.mark.parametrize("args", OUTPUT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_socket_named_as_the_output_is_refused_with_a_message(work, args):
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(work / "sock"))
        proc = _cli(*[a.format(o="sock") for a in args], cwd=work)
    finally:
        sock.close()
    assert b"Traceback" not in proc.stderr
    assert stat.S_ISSOCK(os.lstat(work / "sock").st_mode)
    assert proc.returncode in (1, 2), proc.stderr
    assert b"sock" in proc.stderr


def test_stdout_links_are_written_through(work):
    proc = _cli("convert", "train.py", "--out", "/dev/fd/1", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert b".npu()" in proc.stdout


def test_a_fifo_inside_an_output_tree_fails_that_file_and_blocks_nothing(work):
    src = work / "src"
    src.mkdir()
    (src / "a.py").write_text(SCRIPT)
    (src / "b.py").write_text(SCRIPT)
    (work / "out").mkdir()
    os.mkfifo(work / "out" / "a.py")
    proc = _cli("convert", "src", "--out", "out", "--force", "--no-cache", cwd=work)
    assert proc.returncode == 1, proc.stderr
    assert b"a.py" in proc.stderr and b"FIFO" in proc.stderr and b"Traceback" not in proc.stderr
    assert stat.S_ISFIFO(os.lstat(work / "out" / "a.py").st_mode)
    assert ".npu()" in (work / "out" / "b.py").read_text()


@pytest.mark.slow
def test_deep_nesting_on_stdin_and_in_check_is_an_error_not_a_crash(work):
    (work / "chain.py").write_text(DEEP_CHAIN)
    proc = _cli("convert", "-", cwd=work, stdin=DEEP_CHAIN.encode())
    assert proc.returncode == 1, proc.stderr
    assert b"nested too deeply" in proc.stderr and b"Traceback" not in proc.stderr
    proc = _cli("check", "chain.py", cwd=work)  # one job: parsed in this process
    assert proc.returncode == 1, proc.stderr
    assert b"nested too deeply" in proc.stdout + proc.stderr
    # In a worker too (which allows deeper recursion): refused at once, not a crash after a minute.
    proc = _cli("convert", "chain.py", "--out", "chain_npu.py", cwd=work)
    assert proc.returncode == 1 and b"nested too deeply" in proc.stderr, proc.stderr


def test_stdin_is_bounded(work):
    proc = _cli("convert", "-", "--max-bytes", "1000", cwd=work, stdin=b"#" * 5000)
    assert proc.returncode == 1 and b"more than 1000 bytes" in proc.stderr


def test_a_killed_runs_temporary_files_are_removed_by_the_next_run(work):
    src = work / "src"
    src.mkdir()
    (src / "a.py").write_text(SCRIPT)
    dead = _a_dead_pid()
    stale = src / f".a.py.{dead}.k2j3h4l5{TMP_SUFFIX}"
    stale.write_text("half a file")
    live = src / f".a.py.{os.getppid()}.q8w7e6r5{TMP_SUFFIX}"  # a process still running: its file stays
    live.write_text("being written")
    r = CliRunner().invoke(cli, ["convert", str(src), "--out", str(work / "out"), "--no-cache"])
    assert r.exit_code == 0, r.output
    assert not list((work / "out").glob(f"*{TMP_SUFFIX}")), "a temporary file was taken for an input"
    r = CliRunner().invoke(cli, ["convert", str(src), "--in-place", "--force", "--no-cache"])
    assert r.exit_code == 0, r.output
    assert not stale.exists() and live.exists()
    assert ".npu()" in (src / "a.py").read_text()


def _a_dead_pid() -> int:
    for pid in range(4_000_000, 3_000_000, -7919):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            continue
    pytest.skip("no free process number found")


@pytest.fixture
def edit_rule(monkeypatch):
    real = registry.all_rules()
    monkeypatch.setattr(registry, "all_rules", lambda: {**real, EditWhileConvertingRule.ID: EditWhileConvertingRule})


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_edit_saved_while_converting_in_place_is_kept(work, edit_rule, jobs):
    src = work / "src"
    src.mkdir()
    target = src / "model.py"
    target.write_text("import torch\nEDIT_HERE = torch.ones(1).cuda()\n")
    (src / "other.py").write_text(SCRIPT)
    r = CliRunner().invoke(cli, ["convert", str(src), "--in-place", "--force", "--no-cache", "-j", jobs])
    assert r.exit_code == 1, r.output
    assert "changed while it was being converted" in r.output
    assert target.read_text() == "# saved by the user meanwhile\n"
    assert ".npu()" in (src / "other.py").read_text()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")
def test_converting_in_place_as_root_keeps_the_owner_and_mode(work):
    target = work / "train.py"
    os.chown(target, 4321, 4321)
    target.chmod(0o640)
    r = CliRunner().invoke(cli, ["convert", str(target), "--in-place", "--force"])
    assert r.exit_code == 0, r.output
    st = target.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 4321, 0o640)
    assert ".npu()" in target.read_text()


@pytest.mark.parametrize("command", [["standalone"], ["pipeline"]])
@pytest.mark.parametrize("kind", ["fifo", "zero", "deep"])
def test_standalone_and_pipeline_refuse_inputs_that_would_hang_exhaust_memory_or_crash(work, command, kind):
    script = work / "script.py"
    if kind == "fifo":
        os.mkfifo(script)
    elif kind == "zero":
        script.symlink_to("/dev/zero")
    else:
        script.write_text(DEEP_CHAIN)
    proc = _cli(*command, "script.py", "--strip", "agentic_rl", "-o", "out.py", cwd=work)
    assert proc.returncode == 1, proc.stderr
    expected = b"nested too deeply" if kind == "deep" else b"not a regular file"
    assert expected in proc.stderr and b"Traceback" not in proc.stderr
    assert not (work / "out.py").exists()

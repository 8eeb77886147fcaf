"""Every wait can be interrupted and no input drives the terminal: a FIFO output with no reader is refused
at once; Ctrl-C or SIGTERM wherever it lands exits 130 with one line and no traceback; the fork server
and the workers ignore the Ctrl-C a terminal sends the whole group from their first instruction, and a
worker whose parent is gone exits quietly; start folders of killed runs are swept; a file name's control
characters are printed escaped in every format; a link named on the command line is converted (or, leading
nowhere, refused), never silently passed."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from npu_port.transpiler.bulk import executors, isolation
from npu_port.transpiler.bulk.worker import Task
from npu_port.transpiler.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "import torch\nx = torch.zeros(1).cuda()\n"


def npu_port(*args, cwd: Path, prelude: str = "") -> subprocess.CompletedProcess:
    """The console script's code path (entry.main) in its own process, after `prelude`."""
    code = f"import sys; sys.argv[0] = 'npu-port'\n{prelude}\nfrom npu_port.transpiler.entry import main; main()"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("command", [["convert", "a.py", "--out"], ["check", "a.py", "-o"],
                                     ["standalone", "a.py", "--strip", "pkg", "-o"]])
def test_a_fifo_output_without_a_reader_is_refused_at_once(tmp_path, command):
    (tmp_path / "a.py").write_text(SOURCE)
    os.mkfifo(tmp_path / "out.fifo")
    proc = npu_port(*command, "out.fifo", cwd=tmp_path)  # waiting for ever is the timeout's failure
    assert proc.returncode in (1, 2), proc.stderr
    assert "no process is reading" in proc.stderr and "Traceback" not in proc.stderr


def _interrupt_when(target: str) -> str:
    """A prelude that sends this process SIGINT the moment `target` ("module:attribute.path") is called."""
    module, _, path = target.partition(":")
    owner, _, name = path.rpartition(".")
    where = f"m.{owner}" if owner else "m"
    return (f"import os, signal, importlib\nm = importlib.import_module({module!r})\n_f = {where}.{name}\n"
            f"def _hit(*a, **k):\n    os.kill(os.getpid(), signal.SIGINT)\n    return _f(*a, **k)\n"
            f"{where}.{name} = _hit")


@pytest.mark.slow
@pytest.mark.parametrize("target", [
    "importlib:import_module",  # a command's module still importing
    "click.core:Context.invoke",  # click parsing and invoking (click alone says "Aborted!" and exits 1)
    "npu_port.transpiler.core.engine:Engine.__init__",  # the run starting
])
def test_ctrl_c_anywhere_exits_130_without_a_traceback(tmp_path, target):
    (tmp_path / "a.py").write_text(SOURCE)
    proc = npu_port("convert", "a.py", cwd=tmp_path, prelude=_interrupt_when(target))
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and "Aborted" not in proc.stderr
    assert "interrupted" in proc.stderr


def _ignores_sigint(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    raise AssertionError("no SigIgn line")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_fork_server_and_workers_ignore_sigint_from_their_start(tmp_path):
    (tmp_path / "a.py").write_text(SOURCE)
    pool = executors.ProcessExecutor(2, [(Settings(), None)], timeout=60)
    try:
        for i in range(2):
            pool.submit(Task(i, str(tmp_path / "a.py"), "a.py", "python", None))
        done = []
        while len(done) < 2:
            done += pool.poll(5)
        pids = [w.process.pid for w in pool._workers]
        from multiprocessing import forkserver

        server = forkserver._forkserver._forkserver_pid
        assert all(_ignores_sigint(pid) for pid in pids)
        assert server is None or _ignores_sigint(server)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the parent's is its own again
    finally:
        pool.close()


def test_a_worker_whose_parent_is_gone_exits_quietly(tmp_path):
    (tmp_path / "a.py").write_text(SOURCE)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=executors._worker_main,
                         args=(child, [(Settings(), None)], 60.0, isolation.worker_sys_path(), str(tmp_path)))
    worker.start()
    child.close()
    parent.send(Task(0, str(tmp_path / "a.py"), "a.py", "python", None))
    parent.close()  # gone before the result: sending it fails with a broken pipe
    worker.join(60)
    assert worker.exitcode == 0  # an uncaught BrokenPipeError would print a traceback and exit 1


def test_start_folders_of_killed_runs_are_swept(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{isolation.START_PREFIX}{dead.pid}-abc"
    stale.mkdir()
    alive = tmp_path / f"{isolation.START_PREFIX}{os.getppid()}-abc"  # a live process's: kept
    alive.mkdir()
    fresh = isolation.make_start_dir()
    assert Path(fresh).name.startswith(f"{isolation.START_PREFIX}{os.getpid()}-")
    assert not stale.exists() and alive.exists()


NASTY = ["e\x1b]0;pwned\x07.py", "n\nerror: forged.py", "c\x9b2J.py"]


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["convert", "repo", "--diff"], ["convert", "repo", "--out", "o", "--show-changes"],
    ["check", "repo"], ["check", "repo", "--output-format", "github"], ["check", "repo", "--output-format", "json"],
    ["check", "repo", "--output-format", "sarif"], ["convert", "missing\x1b[2J.py"],
    ["standalone", f"repo/{NASTY[0]}", "--strip", "pkg"], ["standalone", f"repo/{NASTY[1]}", "--strip", "pkg"],
])
def test_control_characters_of_file_names_never_reach_the_output_raw(tmp_path, command):
    (tmp_path / "repo").mkdir()
    for name in NASTY:
        (tmp_path / "repo" / name).write_text(SOURCE + "y = torch.cuda.memory_stats()\n")
    proc = npu_port(*command, cwd=tmp_path)
    shown = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1, 2), shown
    assert not any(c in shown for c in "\x1b\x07\x9b"), shown
    assert "\nerror: forged" not in shown
    if "json" in command or "sarif" in command:
        json.loads(proc.stdout)


@pytest.mark.slow
def test_a_link_named_on_the_command_line_is_converted_or_refused(tmp_path):
    (tmp_path / "real.py").write_text(SOURCE)
    (tmp_path / "link.py").symlink_to("real.py")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(SOURCE)
    (tmp_path / "pkglink").symlink_to("pkg")

    shown = npu_port("convert", "link.py", cwd=tmp_path)
    assert shown.returncode == 0 and ".npu()" in shown.stdout
    assert npu_port("convert", "link.py", "--check", cwd=tmp_path).returncode == 3
    assert npu_port("check", "link.py", cwd=tmp_path).returncode == 1
    folder = npu_port("convert", "pkglink", "--diff", cwd=tmp_path)
    assert folder.returncode == 0 and "+x = torch.zeros(1).npu()" in folder.stdout
    for loop in (npu_port("convert", "loop1", cwd=tmp_path), npu_port("check", "loop1", cwd=tmp_path)):
        assert loop.returncode == 1 and "leads nowhere" in loop.stdout + loop.stderr
    in_place = npu_port("convert", "link.py", "--in-place", "--force", cwd=tmp_path)
    assert in_place.returncode == 0, in_place.stderr
    assert (tmp_path / "link.py").is_symlink() and ".npu()" in (tmp_path / "real.py").read_text()


def test_a_summary_keeps_its_lines_and_escapes_the_names_in_it(tmp_path):
    (tmp_path / "repo").mkdir()
    for name in NASTY:
        (tmp_path / "repo" / name).write_text(SOURCE)
    proc = npu_port("convert", "repo", "--diff", "--summary", "s.md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert summary.startswith("# npu-port convert\n\n") and summary.count("\n") > 5
    assert not any(c in summary for c in "\x1b\x07\x9b") and "\nerror: forged" not in summary


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null")
def test_generate_writes_to_a_stream_output(tmp_path):
    proc = npu_port("generate", "verl-train", "--algorithm", "grpo", "-o", "/dev/null", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "already exist" not in proc.stderr


def test_weave_in_place_on_a_link_weaves_the_file_it_leads_to(tmp_path):
    real = tmp_path / "real.py"
    real.write_text((Path(__file__).resolve().parent.parent / "fixtures" / "weave" / "ddp_train.input.py").read_text())
    (tmp_path / "link.py").symlink_to("real.py")
    proc = npu_port("weave", "link.py", "--adapter", "vllm", "--in-place", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "link.py").is_symlink() and "vllm" in real.read_text()

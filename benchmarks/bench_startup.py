"""What a small run costs against the import floor: the commands pre-commit and people run on a file.

    python benchmarks/bench_startup.py [--rounds R] [--tree PATH] [--json]

Each command runs as its own process (`python -m npu_port.transpiler.cli ...`, as the console script
does) on a 2-line Python file; the figure is the CPU seconds of that process and every process it
starts (user + system, from the wait4 rusage of the child), the median of `--rounds`. CPU time, not
wall time: on a shared machine it is the steadier measure, and a worker pool shows up in it in full.

`--tree` measures another checkout of npu-port (an export of an older commit, for a before/after
figure from the same script); the default is the checkout this script is in. The package's
bytecode is cached as an installed wheel's is (pip compiles it on install): each command runs once
unmeasured first, with PYTHONPYCACHEPREFIX pointing into a scratch folder, so an environment that
sets PYTHONDONTWRITEBYTECODE does not charge npu-port for compiling itself on every start while the
floor's packages load from their own caches.

  floor     `python -c "import libcst, click, rich"`: what any conversion must import
  bare      `python -c pass`: the interpreter alone
  --version, --help, rules, explain   commands that need no parser (goal: no LibCST import at all)
  convert   `convert tiny.py` (converted source on stdout)
  check     `check tiny.py`
  convert 8 `convert` of eight such files (`--out`): the point where a pool could start to pay

Ratios are against the floor. Nothing here is asserted; no test depends on timing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = 'import torch\nx = torch.zeros(2).cuda()\n'


def _become_subreaper() -> None:
    """Orphaned descendants (a fork server outlives the command by a moment) are re-parented to this
    process instead of init, so their CPU time is counted too (Linux; elsewhere only waited children
    count)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_of(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """CPU seconds (user + sys) of one process and every process it started."""
    before = _children_cpu()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr else b""
    while True:  # the command, then whatever it left behind
        try:
            os.wait()
        except ChildProcessError:
            break
    if b"internal error" in err or b"Traceback" in err or b"Usage:" in err:  # it would time the wrong thing
        sys.exit(f"{' '.join(argv)}: {err.decode(errors='replace').strip()}")
    return _children_cpu() - before


def median_of(argv: list[str], cwd: Path, env: dict[str, str], rounds: int) -> float:
    cpu_of(argv, cwd, env)  # fills the bytecode cache
    return statistics.median(cpu_of(argv, cwd, env) for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the npu-port checkout to measure")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    _become_subreaper()
    py = sys.executable
    tool = [py, "-m", "npu_port.transpiler.cli"]
    with tempfile.TemporaryDirectory(prefix="npu-port-bench-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(args.tree.resolve()), PYTHONPYCACHEPREFIX=str(work / "pycache"))
        (work / "tiny.py").write_text(TINY)
        many = work / "many"
        many.mkdir()
        for i in range(8):
            (many / f"m{i}.py").write_text(TINY)
        cases = {
            "bare": [py, "-c", "pass"],
            "floor": [py, "-c", "import libcst, click, rich"],
            "--version": tool + ["--version"],
            "--help": tool + ["--help"],
            "rules": tool + ["rules"],
            "explain": tool + ["explain", "device-string"],
            "convert": tool + ["convert", "tiny.py", "-q"],
            "check": tool + ["check", "tiny.py"],
            "convert 8": tool + ["convert", "many", "--out", "out8", "--force", "-q", "--no-cache"],
        }
        figures = {name: median_of(argv, work, env, args.rounds) for name, argv in cases.items()}
    floor = figures["floor"]
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in figures.items()}, indent=2))
        return
    print(f"{'command':<12} {'cpu s':>7} {'/ floor':>8}")
    for name, seconds in figures.items():
        print(f"{name:<12} {seconds:7.3f} {seconds / floor:8.2f}")


if __name__ == "__main__":
    main()

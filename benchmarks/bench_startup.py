"""What a small run costs against the import floor: the commands pre-commit and people run on a file.

    python benchmarks/bench_startup.py [--rounds R] [--tree PATH ...] [--only NAME,...] [--best] [--json]

Each command runs as its own process (`python -m npu_port.transpiler.cli ...`, as the console script
does) on a 2-line Python file; the figure is the CPU seconds of that process and every process it
starts (user + system, from the wait4 rusage of the child), the median of `--rounds`. CPU time, not
wall time: on a shared machine it is the steadier measure, and a worker pool shows up in it in full.

`--tree` measures another checkout of npu-port (an export of an older commit); given twice or more,
the trees are measured side by side, round by round, each command on each tree in turn, for a
before/after figure under the same load. The default is the checkout this script is in. The package's
bytecode is cached as an installed wheel's is (pip compiles it on install): each command runs once
unmeasured first per tree, with PYTHONPYCACHEPREFIX pointing into a scratch folder, so an environment that
sets PYTHONDONTWRITEBYTECODE does not charge npu-port for compiling itself on every start while the
floor's packages load from their own caches.

  floor     `python -c "import libcst, click, rich"`: what any conversion must import
  bare      `python -c pass`: the interpreter alone
  --version, --help, rules, explain   commands that need no parser (goal: no LibCST import at all)
  convert   `convert tiny.py` (converted source on stdout)
  check     `check tiny.py`
  convert 8 `convert` of eight such files (`--out`): the point where a pool could start to pay

`--only convert,check` measures those commands alone (with the floor, which every ratio needs): a
quicker loop while working on one of them. `--best` takes each command's fastest round instead of the
median: on a machine loaded by other work, time is only ever added to a round, so the minimum over many
rounds is the steadier estimate of what a command itself costs. Ratios are against the floor. Nothing here is asserted; no
test depends on timing.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", type=Path, action="append",
                        help="an npu-port checkout to measure (repeat it to compare; default: this one)")
    parser.add_argument("--only", metavar="NAME,...", help="measure only these commands (and the floor)")
    parser.add_argument("--best", action="store_true", help="the fastest round, not the median")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trees = [t.resolve() for t in args.tree or [ROOT]]
    _become_subreaper()
    py = sys.executable
    tool = [py, "-m", "npu_port.transpiler.cli"]
    with tempfile.TemporaryDirectory(prefix="npu-port-bench-") as tmp:
        work = Path(tmp)
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
        if args.only:
            wanted = {"floor", *(n.strip() for n in args.only.split(","))}
            unknown = wanted - set(cases)
            if unknown:
                parser.error(f"--only: no such command {', '.join(sorted(unknown))} (one of {', '.join(cases)})")
            cases = {name: argv for name, argv in cases.items() if name in wanted}
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        envs = [dict(base, PYTHONPATH=str(t), PYTHONPYCACHEPREFIX=str(work / f"pycache{i}"))
                for i, t in enumerate(trees)]
        for argv in cases.values():  # fills the bytecode caches
            for env in envs:
                cpu_of(argv, work, env)
        # Round by round, each command on each tree in turn: a change in the machine's load falls on all
        # of them alike.
        samples: list[dict[str, list[float]]] = [{name: [] for name in cases} for _ in trees]
        for _ in range(args.rounds):
            for name, argv in cases.items():
                for env, got in zip(envs, samples):
                    got[name].append(cpu_of(argv, work, env))
    pick = min if args.best else statistics.median
    figures = [{name: pick(v) for name, v in got.items()} for got in samples]
    for shared in (s for s in ("bare", "floor") if s in cases):  # the same command whichever tree: one figure
        pooled = pick([x for got in samples for x in got[shared]])
        for f in figures:
            f[shared] = pooled
    if args.json:
        print(json.dumps({str(t): {k: round(v, 3) for k, v in f.items()} for t, f in zip(trees, figures)},
                         indent=2))
        return
    print(f"{'command':<12}" + "".join(f" {'cpu s':>7} {'/ floor':>8}" for _ in trees))
    for name in cases:
        print(f"{name:<12}" + "".join(f" {f[name]:7.3f} {f[name] / f['floor']:8.2f}" for f in figures))
    for i, tree in enumerate(trees):
        print(f"columns {i + 1}: {tree}")


if __name__ == "__main__":
    main()

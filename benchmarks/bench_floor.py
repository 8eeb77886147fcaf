"""`convert`'s wall time against the issue's floor script (`../shared/bench/floor.py`), same job count.

    python benchmarks/bench_floor.py TREE [TREE ...] [--jobs 1 2] [--rounds R] [--floor FLOOR.py]
                                    [--tree CHECKOUT ...] [--cold]

For each tree and job count, each round runs, as processes of their own, one after the other:
  convert  `convert TREE --out OUT --report R.json --no-cache -q -j N` (with `--cold`, also the same
           with an empty `--cache-dir` instead of `--no-cache`: a first run that fills the cache)
  floor    `floor.py TREE OUT --jobs N --report R.json --copy-to NEW` over that very output and report:
           read every file (and write it under NEW), then LibCST's round trip of the changed Python
           files and `ast.parse` of the other Python files with a finding, on a pool of N processes
and prints convert's wall time (the whole command: start-up, discovery, workers, writes, report) and
its CPU seconds (user + system, its workers included), the floor's own `floor_seconds` (the script
measures itself, without its start-up), the medians of `--rounds`, and the ratio of the medians:
the issue's goal is a ratio of at most 1.5 with one job and with two. `--tree CHECKOUT` (repeatable)
measures that npu-port checkout (an export of another commit) instead of the installed one; with
several, every round runs each checkout in turn, so a change of load hits all of them alike.
npu-port's bytecode is cached in the scratch folder (one unmeasured run first), as an installed
wheel's is. Nothing is written inside the trees. Wall time on a shared machine measures the
neighbours too: read the ratios within one run, and the CPU column beside them.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_startup import _become_subreaper, _children_cpu  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FLOOR = ROOT.parent / "shared" / "bench" / "floor.py"


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of it and every process it started, stdout)."""
    before = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    while True:  # whatever it left behind (a fork server outlives the command by a moment)
        try:
            os.wait()
        except ChildProcessError:
            break
    if proc.returncode not in (0, 1) or "Traceback" in proc.stderr or "internal error" in proc.stderr:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return wall, _children_cpu() - before, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", type=Path, default=DEFAULT_FLOOR, help="the floor script (default: %(default)s)")
    parser.add_argument("--tree", dest="checkouts", type=Path, action="append", metavar="CHECKOUT",
                        help="an npu-port checkout to measure (repeat it to compare; default: the installed one)")
    parser.add_argument("--cold", action="store_true", help="also convert with an empty cache (filling it)")
    args = parser.parse_args()
    if not args.floor.is_file():
        sys.exit(f"no floor script at {args.floor} (--floor)")
    _become_subreaper()
    checkouts: list[Optional[Path]] = [c.resolve() for c in args.checkouts] if args.checkouts else [None]
    print(f"{'tree':<14} {'checkout':<12} {'jobs':>4} {'convert':>8} {'cpu':>6} {'floor':>6} {'ratio':>6}"
          + (f" {'cold':>6} {'ratio':>6}" if args.cold else ""), flush=True)
    with tempfile.TemporaryDirectory(prefix="npu-port-floor-") as tmp:
        work = Path(tmp)
        envs = []
        for i, checkout in enumerate(checkouts):
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = str(work / f"pycache{i}")
            env["XDG_CACHE_HOME"] = str(work / f"xdg{i}")
            if checkout is not None:
                env["PYTHONPATH"] = str(checkout)
            envs.append(env)
        tool = [sys.executable, "-m", "npu_port.transpiler.cli", "convert"]
        for tree in args.trees:
            tree = tree.resolve()
            for jobs in args.jobs:
                conv: list[list[float]] = [[] for _ in checkouts]
                cpu: list[list[float]] = [[] for _ in checkouts]
                cold: list[list[float]] = [[] for _ in checkouts]
                floors: list[list[float]] = [[] for _ in checkouts]
                for r in range(args.rounds + 1):  # round 0 fills the bytecode caches: not counted
                    for k, env in enumerate(envs):
                        out, report, copy = work / "out", work / "report.json", work / "copy"
                        base = [*tool, str(tree), "--out", str(out), "--report", str(report), "-q", "-j", str(jobs)]
                        if args.cold:
                            shutil.rmtree(work / "cache", ignore_errors=True)
                            wall, _, _ = timed([*base, "--cache-dir", str(work / "cache")], env, work)
                            shutil.rmtree(out)
                            if r:
                                cold[k].append(wall)
                        wall, seconds, _ = timed([*base, "--no-cache"], env, work)
                        _, _, said = timed([sys.executable, str(args.floor), str(tree), str(out), "--jobs", str(jobs),
                                            "--report", str(report), "--copy-to", str(copy)], env, work)
                        found = re.search(r"floor_seconds=([0-9.]+)", said)
                        if found is None:
                            sys.exit(f"the floor script said no floor_seconds: {said!r}")
                        shutil.rmtree(out)
                        shutil.rmtree(copy)
                        if r:
                            conv[k].append(wall)
                            cpu[k].append(seconds)
                            floors[k].append(float(found.group(1)))
                for k, checkout in enumerate(checkouts):
                    name = checkout.name if checkout is not None else "installed"
                    c, f = statistics.median(conv[k]), statistics.median(floors[k])
                    line = (f"{tree.name:<14} {name:<12} {jobs:>4} {c:8.2f} {statistics.median(cpu[k]):6.2f} "
                            f"{f:6.2f} {c / f:6.2f}")
                    if args.cold:
                        line += f" {statistics.median(cold[k]):6.2f} {statistics.median(cold[k]) / f:6.2f}"
                    print(line, flush=True)


if __name__ == "__main__":
    main()

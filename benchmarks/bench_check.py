"""`check` against `convert` on the same trees, in CPU seconds: check reports only, so it must cost less.

    python benchmarks/bench_check.py TREE [TREE ...] [--rounds R]

For each tree, each command runs as its own process from an empty scratch folder, whose `xdg` folder is
its user cache folder (XDG_CACHE_HOME: the default cache starts empty there), with one job:
  convert      `convert TREE --out OUT --no-cache -j 1`
  nocache      `check TREE --no-cache` (like for like with convert --no-cache: the ratio is of these two)
  check        `check TREE` (cold: its cache empty; it fills the cache as it goes)
  check warm   `check TREE` again (the cache the cold run filled)
  conv/check   `convert OUT --check --no-cache` and `check OUT --no-cache` on the converted tree OUT
               (what CI checks after a port)
CPU seconds of the process and all it starts (bench_startup's subreaper), best of `--rounds` (the
median with `--median`). As in bench_startup, npu-port's bytecode is cached (PYTHONPYCACHEPREFIX in the
scratch folder, filled by one unmeasured run of each command first), as an installed wheel's is: an
environment with PYTHONDONTWRITEBYTECODE would otherwise charge every run for compiling the modules it
imports, and check imports more of them than convert. `--tree CHECKOUT` (repeatable) measures that
npu-port checkout instead of the installed one: with two or more, each command runs for every checkout in turn, round by round, so a
change of load hits all of them alike; one row per tree and checkout. `--no-cache-only` leaves out the
two cached columns (check cold and warm), which like-for-like comparisons do not need.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_startup import _become_subreaper, cpu_of  # noqa: E402


def each(argv: list[str], fresh_cache: bool, works: list[Path], envs: list[dict[str, str]], rounds: int,
         pick: Callable[[list[float]], float]) -> list[float]:
    """One figure per checkout (`{work}` in argv is its scratch folder): every round runs the command
    for each checkout in turn."""
    times: list[list[float]] = [[] for _ in works]
    for _ in range(rounds):
        for k, (work, env) in enumerate(zip(works, envs)):
            if fresh_cache:
                shutil.rmtree(work / "xdg" / "npu-port", ignore_errors=True)
            times[k].append(cpu_of([a.replace("{work}", str(work)) for a in argv], work, env))
    return [pick(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tree", dest="checkouts", type=Path, action="append", metavar="CHECKOUT",
                        help="an npu-port checkout to measure (repeat it to compare; default: the installed one)")
    parser.add_argument("--median", action="store_true", help="the median of the rounds, not the best")
    parser.add_argument("--no-cache-only", action="store_true", help="leave out check cold and warm (cached)")
    args = parser.parse_args()
    _become_subreaper()
    tool = [sys.executable, "-m", "npu_port.transpiler.cli"]
    checkouts: list[Optional[Path]] = [c.resolve() for c in args.checkouts] if args.checkouts else [None]
    pick = statistics.median if args.median else min
    print(f"{'tree':<16} {'checkout':<12} {'convert':>8} {'nocache':>8} {'ratio':>6} {'check':>7} {'warm':>6} | "
          f"{'conv(out)':>9} {'check(out)':>10} {'ratio':>6}")
    for tree in args.trees:
        tree = tree.resolve()
        with tempfile.TemporaryDirectory(prefix="npu-port-check-") as tmp:
            works = [Path(tmp) / f"w{i}" for i in range(len(checkouts))]
            envs = []
            for work, checkout in zip(works, checkouts):
                work.mkdir()
                env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
                env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
                env["XDG_CACHE_HOME"] = str(work / "xdg")
                if checkout is not None:
                    env["PYTHONPATH"] = str(checkout)
                envs.append(env)

            warmed: set[str] = set()

            def run(argv: list[str], fresh_cache: bool, works=works, envs=envs, warmed=warmed) -> list[float]:
                if argv[len(tool)] not in warmed:  # fills the bytecode caches for this command: not measured
                    warmed.add(argv[len(tool)])
                    each(argv, fresh_cache, works, envs, 1, pick)
                return each(argv, fresh_cache, works, envs, args.rounds, pick)

            t = str(tree)
            conv = run(tool + ["convert", t, "--out", "{work}/out", "--force", "--no-cache", "-q", "-j", "1"], True)
            nocache = run(tool + ["check", t, "--no-cache"], True)
            if args.no_cache_only:
                cold = warm = [float("nan")] * len(checkouts)
            else:
                cold = run(tool + ["check", t], True)
                warm = run(tool + ["check", t], False)
            conv_out = run(tool + ["convert", "{work}/out", "--check", "--no-cache", "-q", "-j", "1"], True)
            check_out = run(tool + ["check", "{work}/out", "--no-cache"], True)
        for k, checkout in enumerate(checkouts):
            name = checkout.name if checkout is not None else "installed"
            print(f"{tree.name:<16} {name:<12} {conv[k]:8.2f} {nocache[k]:8.2f} {nocache[k] / conv[k]:6.2f} "
                  f"{cold[k]:7.2f} {warm[k]:6.2f} | {conv_out[k]:9.2f} {check_out[k]:10.2f} "
                  f"{check_out[k] / conv_out[k]:6.2f}")
        os.sync()


if __name__ == "__main__":
    main()

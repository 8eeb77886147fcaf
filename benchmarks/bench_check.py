"""`check` against `convert` on the same trees, in CPU seconds: check reports only, so it must cost less.

    python benchmarks/bench_check.py TREE [TREE ...] [--rounds R]

For each tree, each command runs as its own process from an empty scratch folder (so the default
cache, ./.npu-port-cache, starts empty there) with one job:
  convert      `convert TREE --out OUT --no-cache -j 1`
  nocache      `check TREE --no-cache` (like for like with convert --no-cache: the ratio is of these two)
  check        `check TREE` (cold: its cache empty; it fills the cache as it goes)
  check warm   `check TREE` again (the cache the cold run filled)
  conv/check   `convert OUT --check --no-cache` and `check OUT --no-cache` on the converted tree OUT
               (what CI checks after a port)
CPU seconds of the process and all it starts (bench_startup's subreaper), best of `--rounds`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_startup import _become_subreaper, cpu_of  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    _become_subreaper()
    tool = [sys.executable, "-m", "npu_port.transpiler.cli"]
    print(f"{'tree':<16} {'convert':>8} {'nocache':>8} {'ratio':>6} {'check':>7} {'warm':>6} | {'conv(out)':>9} "
          f"{'check(out)':>10} {'ratio':>6}")
    for tree in args.trees:
        tree = tree.resolve()
        with tempfile.TemporaryDirectory(prefix="npu-port-check-") as tmp:
            work = Path(tmp)
            out = work / "out"

            def best(argv: list[str], fresh_cache: bool, work: Path = work) -> float:
                times = []
                for _ in range(args.rounds):
                    if fresh_cache:
                        shutil.rmtree(work / ".npu-port-cache", ignore_errors=True)
                    times.append(cpu_of(argv, work, dict(os.environ)))
                return min(times)

            conv = best(tool + ["convert", str(tree), "--out", str(out), "--force", "--no-cache", "-q", "-j", "1"], True)
            nocache = best(tool + ["check", str(tree), "--no-cache"], True)
            cold = best(tool + ["check", str(tree)], True)
            warm = best(tool + ["check", str(tree)], False)
            conv_out = best(tool + ["convert", str(out), "--check", "--no-cache", "-q", "-j", "1"], True)
            check_out = best(tool + ["check", str(out), "--no-cache"], True)
        print(f"{tree.name:<16} {conv:8.2f} {nocache:8.2f} {nocache / conv:6.2f} {cold:7.2f} {warm:6.2f} | "
              f"{conv_out:9.2f} {check_out:10.2f} {check_out / conv_out:6.2f}")
        os.sync()


if __name__ == "__main__":
    main()

"""Where a worker pool starts to pay: `convert` of growing slices of a real tree, inline against a pool.

    python benchmarks/bench_inline.py TREE [--jobs N] [--rounds R] [--sizes KB,KB,...]

For each size, the largest files of TREE that `convert` parses (Python files its prefilter lets
through), smallest first, are copied into a scratch folder until they add up to that many kilobytes;
then `convert FOLDER --out OUT --no-cache` runs as its own process twice, once with every file
converted in that process (runner.INLINE_MAX_BYTES raised past the slice) and once with a pool of
`--jobs` workers from the first file on (INLINE_MAX_BYTES = 0). Printed: CPU seconds of the process
and everything it started (a fork server and its workers included: the bench makes itself their
subreaper), and wall seconds, best of `--rounds`. runner.INLINE_MAX_BYTES is chosen where the pool's
wall time starts to win.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_startup import _become_subreaper  # noqa: E402

from npu_port.transpiler.core.engine import Engine  # noqa: E402
from npu_port.transpiler.core.files import walk  # noqa: E402
from npu_port.transpiler.core.settings import Settings  # noqa: E402

RUN = ("import sys; import npu_port.transpiler.bulk.runner as r; r.INLINE_MAX_BYTES = int(sys.argv.pop(1)); "
       "from npu_port.transpiler.cli import main; sys.argv[0] = 'npu-port'; main()")


def parsed_files(tree: Path) -> list[Path]:
    engine = Engine(Settings())
    out = []
    for p in walk(tree):
        if p.suffix == ".py" and p.is_file() and not p.is_symlink():
            if engine.needs_parse(p.read_bytes(), "python"):
                out.append(p)
    return sorted(out, key=lambda p: p.stat().st_size)


def timed(argv: list[str]) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="10,30,60,120,250,500")
    args = parser.parse_args()
    _become_subreaper()
    files = parsed_files(args.tree)
    print(f"{'KB':>5} {'files':>5} {'inline cpu':>10} {'pool cpu':>9} {'inline wall':>11} {'pool wall':>9}")
    for kb in (int(k) for k in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="npu-port-inline-") as tmp:
            src = Path(tmp) / "src"
            src.mkdir()
            total, count = 0, 0
            for p in files:
                if total >= kb * 1000:
                    break
                shutil.copy(p, src / f"f{count}_{p.name}")
                total += p.stat().st_size
                count += 1
            figures = {}
            for name, bound in (("inline", 10**12), ("pool", 0)):
                argv = [sys.executable, "-c", RUN, str(bound), "convert", str(src), "--out", str(Path(tmp) / name),
                        "--force", "--no-cache", "-q", "-j", str(args.jobs)]
                runs = [timed(argv) for _ in range(args.rounds)]
                figures[name] = (min(r[0] for r in runs), min(r[1] for r in runs))
            print(f"{total // 1000:5d} {count:5d} {figures['inline'][0]:10.2f} {figures['pool'][0]:9.2f} "
                  f"{figures['inline'][1]:11.2f} {figures['pool'][1]:9.2f}")


if __name__ == "__main__":
    main()

"""What `convert --keep-cuda` costs against a default run (issue 35: within 1.5x on VERL).

    python benchmarks/bench_keep_cuda.py TREE [TREE ...] [--rounds R]

Per tree and round: the engine over every Python, shell and YAML file of the tree (prefilter + conversion,
one process, no pool, no cache, no writes), once in the default mode and once with --keep-cuda for the torch
the tree's own pins imply (as `convert` finds it); CPU seconds, the median of the rounds, and their ratio.
Wall time on a shared machine measures the neighbours as much as the code, hence CPU time of one process.
Nothing is written inside the trees.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import language_of
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.tables.device_agnostic import torch_for_output


def cpu_seconds(files: list[tuple[Path, bytes, str]], settings: Settings) -> tuple[float, int]:
    engine = Engine(settings)
    started = time.process_time()
    changed = sum(1 for path, data, language in files if engine.convert(data, str(path), language).output is not None)
    return time.process_time() - started, changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'tree':<16}{'files':>6}{'torch':>7}{'default s':>11}{'changed':>8}{'keep s':>8}{'changed':>8}{'ratio':>7}")
    for tree in args.trees:
        files = [(p, p.read_bytes(), language_of(p)) for p in sorted(tree.rglob("*"))
                 if p.is_file() and not p.is_symlink() and language_of(p) in ("python", "shell", "yaml")]
        torch, _ = torch_for_output("ascend", None, [tree])
        cpu_seconds(files, Settings())  # warm the imports and tables
        default, keep = [], []
        for _ in range(args.rounds):
            seconds, changed_default = cpu_seconds(files, Settings())
            default.append(seconds)
            seconds, changed_keep = cpu_seconds(files, Settings(keep_cuda=True, torch_version=torch))
            keep.append(seconds)
        d, k = statistics.median(default), statistics.median(keep)
        print(f"{tree.name:<16}{len(files):>6}{torch:>7}{d:>11.2f}{changed_default:>8}{k:>8.2f}{changed_keep:>8}"
              f"{k / d:>7.2f}", flush=True)


if __name__ == "__main__":
    main()

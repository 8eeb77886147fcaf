"""Peak memory of one worker over a tree and over the same tree many times: it must stay flat.

    python benchmarks/bench_worker_memory.py TREE [--times 1,16]

For each multiple, a fresh process converts every shell, YAML and Python file of TREE that many
times over (as a worker does: convert_task, one file after another, nothing kept between files) and
prints its peak resident memory (ru_maxrss) and the memory still held by Python objects afterwards
(tracemalloc is too slow here; `gc.get_objects` counts what survives). A per-file cache that keeps
every file alive (ParsedTexts keyed weakly by a context its own values held) shows as memory that
grows with the multiple.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import gc, resource, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from npu_port.transpiler.bulk.worker import Task, convert_task, raise_recursion_limit
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import language_of, walk
from npu_port.transpiler.core.settings import Settings

raise_recursion_limit()
settings = Settings()
engine = Engine(settings)
files = []
for p in walk(Path(sys.argv[1])):
    lang = language_of(p)
    if lang in ("python", "shell", "yaml") and p.is_file() and not p.is_symlink():
        data = p.read_bytes()
        chosen = engine.needs_parse(data, lang)
        if chosen:
            files.append((p, lang, tuple(r.ID for r in chosen)))
for _ in range(int(sys.argv[2])):
    for i, (p, lang, rules) in enumerate(files):
        convert_task(Task(i, str(p), str(p), lang, rules=rules), settings)
gc.collect()
from npu_port.transpiler.core.rules import FileContext
alive = sum(1 for o in gc.get_objects() if isinstance(o, FileContext))
print(len(files), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, alive)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--times", default="1,16")
    args = parser.parse_args()
    print(f"{'times':>5} {'files':>6} {'peak RSS MB':>11} {'file contexts alive':>20}")
    for times in args.times.split(","):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(args.tree), times, str(ROOT)],
                             capture_output=True, text=True, check=True).stdout.split()
        files, rss, alive = out
        print(f"{times:>5} {files:>6} {rss:>11} {alive:>20}")


if __name__ == "__main__":
    main()

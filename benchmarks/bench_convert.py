"""How fast `convert` runs over a tree, against the floor it cannot beat, cold and warm.

    python benchmarks/bench_convert.py PATH [PATH ...] [--jobs N] [--rounds R] [--cpu-only] [--tree CHECKOUT]

For each tree, in one run:
  floor  read every file, then LibCST parse + a no-op transform + emit of only the files that
         convert changes, over a process pool of the same size, largest first
  floor+ the same over the files convert changes or reports findings in (it must parse those too)
  cold   `convert TREE --out TMP` with an empty cache, into an empty TMP
  warm   the same again (a re-run: the cache the cold run filled, the same TMP, --force)
  nocache  the same with --no-cache (the prefilter still skips files)
and prints files, lines, seconds and the ratios cold/floor and warm/cold. Timings are the best of
`--rounds` runs. Wall time on a shared machine measures the neighbours as much as the code, so the
same comparison is also made in CPU seconds of one process (jobs=1, no pool, no writes): the
engine's prefilter + conversion of every file against the floor's read + round trip.
`--cpu-only` makes that comparison alone, the median of `--rounds` (and floor+ in CPU: the round
trip of every Python file with a change or a finding, and a bound: the floor plus the least that
finding what convert reports costs, see _reading_bound); `--tree` imports another npu-port checkout
(an export of an older commit) for a before/after figure from the same script.
Nothing is written inside the trees.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# --tree PATH: the npu-port checkout to import (an export of another commit, for a before/after figure
# from the same script); default: the checkout this script is in. Read before the imports below.
_TREE = sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv[:-1] else None
sys.path.insert(0, str(Path(_TREE).resolve() if _TREE else Path(__file__).resolve().parent.parent))

import libcst as cst  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from npu_port.transpiler.bulk.executors import default_jobs  # noqa: E402
from npu_port.transpiler.cli import cli  # noqa: E402
from npu_port.transpiler.core.engine import Engine  # noqa: E402
from npu_port.transpiler.core.files import language_of, walk  # noqa: E402
from npu_port.transpiler.core.settings import Settings  # noqa: E402


def _parses(engine: Engine, data: bytes, language: str, path: str) -> bool:
    """Whether the prefilter lets the file through, given its path where the checkout's engine takes
    one (scouts decline some files by path; a checkout from before that has no such argument)."""
    if "path" in inspect.signature(engine.needs_parse).parameters:
        return bool(engine.needs_parse(data, language, path))
    return bool(engine.needs_parse(data, language))


def _noop_roundtrip(path: str) -> int:
    data = Path(path).read_bytes()
    module = cst.parse_module(data)
    return len(module.visit(cst.CSTTransformer()).bytes)


def floor(tree: Path, changed: list[Path], jobs: int) -> float:
    started = time.perf_counter()
    for p in walk(tree):
        if p.is_file() and not p.is_symlink():
            p.read_bytes()
    # Shell and YAML rewrites are regex/round-trip edits far cheaper than a parse: reading them is their floor.
    order = sorted((p for p in changed if language_of(p) == "python"), key=lambda p: -p.stat().st_size)
    if order:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(_noop_roundtrip, [str(p) for p in order]))
    return time.perf_counter() - started


def cpu_seconds(tree: Path, changed: list[Path]) -> tuple[float, float]:
    """(floor, convert) in CPU seconds of this process, one file after another."""
    files = [p for p in walk(tree) if p.is_file() and not p.is_symlink()]
    started = time.process_time()
    for p in files:
        p.read_bytes()
    for p in changed:
        if language_of(p) == "python":
            _noop_roundtrip(str(p))
    floor_cpu = time.process_time() - started
    engine = Engine(Settings())
    started = time.process_time()
    for p in files:
        language = language_of(p)
        if language in ("python", "shell", "yaml"):
            engine.convert(p.read_bytes(), str(p), language)
    return floor_cpu, time.process_time() - started


def convert(tree: Path, jobs: int, cache: Path | None, report: Path, out: Path) -> float:
    args = ["convert", str(tree), "--out", str(out), "--force", "-j", str(jobs), "--quiet", "--report", str(report)]
    args += ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    started = time.perf_counter()
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    seconds = time.perf_counter() - started
    if result.exit_code not in (0, 1):
        raise SystemExit(f"convert failed ({result.exit_code}): {result.output}")
    return seconds


def measure(tree: Path, jobs: int, rounds: int) -> dict:
    files = [p for p in walk(tree) if p.is_file() and not p.is_symlink()]
    py = [p for p in files if p.suffix == ".py"]
    lines = sum(p.read_bytes().count(b"\n") for p in py)
    work = Path(tempfile.mkdtemp(prefix="npu-port-bench-"))
    try:
        report = work / "report.json"
        cold, warm, nocache = [], [], []
        for r in range(rounds):
            cache, out = work / f"cache{r}", work / f"out{r}"
            cold.append(convert(tree, jobs, cache, report, out))
            warm.append(convert(tree, jobs, cache, report, out))  # a re-run: same cache, same --out
            nocache.append(convert(tree, jobs, None, report, work / f"out-nocache{r}"))
            shutil.rmtree(out)
            shutil.rmtree(work / f"out-nocache{r}")
        doc = json.loads(report.read_text())
        changed = sorted({Path(f["file"]) for f in doc["findings"] if f["kind"] == "change"})
        touched = sorted({Path(f["file"]) for f in doc["findings"]})
        errors = len(doc["errors"])
        floors = [floor(tree, changed, jobs) for _ in range(rounds)]
        floors_touched = [floor(tree, touched, jobs) for _ in range(rounds)]
        engine = Engine(Settings())
        parsed = sum(1 for p in files if _parses(engine, p.read_bytes(), language_of(p), str(p)))
        cpu = min((cpu_seconds(tree, changed) for _ in range(rounds)), key=lambda fc: fc[1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "tree": str(tree), "files": len(files), "py_files": len(py), "py_lines": lines,
        "parsed": parsed, "touched": len(touched), "changed": len(changed), "failed": errors, "jobs": jobs,
        "floor": min(floors), "floor_touched": min(floors_touched),
        "cold": min(cold), "warm": min(warm), "nocache": min(nocache),
        "cpu_floor": cpu[0], "cpu_convert": cpu[1],
    }


def cpu_only(tree: Path, rounds: int) -> dict:
    """The CPU comparison alone (`--cpu-only`): per round, the engine over every file (prefilter +
    conversion, one process, no writes), then the floor's read + round trip of the files it changed,
    and of the Python files it changed or reported (floor+); the medians of `rounds`."""
    files = [p for p in walk(tree) if p.is_file() and not p.is_symlink()]
    py = [p for p in files if p.suffix == ".py"]
    convert_s, floor_s, floor_touched_s, bound_s = [], [], [], []
    changed: list[Path] = []
    touched: list[Path] = []
    for _ in range(rounds):
        engine = Engine(Settings())
        started = time.process_time()
        changed, touched = [], []
        for p in files:
            language = language_of(p)
            if language in ("python", "shell", "yaml"):
                got = engine.convert(p.read_bytes(), str(p), language)
                if got.output is not None:
                    changed.append(p)
                if got.output is not None or got.outcome.findings:
                    touched.append(p)
        convert_s.append(time.process_time() - started)
        for target, paths in ((floor_s, changed), (floor_touched_s, touched)):
            started = time.process_time()
            for p in files:
                p.read_bytes()
            for p in paths:
                if language_of(p) == "python":
                    _noop_roundtrip(str(p))
            target.append(time.process_time() - started)
        changed_set = set(changed)
        bound_s.append(floor_s[-1] + _reading_bound(files, [p for p in touched if p not in changed_set]))
    engine = Engine(Settings())
    parsed = sum(1 for p in py if _parses(engine, p.read_bytes(), "python", str(p)))
    return {"tree": str(tree), "files": len(files), "py_files": len(py),
            "py_lines": sum(p.read_bytes().count(b"\n") for p in py), "parsed_py": parsed,
            "touched": len(touched), "changed": len(changed), "rounds": rounds,
            "cpu_floor": statistics.median(floor_s), "cpu_floor_touched": statistics.median(floor_touched_s),
            "cpu_convert": statistics.median(convert_s), "cpu_bound": statistics.median(bound_s)}


def _reading_bound(files: list[Path], reported: list[Path]) -> float:
    """What a tool that gives convert's findings must spend beyond the floor, at the least: one
    substring search of every file (for one name, where convert's prefilter looks for each of its
    rules' names), and Python's own `ast.parse`, the cheapest parse there is, of every Python file
    with findings and no change. The floor + this is the `bound` column: where it is over 1.5x the
    floor, no tool built so reaches 1.5x the floor on that tree."""
    datas = [p.read_bytes() for p in files]
    started = time.process_time()
    for data in datas:
        _ = b"cuda" in data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes: the parse is what is timed
        for p in reported:
            if language_of(p) == "python":
                ast.parse(p.read_bytes())
    return time.process_time() - started


def _print_cpu_only(m: dict) -> None:
    print(f"{Path(m['tree']).name:<14}{m['files']:>6}{m['py_lines']:>9}{m['parsed_py']:>7}{m['touched']:>8}"
          f"{m['changed']:>8}{m['cpu_floor']:>8.2f}{m['cpu_floor_touched']:>8.2f}{m['cpu_convert']:>8.2f}"
          f"{m['cpu_convert'] / m['cpu_floor']:>7.2f}{m['cpu_convert'] / m['cpu_floor_touched']:>8.2f}"
          f"{m['cpu_bound']:>8.2f}{m['cpu_bound'] / m['cpu_floor']:>7.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON lines")
    parser.add_argument("--tree", type=Path, default=None, help="the npu-port checkout to measure")
    parser.add_argument("--cpu-only", action="store_true",
                        help="only the CPU comparison (no wall-clock runs), the median of --rounds")
    args = parser.parse_args()
    if args.cpu_only:
        print(f"{'tree':<14}{'files':>6}{'py lines':>9}{'parsed':>7}{'touched':>8}{'changed':>8}"
              f"{'cpu fl':>8}{'cpu fl+':>8}{'cpu cv':>8}{'cv/fl':>7}{'cv/fl+':>8}{'bound':>8}{'bd/fl':>7}")
        for tree in args.trees:
            m = cpu_only(tree, args.rounds)
            if args.json:
                print(json.dumps(m))
            _print_cpu_only(m)
        return
    print(f"{'tree':<12}{'files':>6}{'py lines':>9}{'parsed':>7}{'touched':>8}{'changed':>8}{'jobs':>5}"
          f"{'floor':>7}{'floor+':>7}{'cold':>7}{'c/floor':>8}{'c/floor+':>9}{'nocache':>8}{'warm':>6}{'w/cold':>7}"
          f"{'cpu fl':>8}{'cpu cv':>8}{'cpu r':>7}")
    for tree in args.trees:
        m = measure(tree, args.jobs, args.rounds)
        if args.json:
            print(json.dumps(m))
        print(f"{tree.name:<12}{m['files']:>6}{m['py_lines']:>9}{m['parsed']:>7}{m['touched']:>8}{m['changed']:>8}"
              f"{m['jobs']:>5}{m['floor']:>7.2f}{m['floor_touched']:>7.2f}{m['cold']:>7.2f}"
              f"{m['cold'] / m['floor']:>8.2f}{m['cold'] / m['floor_touched']:>9.2f}{m['nocache']:>8.2f}"
              f"{m['warm']:>6.2f}{m['warm'] / m['cold']:>7.1%}{m['cpu_floor']:>8.2f}{m['cpu_convert']:>8.2f}"
              f"{m['cpu_convert'] / m['cpu_floor']:>7.2f}", flush=True)


if __name__ == "__main__":
    main()

"""Where a cold conversion's CPU goes, per tree: the engine over every file in one process, profiled.

    python benchmarks/profile_tree.py TREE [TREE ...] [--save DIR] [--tree NPU_PORT_CHECKOUT]

What `bench_convert.py`'s `cpu cv` column measures (prefilter + conversion of every Python, shell and
YAML file, one after another, no pool, no writes), run under cProfile and split into phases by the
inclusive time of the functions that do each one. cProfile slows Python code more than the C parts
(LibCST's native parser, libyaml), so read the shares, not the seconds; the `floor` line is the
round trip of the changed files (parse + no-op transform + emit) as bench_convert measures it,
without the profiler, and the `total` line the unprofiled conversion.

  prefilter     Engine.needs_parse: the trigger search, the lexical scan and the scouts of every file
  parse         python_source.parse_module: LibCST's parse of the files the scouts let through
  dispatch      analysis.dispatch.code: source text rendered from nodes for the device-dispatch tests
  positions     analysis.locations._generate: line numbers from a second code generation (of the
                statements asked about, or of the whole module)
  emit          cst.Module.code of the converted modules
  yaml          ruamel's round-trip load of the YAML files a trigger lets through
  rules         the rest of the Python pass: the rules' visits, the walk, the analysis
  other         the rest: shell and YAML rules' own work, the shell lexer, reading the text

`--save DIR` keeps each profile (`TREE.prof`) for `python -m pstats`. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import pstats
import sys
import time
from pathlib import Path

# --tree PATH: the npu-port checkout to import (an export of another commit, for a before/after figure
# from the same script); default: the checkout this script is in. Read before the imports below.
_TREE = sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv[:-1] else None
sys.path.insert(0, str(Path(_TREE).resolve() if _TREE else Path(__file__).resolve().parent.parent))

import libcst as cst  # noqa: E402

from npu_port.transpiler.core.engine import Engine  # noqa: E402
from npu_port.transpiler.core.files import language_of, walk  # noqa: E402
from npu_port.transpiler.core.settings import Settings  # noqa: E402

# phase -> (file suffix, function name) of the functions whose inclusive time is that phase
PHASES = {
    "prefilter": [("transpiler/core/engine.py", "needs_parse")],
    "parse": [("transpiler/core/python_source.py", "parse_module")],
    "dispatch": [("transpiler/analysis/dispatch.py", "code")],
    "positions": [("transpiler/analysis/locations.py", "_generate")],
    "emit": [("libcst/_nodes/module.py", "code")],
    "yaml": [("transpiler/text/yaml_edit.py", "_load_all")],
}


def _parses(engine: Engine, data: bytes, language: str, path: str) -> bool:
    """Whether the prefilter lets the file through, given its path where the checkout's engine takes
    one (scouts decline some files by path; a checkout from before that has no such argument)."""
    if "path" in inspect.signature(engine.needs_parse).parameters:
        return bool(engine.needs_parse(data, language, path))
    return bool(engine.needs_parse(data, language))


def _inclusive(stats: pstats.Stats, suffix: str, name: str) -> float:
    total = 0.0
    for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if func == name and file.replace("\\", "/").endswith(suffix):
            total += ct
    return total


def _files(tree: Path) -> list[tuple[Path, bytes, str]]:
    out = []
    for p in walk(tree):
        if p.is_file() and not p.is_symlink():
            language = language_of(p)
            if language in ("python", "shell", "yaml"):
                out.append((p, p.read_bytes(), language))
    return out


def _convert_all(engine: Engine, files: list[tuple[Path, bytes, str]]) -> list[Path]:
    changed = []
    for p, data, language in files:
        if engine.convert(data, str(p), language).output is not None:
            changed.append(p)
    return changed


def profile(tree: Path, save: Path | None) -> None:
    files = _files(tree)
    started = time.process_time()
    changed = _convert_all(Engine(Settings()), files)  # unprofiled; also imports what the run needs
    total = time.process_time() - started
    started = time.process_time()
    for p in changed:
        if language_of(p) == "python":
            cst.parse_module(p.read_bytes()).visit(cst.CSTTransformer()).code  # noqa: B018
    floor = time.process_time() - started
    profiler = cProfile.Profile()
    engine = Engine(Settings())
    profiler.enable()
    _convert_all(engine, files)
    profiler.disable()
    stats = pstats.Stats(profiler)
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        stats.dump_stats(str(save / f"{tree.name}.prof"))
    whole = stats.total_tt  # type: ignore[attr-defined]
    shares = {phase: sum(_inclusive(stats, *f) for f in funcs) / whole for phase, funcs in PHASES.items()}
    # Positions and emit run inside the Python pass, dispatch inside the rules' visits: the rest of
    # the Python pass is what convert_python costs beyond the phases inside it.
    python_pass = _inclusive(stats, "transpiler/core/python_source.py", "convert_python") / whole
    shares["rules"] = max(0.0, python_pass - shares["parse"] - shares["dispatch"] - shares["positions"]
                          - shares["emit"])
    parsed = sum(1 for p, data, language in files if language == "python" and _parses(engine, data, language, str(p)))
    loaded = sum(1 for p, data, language in files if language == "yaml" and _parses(engine, data, language, str(p)))
    print(f"== {tree.name}: {len(files)} files, {parsed} Python files parsed, {loaded} YAML files loaded, "
          f"{len(changed)} changed")
    print(f"  {'total':<10} {total:7.2f} s cpu (unprofiled)")
    print(f"  {'floor':<10} {floor:7.2f} s cpu (round trip of the changed Python files)")
    for phase, share in shares.items():
        print(f"  {phase:<10} {share:7.1%}  ~{share * total:5.2f} s")
    print(f"  {'other':<10} {max(0.0, 1 - sum(shares.values())):7.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--tree", type=Path, default=None, help="the npu-port checkout to measure")
    args = parser.parse_args()
    for tree in args.trees:
        profile(tree, args.save)


if __name__ == "__main__":
    main()

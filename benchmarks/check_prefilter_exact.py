"""Is the prefilter exact on real code? Converts every source file of each tree twice, in this process:
with the prefilter (triggers, then the rules' scouts) and with none (every rule on every file), and
prints how many files each stage let through and every file where the two results differ.

    python benchmarks/check_prefilter_exact.py PATH [PATH ...] [--select ALL]

Exit status 1 if any file differs. It parses every file, so it takes minutes on a large tree: it is
a check to run on real repositories, not a benchmark.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from npu_port.transpiler.core.engine import CONVERTERS, Engine  # noqa: E402
from npu_port.transpiler.core.files import language_of, walk  # noqa: E402
from npu_port.transpiler.core.settings import Settings  # noqa: E402


def check(tree: Path, settings: Settings) -> int:
    scouted, unfiltered = Engine(settings), Engine(settings, prefilter=False)
    counts = {"files": 0, "triggered": 0, "parsed": 0, "differ": 0}
    for path in walk(tree):
        language = language_of(path)
        if language not in CONVERTERS or not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        counts["files"] += 1
        hit, user_name = scouted.triggered(data, language)
        counts["triggered"] += bool(hit or user_name)
        counts["parsed"] += bool(scouted.needs_parse(data, language, str(path)))
        a = scouted.convert(data, str(path), language)
        b = unfiltered.convert(data, str(path), language)
        if b.outcome.status == "failed":
            continue  # a file the parser rejects: skipping it unparsed loses no rewrite
        if a.output != b.output or sorted(a.outcome.findings) != sorted(b.outcome.findings):
            counts["differ"] += 1
            print(f"  DIFFERS {path}", flush=True)
    print(f"{tree.name}: {counts['files']} source files, {counts['triggered']} with a trigger, "
          f"{counts['parsed']} parsed after the scouts, {counts['differ']} differ", flush=True)
    return counts["differ"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--select", default="", help="comma-separated rule ids or ALL (default: the default rules)")
    args = parser.parse_args()
    settings = Settings(select=tuple(s for s in args.select.split(",") if s))
    differ = sum(check(tree, settings) for tree in args.trees)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()

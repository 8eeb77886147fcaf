"""Runs the engine over files: discovery, per-file isolation, parallel execution, results in input order."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from transpiler.engine import Converted, Engine
from transpiler.files import ReadError, language_of, read_source, walk
from transpiler.report import FileOutcome
from transpiler.settings import Settings


@dataclass(frozen=True)
class SourceFile:
    path: Path  # where it is read from
    rel: Path  # where it lands under an output root
    display: str  # how reports name it


def discover(paths: Iterable[Path]) -> Iterator[SourceFile]:
    for root in paths:
        if root.is_dir() and not root.is_symlink():
            for p in walk(root):
                rel = p.relative_to(root)
                yield SourceFile(p, rel, str(p))
        else:
            yield SourceFile(root, Path(root.name), str(root))


_ENGINE: Optional[Engine] = None


def _engine_for(settings: Settings) -> Engine:
    global _ENGINE
    if _ENGINE is None or _ENGINE.settings != settings:
        _ENGINE = Engine(settings)
    return _ENGINE


def convert_one(src: SourceFile, settings: Settings) -> tuple[SourceFile, Converted, Optional[bytes]]:
    """Read and convert one file; any failure becomes that file's outcome, never the run's end.

    Returns the original bytes too so the writer can copy unchanged files without reading twice.
    """
    engine = _engine_for(settings)
    if src.path.is_symlink():
        return src, Converted(FileOutcome(src.display, "copied", language="link"), None), None
    try:
        data = read_source(src.path, settings.max_bytes)
    except ReadError as exc:
        lang = language_of(src.path)
        status = "failed" if lang != "other" else "copied"
        return src, Converted(FileOutcome(src.display, status, error=str(exc), language=lang), None), None
    try:
        return src, engine.convert(data, src.display), data
    except Exception as exc:  # a rule bug must cost one file, not the run
        outcome = FileOutcome(src.display, "failed", error=f"internal error: {type(exc).__name__}: {exc}")
        return src, Converted(outcome, None), data


def run(files: list[SourceFile], settings: Settings,
        on_result: Callable[[SourceFile, Converted, Optional[bytes]], None]) -> list[FileOutcome]:
    """Convert `files` (largest first when parallel) and hand each result to `on_result` in input order."""
    jobs = settings.jobs or os.cpu_count() or 1
    outcomes: list[FileOutcome] = []
    if jobs <= 1 or len(files) < 2:
        for src in files:
            result = convert_one(src, settings)
            on_result(*result)
            outcomes.append(result[1].outcome)
        return outcomes
    order = sorted(range(len(files)), key=lambda i: -_size(files[i].path))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {i: pool.submit(convert_one, files[i], settings) for i in order}
        for i in range(len(files)):
            result = futures[i].result()
            on_result(*result)
            outcomes.append(result[1].outcome)
    return outcomes


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0

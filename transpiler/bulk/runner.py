"""Runs the engine over many files: discovery, triage, the cache, an executor, results in input order.

The driver process triages every file itself, because that is as cheap as reading it: links,
special files, non-source files, oversized, binary or undecodable sources, files without any
trigger of the selected rules (the prefilter) and cache hits never reach a worker. Only files that
must be parsed go to the executor, largest first so that no big file starts last. Workers read the
file themselves (Ray gets the bytes) and send back output only when it changed.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from npu_port.transpiler.bulk.cache import SKIPPED, Cache, fingerprint
from npu_port.transpiler.bulk.executors import (
    DEFAULT_TIMEOUT,
    Executor,
    InlineExecutor,
    Job,
    ProcessExecutor,
    default_jobs,
)
from npu_port.transpiler.bulk.worker import Result, Task, digest_of
from npu_port.transpiler.core.engine import CONVERTERS, Converted, Engine
from npu_port.transpiler.core.files import (
    NOT_REGULAR,
    ReadError,
    language_of,
    needs_head,
    printable,
    read_head,
    source_text,
    too_large,
    walk,
)
from npu_port.transpiler.core.report import FileOutcome, OutcomeLanguage, Status
from npu_port.transpiler.core.rule_catalog import RuleLike
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.output.progress import Reporter


@dataclass(frozen=True)
class SourceFile:
    path: Path  # where it is read from
    rel: Path  # where it lands under an output root
    display: str  # how reports name it
    # A link named on the command line that leads nowhere (dangling, or a loop): a failure, where a
    # link met inside a tree is copied as a link.
    broken_link: bool = False


def discover(paths: Iterable[Path], exclude: Iterable[Path] = ()) -> Iterator[SourceFile]:
    """The files of `paths`. A link named on the command line is followed (as ruff and black do): a
    link to a file is that file (read and, in place, written there; named and placed as the link), a
    link to a folder is that folder's tree; links met inside a tree are never followed."""
    exclude = list(exclude)
    for root in paths:
        given = root
        if root.is_symlink():
            try:
                os.stat(root)
            except OSError:
                yield SourceFile(root, Path(root.name), printable(str(root)), broken_link=True)
                continue
            root = Path(os.path.realpath(root))
        if root.is_dir():
            for p in walk(root, exclude):
                rel = p.relative_to(root)
                yield SourceFile(p, rel, printable(str(given / rel)))
        else:
            yield SourceFile(root, Path(given.name), printable(str(given)))


@dataclass
class RunResult:
    outcomes: list[FileOutcome]
    cache_hits: int = 0
    interrupted: bool = False


def warn_on_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class RunConfig:
    """How to run, as opposed to what to convert (Settings)."""

    executor: str = "local"  # "local" (worker processes) | "ray" | "inline" (this process)
    timeout: float = DEFAULT_TIMEOUT
    cache: Optional[Cache] = None
    ray_address: Optional[str] = None
    reporter: Reporter = field(default_factory=Reporter)
    # Hand results on in input order (a diff or code on stdout) rather than as they finish: files
    # are then written as soon as they are done, so an interrupted run keeps what it finished.
    ordered: bool = False
    # Where the run's one warning about a damaged cache goes (never stdout, which may carry code).
    warn: Callable[[str], None] = warn_on_stderr


OnResult = Callable[[SourceFile, Converted, Optional[bytes]], None]


@dataclass
class _Group:
    """Files that share settings (per-file ignores from the config make a few groups)."""

    settings: Settings
    engine: Engine
    fingerprint: Optional[str]


def run(files: Sequence[SourceFile], settings: Settings, on_result: OnResult,
        rules: Optional[Sequence[RuleLike]] = None, config: Optional[RunConfig] = None,
        settings_for: Optional[Callable[[SourceFile], Settings]] = None) -> RunResult:
    """Convert `files`, handing each result to `on_result(src, converted, original)` (in input order if
    `config.ordered`); `original` is the input's bytes when the file has changes or findings, else
    None. `settings_for` gives a file its own settings (the rules then come from the registry; the
    explicit `rules` apply to files with the run's `settings`). The outcomes come back in input order.
    Ctrl-C (or SIGTERM) stops the run once the result being handed over is written: every file
    written so far is complete."""
    config = config or RunConfig()
    reporter = config.reporter
    delivery = _Delivery(files, on_result, config.ordered)
    executor: Optional[Executor] = None
    interrupted = False

    index_of: dict[Settings, int] = {}
    groups: list[_Group] = []

    def group_of(src: SourceFile) -> int:
        s = settings_for(src) if settings_for is not None else settings
        gid = index_of.get(s)
        if gid is None:
            engine = Engine(s, rules if s == settings else None)
            fp = fingerprint(s, engine.specs) if config.cache is not None else None
            gid = index_of[s] = len(groups)
            groups.append(_Group(s, engine, fp))
        return gid

    group_ids = [group_of(src) for src in files]
    jobs: list[Job] = [(g.settings, g.engine.specs) for g in groups]

    def finish(index: int, converted: Converted, original: Optional[bytes]) -> None:
        delivery.put(index, converted, original)
        reporter.advance(executor.current() if executor is not None else files[index].display)

    def take(results: list[Result]) -> None:
        for res in results:
            src = files[res.index]
            group = groups[group_ids[res.index]]
            if config.cache is not None and res.digest is not None and group.fingerprint is not None:
                rel = src.rel.as_posix()
                config.cache.put(group.fingerprint, rel, res.outcome.language, res.digest, res.outcome, res.output,
                                 res.reads)
                st = stats.pop(res.index, None)
                if st is not None:
                    config.cache.index(group.fingerprint).record(rel, st, res.digest)
            original = None
            if res.output is not None or res.outcome.findings:
                original = _reread(src)
                if original is not None and res.digest is not None and digest_of(original) != res.digest:
                    finish(res.index, _changed_meanwhile(res.outcome), None)
                    continue
            finish(res.index, Converted(res.outcome, res.output), original)

    stats: dict[int, os.stat_result] = {}  # of the files given to workers, for the cache's stat index
    sizes = {i: _size(src.path) for i, src in enumerate(files)}
    # A local pool costs more to start than a few files cost to convert: tasks wait here until they
    # add up to what repays one, and a run that ends first converts them in this process.
    waiting: list[Task] = []
    waiting_bytes = 0
    may_inline = config.executor == "local"

    def submit(task: Task) -> None:
        nonlocal executor
        if executor is None:
            executor = _make_executor(config, jobs, settings.jobs, _input_roots(files))
        executor.submit(task)
        take(executor.poll(0))

    reporter.start(len(files))
    try:
        for index in sorted(range(len(files)), key=lambda i: (-sizes[i], i)):
            src = files[index]
            group = groups[group_ids[index]]
            triaged = _triage(index, src, group, config.cache, stats, ship=config.executor == "ray")
            if not isinstance(triaged, Task):
                finish(index, *triaged)
                continue
            task = replace(triaged, group=group_ids[index])
            if may_inline and executor is None:
                waiting.append(task)
                waiting_bytes += sizes[index]
                if waiting_bytes <= INLINE_MAX_BYTES:
                    continue
                while waiting:
                    submit(waiting.pop(0))
                continue
            submit(task)
        if waiting:
            executor = InlineExecutor(jobs, config.timeout)
            for task in waiting:
                submit(task)
        while executor is not None and executor.pending():
            take(executor.poll(0.5))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if executor is not None:
            executor.close()
        reporter.stop()
    if config.cache is not None:
        config.cache.save_indexes()
        config.cache.prune([g.fingerprint for g in groups if g.fingerprint is not None])
        warning = config.cache.damage_warning()
        if warning:
            config.warn(warning)
    return RunResult(delivery.outcomes(), config.cache.hits if config.cache else 0, interrupted)


# Below this many bytes of files to parse, a run converts in this process instead of starting a pool:
# the pool's start-up costs about 1.1 s of CPU (a fork server, the workers, the rules loaded in
# them), and converting inline costs about 0.6 s per 100 KB of Python with a typical share of
# changes, so with two jobs a pool wins wall time from about 250 KB on an idle machine and later on
# a busy one (benchmarks/bench_inline.py; figures in benchmarks/README.md). Files are triaged largest
# first, so a big run reaches the bound at once and its pool starts as early as before.
INLINE_MAX_BYTES = 250_000


def _make_executor(config: RunConfig, jobs: list[Job], processes: int, inputs: list[str]) -> Executor:
    if config.executor == "inline":
        return InlineExecutor(jobs, config.timeout)
    if config.executor == "ray":
        from npu_port.transpiler.bulk.ray_executor import RayExecutor

        return RayExecutor(jobs, config.timeout, config.ray_address, inputs)
    return ProcessExecutor(processes or default_jobs(), jobs, config.timeout, inputs)


def _input_roots(files: Sequence[SourceFile]) -> list[str]:
    """The folders the run's files come from (a tree's root, a single file's folder): never on a
    worker's import path."""
    roots = {str(src.path.parents[len(src.rel.parts) - 1]) for src in files if src.rel.parts}
    return sorted(roots)


def _changed_meanwhile(outcome: FileOutcome) -> Converted:
    """The file's bytes now differ from those converted: the result is stale, and writing it would
    lose the edit."""
    return Converted(FileOutcome(outcome.path, "failed", error="changed while it was being converted; "
                                 "left as it is (run again to convert the new content)",
                                 language=outcome.language), None)


def _reread(src: SourceFile) -> Optional[bytes]:
    try:
        with open(src.path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _triage(index: int, src: SourceFile, group: _Group, cache: Optional[Cache], stats: dict[int, os.stat_result],
            ship: bool) -> Task | tuple[Converted, Optional[bytes]]:
    """Settle a file without parsing it where possible (the outcome, and the bytes when it has
    changes or findings); else the Task a worker must do (its stat goes into `stats`)."""
    engine, settings = group.engine, group.settings

    def done(status: Status, language: OutcomeLanguage, error: str = "") -> tuple[Converted, Optional[bytes]]:
        return Converted(FileOutcome(src.display, status, error=error, language=language), None), None

    try:
        st = os.lstat(src.path)
    except OSError as exc:
        return done("failed", language_of(src.path), f"cannot read: {exc.strerror}")
    if stat.S_ISLNK(st.st_mode):
        if src.broken_link:
            return done("failed", "link", "a link that leads nowhere (its target is missing, or links loop)")
        return done("copied", "link")
    language = language_of(src.path, read_head(src.path) if needs_head(src.path) else b"")
    if not stat.S_ISREG(st.st_mode):
        return done("failed", language, f"{NOT_REGULAR}; left out")
    if language not in CONVERTERS:
        return done("copied", language)
    if not engine.by_language.get(language):
        return done("skipped", language)  # no selected rule reads this language: copied as is
    rel = src.rel.as_posix()
    seen = cache.index(group.fingerprint) if cache is not None and group.fingerprint is not None else None
    known = seen.lookup(rel, st) if seen is not None else None
    if known == SKIPPED:
        return done("skipped", language)
    if known is not None and cache is not None and group.fingerprint is not None:  # (known: both are set)
        # the same file as last time: its result, without reading it
        hit = cache.get(group.fingerprint, rel, language, known, src.display)
        if hit is not None:
            outcome, output = hit
            if output is None and not outcome.findings:
                return Converted(outcome, output), None
            original = _reread(src)
            if original is not None and digest_of(original) == known:
                return Converted(outcome, output), original
    if st.st_size > settings.max_bytes:
        return done("failed", language, f"{too_large(st.st_size, settings.max_bytes)}; copied unconverted")
    try:
        with open(src.path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return done("failed", language, f"cannot read: {exc.strerror}")
    try:
        source_text(data, language)
    except ReadError as exc:
        return done("failed", language, f"{exc}; copied unconverted")
    chosen = engine.needs_parse(data, language, src.display)  # the path the worker converts it under
    if not chosen:
        if seen is not None:
            seen.record(rel, st, SKIPPED)
        return done("skipped", language)
    if cache is not None and group.fingerprint is not None:
        digest = digest_of(data)
        hit = cache.get(group.fingerprint, rel, language, digest, src.display)
        if hit is not None:
            if seen is not None:  # (always: the index of this cache and fingerprint)
                seen.record(rel, st, digest)
            outcome, output = hit
            return Converted(outcome, output), data if output is not None or outcome.findings else None
    stats[index] = st
    return Task(index, str(src.path), src.display, language, data if ship else None,
                rules=tuple(r.ID for r in chosen))


class _Delivery:
    """Hands results on as they finish, or in input order; keeps the outcomes of those handed on."""

    def __init__(self, files: Sequence[SourceFile], on_result: OnResult, ordered: bool):
        self._files = files
        self._on_result = on_result
        self._ordered = ordered
        self._waiting: dict[int, tuple[Converted, Optional[bytes]]] = {}
        self._next = 0
        self._outcomes: dict[int, FileOutcome] = {}

    def put(self, index: int, converted: Converted, original: Optional[bytes]) -> None:
        if not self._ordered:
            self._hand_on(index, converted, original)
            return
        self._waiting[index] = (converted, original)
        while self._next in self._waiting:
            self._hand_on(self._next, *self._waiting.pop(self._next))
            self._next += 1

    def _hand_on(self, index: int, converted: Converted, original: Optional[bytes]) -> None:
        with interrupts_deferred():
            self._on_result(self._files[index], converted, original)
        self._outcomes[index] = converted.outcome

    def outcomes(self) -> list[FileOutcome]:
        return [self._outcomes[i] for i in sorted(self._outcomes)]


@contextmanager
def interrupts_deferred():
    """Hold Ctrl-C and SIGTERM until the block (one file's write) is done, then act on them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in caught[:1]:
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                raise KeyboardInterrupt


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0

"""What a worker does with one file, wherever it runs: in a local process or a Ray task.

Every failure becomes that file's outcome. The engine is built once per worker process and makes
fresh rule instances for every file, so no state leaks from one file into the next.
"""

from __future__ import annotations

import hashlib
import signal
import sys
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

from npu_port.transpiler.analysis.project_modules import recording_reads
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import ReadError, parse_refusal, python2_hint, read_source
from npu_port.transpiler.core.report import FileOutcome, Language
from npu_port.transpiler.core.rule_catalog import RuleLike
from npu_port.transpiler.core.settings import Settings


@dataclass(frozen=True)
class Task:
    """One file to convert. `data` is shipped where the worker cannot read the path (Ray)."""

    index: int
    path: str
    display: str
    language: Language
    data: Optional[bytes] = None
    group: int = 0  # which (settings, rules) job of the run applies
    rules: tuple[str, ...] = ()  # the ids of the rules the driver's prefilter chose; () lets the worker choose


@dataclass
class Result:
    index: int
    outcome: FileOutcome
    output: Optional[bytes]  # None when unchanged
    digest: Optional[str] = None  # of the bytes converted, for the cache; None: do not cache
    reads: tuple[tuple[str, str], ...] = ()  # other files of the project the result depends on: (path, digest)


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


# LibCST walks trees recursively, a few frames per level: a 400-term `a + b + ...` already exceeds
# CPython's default limit of 1000. Workers run isolated (a stack overflow costs one file, not the
# run), so they allow deeper trees; Python-to-Python calls do not grow the C stack in 3.11+.
WORKER_RECURSION_LIMIT = 20000


def raise_recursion_limit() -> None:
    if sys.getrecursionlimit() < WORKER_RECURSION_LIMIT:
        sys.setrecursionlimit(WORKER_RECURSION_LIMIT)


class FileTimeout(BaseException):
    """Raised by `time_limit` inside a conversion; a BaseException so no rule's handler swallows it.
    `message` says which limit ran out."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# The per-file limit (--timeout) is CPU time: what the file costs, whatever else the machine runs (a
# 36k-line file that takes 13 s of CPU must not fail because neighbours slow it down). A file that
# waits without using CPU never reaches it, so the wall clock gets an allowance this many times the
# limit, and the process that waits for a worker kills it a little later still (native code that
# never returns to Python, where no handler can run).
WALL_ALLOWANCE = 4.0


def wall_allowance(seconds: float) -> float:
    return seconds * WALL_ALLOWANCE


@contextmanager
def time_limit(seconds: float):
    """Interrupt the block after `seconds` of this process's CPU time (SIGPROF) or after the wall-clock
    allowance (SIGALRM); only possible in a process's main thread, elsewhere the block runs unbounded.

    Pure-Python work (LibCST's visitors) is interrupted; a hang inside native code is not, which is
    why executors also keep a deadline of their own."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def on_cpu(signum, frame):
        raise FileTimeout(timeout_message(seconds))

    def on_wall(signum, frame):
        raise FileTimeout(wall_timeout_message(seconds))

    previous = signal.signal(signal.SIGPROF, on_cpu), signal.signal(signal.SIGALRM, on_wall)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, wall_allowance(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, previous[0])
        signal.signal(signal.SIGALRM, previous[1])


def timeout_message(seconds: float) -> str:
    return f"timed out after {seconds:g}s of CPU time (see --timeout); it is left unconverted"


def wall_timeout_message(seconds: float) -> str:
    return (f"timed out: no result after {wall_allowance(seconds):g}s of wall-clock time "
            f"({WALL_ALLOWANCE:g} times --timeout {seconds:g}s, which counts CPU time); it is left unconverted")


_ENGINES: dict[tuple, Engine] = {}


def engine_for(settings: Settings, rules: Optional[Sequence[RuleLike]]) -> Engine:
    """One engine per worker process and job; rules get fresh instances for every file anyway."""
    key = (settings, tuple(rules) if rules is not None else None)
    engine = _ENGINES.get(key)
    if engine is None:
        if len(_ENGINES) > 16:
            _ENGINES.clear()
        engine = _ENGINES[key] = Engine(settings, rules)
    return engine


def convert_task(task: Task, settings: Settings, rules: Optional[Sequence[RuleLike]] = None) -> Result:
    """Input that could crash LibCST's parser is refused first: in this process (stdin, inline runs)
    a crash would end the run without a word, and in a worker it would cost a minute or a timeout."""
    def failed(error: str, digest: Optional[str] = None) -> Result:
        return Result(task.index, FileOutcome(task.display, "failed", error=error, language=task.language),
                      None, digest)

    data = task.data
    if data is None:
        try:
            data = read_source(task.path, settings.max_bytes)  # type: ignore[arg-type]
        except ReadError as exc:
            return failed(str(exc))
    digest = digest_of(data)
    refusal = parse_refusal(data) if task.language == "python" else None
    if refusal is not None:
        return failed(refusal, digest)
    try:
        engine = engine_for(settings, rules)
        chosen = engine.rules_named(task.rules) if task.rules else None
        with recording_reads() as reads:
            converted = engine.convert(data, task.display, task.language, chosen)
    except RecursionError:
        return failed("too deeply nested to convert (RecursionError)", digest)
    except Exception as exc:  # a rule bug must cost one file, not the run
        return failed(f"internal error: {type(exc).__name__}: {exc}")
    outcome = converted.outcome
    if outcome.status == "failed" and task.language == "python" and outcome.error.startswith("syntax error"):
        hint = python2_hint(data)
        if hint:
            outcome.error = f"{outcome.error} - {hint}"
    return Result(task.index, outcome, converted.output, digest, tuple(sorted(reads.items())))


def convert_within(task: Task, timeout: float, settings: Settings,
                   rules: Optional[Sequence[RuleLike]] = None) -> Result:
    """convert_task bounded by `time_limit(timeout)`: a file over it is that file's failure (not
    cached, so a later run tries again)."""
    try:
        with time_limit(timeout):
            return convert_task(task, settings, rules)
    except FileTimeout as exc:
        return Result(task.index, FileOutcome(task.display, "failed", error=exc.message, language=task.language),
                      None)

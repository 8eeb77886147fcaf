"""Where files get converted: a pool of local worker processes (or Ray tasks, see ray_executor.py).

An executor takes `Task`s with `submit` and hands back `Result`s from `poll`, in any order. The local
pool gives each worker one file at a time, so when a worker dies (LibCST can segfault on deeply
nested code) or overruns the per-file timeout, exactly that file is known: it is reported as failed,
the worker is replaced and the run goes on. concurrent.futures cannot do this: a dead worker breaks
the whole pool, and a running task cannot be stopped.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional, Protocol

from npu_port.transpiler.bulk.isolation import (
    clean_start,
    current_dir,
    enter_worker,
    interrupts_held,
    make_start_dir,
    worker_sys_path,
)
from npu_port.transpiler.bulk.worker import (
    WORKER_RECURSION_LIMIT,
    Result,
    Task,
    convert_within,
    raise_recursion_limit,
    wall_allowance,
    wall_timeout_message,
)
from npu_port.transpiler.core.report import FileOutcome
from npu_port.transpiler.core.rule_catalog import RuleLike
from npu_port.transpiler.core.settings import Settings

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

DEFAULT_TIMEOUT = 120.0

# What a worker needs to convert the files of one group: its settings and its rules, as specs (a rule
# module is imported where a file needs it) or classes (None: the settings' selection).
Job = tuple[Settings, Optional[Sequence[RuleLike]]]


class Executor(Protocol):
    def submit(self, task: Task) -> None: ...

    def poll(self, wait_s: float) -> list[Result]:
        """Results finished so far, waiting up to `wait_s` for the first one."""

    def pending(self) -> int: ...

    def close(self) -> None: ...

    def current(self) -> Optional[str]:
        """The display name of a file being converted now, for progress output."""


def failed_result(task: Task, error: str) -> Result:
    return Result(task.index, FileOutcome(task.display, "failed", error=error, language=task.language), None)


def _mp_context():
    import multiprocessing as mp  # here, not at the top: a small run converts in process and needs none

    methods = mp.get_all_start_methods()
    # forkserver: workers fork from a clean process with the engine already imported (cheap to
    # replace after a crash) and never inherit the parent's threads (rich's refresh thread).
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["npu_port.transpiler.bulk.worker", "npu_port.transpiler.bulk.worker_warmup"])
        return ctx
    return mp.get_context("spawn")


def _worker_main(conn: Connection, jobs: Sequence[Job], timeout: float, path: list[str],
                 cwd: Optional[str]) -> None:
    enter_worker(path, cwd)
    # Ctrl-C reaches the whole process group; the parent alone decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise_recursion_limit()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        result = convert_within(task, timeout, *jobs[task.group])
        try:
            conn.send(result)
        except OSError:  # the parent is gone (killed): nothing to report to, and no traceback
            return


class _Worker:
    def __init__(self, ctx, jobs: Sequence[Job], timeout: float, path: list[str], empty_dir: str):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, jobs, timeout, path, current_dir()),
                                   daemon=True)
        with clean_start(path, empty_dir):
            self.process.start()
        child.close()
        self.task: Optional[Task] = None
        self.started = 0.0

    def give(self, task: Task) -> None:
        self.task, self.started = task, time.monotonic()
        self.conn.send(task)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


def _death_reason(process) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the converter crashed on this file ({name}); it is left unconverted"
    return f"the converter process exited with status {code} on this file; it is left unconverted"


class ProcessExecutor:
    """`inputs`: the trees being converted, which a worker must never import from."""

    def __init__(self, processes: int, jobs: Sequence[Job], timeout: float = DEFAULT_TIMEOUT,
                 inputs: Sequence[str] = ()):
        self.processes = max(1, processes)
        self.jobs = list(jobs)
        self._path = worker_sys_path(inputs)
        self._empty_dir: Optional[str] = None  # where workers start, made with the first one
        self.timeout = timeout
        # The worker bounds each file by CPU time and a wall-clock allowance itself; this later
        # deadline is for native code that never returns to Python, where its handlers cannot run.
        self.deadline = wall_allowance(timeout) + 5
        self._ctx = _mp_context()
        self._queue: deque[Task] = deque()
        self._workers: list[_Worker] = []
        self._last: Optional[str] = None

    def submit(self, task: Task) -> None:
        self._queue.append(task)
        self._dispatch()

    def pending(self) -> int:
        return len(self._queue) + sum(1 for w in self._workers if w.task is not None)

    def current(self) -> Optional[str]:
        busy = [w.task.display for w in self._workers if w.task is not None]
        return busy[0] if busy else self._last

    def _dispatch(self) -> None:
        for w in self._workers:
            if not self._queue:
                return
            if w.task is None:
                w.give(self._queue.popleft())
        while self._queue and len(self._workers) < self.processes:
            if self._empty_dir is None:
                self._empty_dir = make_start_dir()
            with interrupts_held():
                w = _Worker(self._ctx, self.jobs, self.timeout, self._path, self._empty_dir)
                self._workers.append(w)
            w.give(self._queue.popleft())

    def poll(self, wait_s: float) -> list[Result]:
        self._dispatch()
        busy = [w for w in self._workers if w.task is not None]
        if not busy:
            return []
        now = time.monotonic()
        deadline = min(w.started for w in busy) + self.deadline
        from multiprocessing.connection import wait

        ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy],
                         timeout=max(0.0, min(wait_s, deadline - now))))
        results: list[Result] = []
        now = time.monotonic()
        for w in busy:
            task = w.task
            assert task is not None
            if w.conn in ready:
                try:
                    results.append(w.conn.recv())
                    w.task, self._last = None, task.display
                    continue
                except (EOFError, OSError):
                    w.process.join(timeout=5)
                    results.append(failed_result(task, _death_reason(w.process)))
            elif w.process.sentinel in ready:
                w.process.join(timeout=5)
                results.append(failed_result(task, _death_reason(w.process)))
            elif now - w.started > self.deadline:
                results.append(failed_result(task, wall_timeout_message(self.timeout)))
            else:
                continue
            self._replace(w)
        self._dispatch()
        return results

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        self._workers.remove(worker)

    def close(self) -> None:
        for w in self._workers:
            if w.task is None:
                try:
                    w.conn.send(None)
                except OSError:
                    pass
        for w in self._workers:
            if w.task is None:
                w.process.join(timeout=2)
            w.kill()
        self._workers.clear()
        self._queue.clear()
        if self._empty_dir is not None:
            import shutil

            shutil.rmtree(self._empty_dir, ignore_errors=True)
            self._empty_dir = None


class InlineExecutor:
    """Converts in this process as files are submitted: no start-up cost and no isolation (a crash
    in LibCST would end the run; convert_task refuses the inputs known to crash it first). For library
    callers, `--jobs 1` runs without a pool and small runs (runner.INLINE_MAX_BYTES). Each file has the
    same CPU-time limit and recursion limit as in a worker."""

    def __init__(self, jobs: Sequence[Job], timeout: float = DEFAULT_TIMEOUT):
        self.jobs = list(jobs)
        self.timeout = timeout
        self._done: list[Result] = []

    def submit(self, task: Task) -> None:
        limit = sys.getrecursionlimit()
        try:
            sys.setrecursionlimit(max(limit, WORKER_RECURSION_LIMIT))
            self._done.append(convert_within(task, self.timeout, *self.jobs[task.group]))
        finally:
            sys.setrecursionlimit(limit)

    def poll(self, wait_s: float) -> list[Result]:
        done, self._done = self._done, []
        return done

    def pending(self) -> int:
        return len(self._done)

    def current(self) -> Optional[str]:
        return None

    def close(self) -> None:
        self._done.clear()


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1

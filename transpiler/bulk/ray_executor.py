"""`--executor ray`: the same conversion fanned out as Ray tasks over a cluster (extra `npu-port[ray]`).

Cluster nodes may not see the driver's files, so each task carries the file's bytes and returns the
outcome and the converted bytes; the driver alone writes. One task per file keeps a crash or a
timeout attributable to its file. Tasks are not retried: a file that kills its worker would kill the
retry too. The rules travel by reference, so the cluster needs npu-port importable: it is shipped
with the job (`py_modules`, the npu_port folder) when the driver joins an existing cluster.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Optional, cast

from npu_port.transpiler.bulk.executors import Job, failed_result
from npu_port.transpiler.bulk.isolation import worker_sys_path
from npu_port.transpiler.bulk.worker import (
    Result,
    Task,
    convert_within,
    raise_recursion_limit,
    wall_allowance,
    wall_timeout_message,
)


def _package_folder(stage: str) -> str:
    """npu_port as one folder for a cluster: the installed package as it is; from a checkout, whose
    sub-packages are its top-level folders, a copy staged under `stage`."""
    import npu_port
    from npu_port import codemods, skeletons, transpiler

    here = os.path.dirname(npu_port.__file__)
    if os.path.isdir(os.path.join(here, "transpiler")):
        return here
    skip = shutil.ignore_patterns("__pycache__")
    dest = os.path.join(stage, "npu_port")
    shutil.copytree(here, dest, ignore=skip)
    for pkg in (transpiler, codemods, skeletons):
        shutil.copytree(os.path.dirname(cast(str, pkg.__file__)), os.path.join(dest, pkg.__name__.rpartition(".")[2]),
                        ignore=skip)
    return dest


def _convert(run, task: Task) -> Result:
    jobs, timeout = run
    raise_recursion_limit()
    # The clocks start when the task runs, not while it waits in the cluster's queue.
    return convert_within(task, timeout, *jobs[task.group])


class RayExecutor:
    def __init__(self, jobs: Sequence[Job], timeout: float, address: Optional[str] = None,
                 inputs: Sequence[str] = ()):
        try:
            import ray
        except ImportError:  # pragma: no cover - depends on the environment
            raise RuntimeError("--executor ray needs Ray: pip install 'npu-port[ray]'") from None
        self._ray = ray
        self._owns = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
            # Ray puts the driver's current folder on its workers' path unless the job has a
            # working_dir: an empty one keeps the workers from importing the tree being converted.
            with tempfile.TemporaryDirectory(prefix="npu-port-ray-") as empty, \
                    tempfile.TemporaryDirectory(prefix="npu-port-ray-code-") as stage:
                runtime_env: dict = {"working_dir": empty}
                if address:
                    runtime_env["py_modules"] = [_package_folder(stage)]
                else:  # local workers run this interpreter: give them this process's clean path
                    runtime_env["env_vars"] = {"PYTHONPATH": os.pathsep.join(worker_sys_path(inputs))}
                ray.init(address=address, runtime_env=runtime_env, **kwargs)
            self._owns = True
        self._remote = ray.remote(max_retries=0, num_cpus=1)(_convert)
        self._job = ray.put((list(jobs), timeout))
        # The task enforces the timeout itself; this later deadline catches hangs in native code,
        # where the alarm cannot interrupt, including some time spent waiting for a free CPU.
        self.timeout = timeout
        self.deadline = wall_allowance(timeout) + 30
        cpus = int(ray.cluster_resources().get("CPU", 1))
        # Enough tasks in flight to keep every CPU busy, few enough that a task's time in flight stays
        # close to its running time (the backstop deadline counts from submission).
        self._window = max(1, cpus + 2)
        self._queue: deque[Task] = deque()
        self._flight: dict = {}  # ObjectRef -> (task, submitted at)
        self._last: Optional[str] = None

    def submit(self, task: Task) -> None:
        self._queue.append(task)
        self._dispatch()

    def pending(self) -> int:
        return len(self._queue) + len(self._flight)

    def current(self) -> Optional[str]:
        return next((t.display for t, _ in self._flight.values()), self._last)

    def _dispatch(self) -> None:
        while self._queue and len(self._flight) < self._window:
            task = self._queue.popleft()
            self._flight[self._remote.remote(self._job, task)] = (task, time.monotonic())

    def poll(self, wait_s: float) -> list[Result]:
        ray = self._ray
        self._dispatch()
        if not self._flight:
            return []
        refs = list(self._flight)
        ready, _ = ray.wait(refs, num_returns=1, timeout=wait_s)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        results: list[Result] = []
        for ref in ready:
            task, _ = self._flight.pop(ref)
            self._last = task.display
            try:
                results.append(ray.get(ref))
            except ray.exceptions.WorkerCrashedError:
                results.append(failed_result(task, "the converter crashed on this file (its Ray worker died); "
                                                   "it is left unconverted"))
            except ray.exceptions.RayError as exc:
                results.append(failed_result(task, f"the Ray task converting this file failed "
                                                   f"({type(exc).__name__}); it is left unconverted"))
        now = time.monotonic()
        for ref, (task, submitted) in list(self._flight.items()):
            if now - submitted > self.deadline:
                ray.cancel(ref, force=True)
                del self._flight[ref]
                results.append(failed_result(task, wall_timeout_message(self.timeout)))
        self._dispatch()
        return results

    def close(self) -> None:
        for ref in self._flight:
            self._ray.cancel(ref, force=True)
        self._flight.clear()
        self._queue.clear()
        if self._owns:
            self._ray.shutdown()

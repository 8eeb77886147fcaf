"""The processes the tool starts never import code from the folder it runs in or the trees it converts.

A Python started with `-c` (as multiprocessing starts its fork server and spawned children) puts the
current folder first on `sys.path`, so a `json.py` or `typing.py` in a repository being converted ran
as soon as a worker started. Workers are therefore started from an empty private folder with an
explicit path, the parent's path less the current folder and the input trees, and each worker sets
that path again before it moves back to the folder the user ran the tool in.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import npu_port
from npu_port.transpiler.core.files import process_alive

# The folder that holds the tool (site-packages, or a checkout the user runs from).
_TOOL_ROOT = os.path.realpath(Path(npu_port.__file__).resolve().parent.parent)


def _real(path: str) -> Optional[str]:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return None


def current_dir() -> Optional[str]:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed under us: nothing there to import either
        return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def worker_sys_path(inputs: Iterable[str] = ()) -> list[str]:
    """This process's `sys.path` without '', the current folder and any entry inside an input tree;
    the interpreter's own folders and the one that holds the tool stay (a virtualenv or a checkout the
    user runs from may lie inside the tree being converted)."""
    here = current_dir()
    here = _real(here) if here else None
    trees = [r for r in (_real(p) for p in inputs) if r]
    # The interpreter's own folders (a virtualenv may well sit inside the tree being converted).
    own = {r for r in (_real(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)) if r}
    path: list[str] = []
    seen: set[str] = set()
    for entry in sys.path:
        real = _real(entry) if entry else None
        if real is None or real in seen:
            continue
        ours = real == _TOOL_ROOT or any(_inside(real, o) for o in own)
        if not ours and (real == here or any(_inside(real, t) for t in trees)):
            continue
        seen.add(real)
        path.append(entry if os.path.isabs(entry) else real)
    if _TOOL_ROOT not in seen:
        path.append(_TOOL_ROOT)  # after the standard library: it can never shadow a standard module
    return path


@contextmanager
def clean_start(path: list[str], empty_dir: str) -> Iterator[None]:
    """Around starting a Python process: `empty_dir` as the current folder (what '' then finds, and
    where a new child first moves), `path` as PYTHONPATH and as this process's path (what children
    are given), restored afterwards. `empty_dir` must outlive the children's start-up."""
    saved_env = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONSAFEPATH")}
    saved_path = sys.path[:]
    here = current_dir()
    os.environ["PYTHONPATH"] = os.pathsep.join(path)
    os.environ["PYTHONSAFEPATH"] = "1"  # Python 3.11+: no '' on the path at all
    sys.path[:] = path
    os.chdir(empty_dir)
    try:
        yield
    finally:
        if here is not None:
            os.chdir(here)
        sys.path[:] = saved_path
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def enter_worker(path: list[str], cwd: Optional[str]) -> None:
    """First thing in a worker: the clean path, then the user's folder for relative file names."""
    sys.path[:] = path
    if cwd is not None:
        os.chdir(cwd)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Around starting a worker and taking it into the pool: Ctrl-C and SIGTERM wait (blocked, not
    lost) until the block ends, and what it starts ignores SIGINT from its very first instruction. A
    signal disposition of SIG_IGN survives exec, and CPython then installs no KeyboardInterrupt handler
    of its own, so the fork server (which imports every rule before it ignores SIGINT itself) and the
    workers it forks never print a traceback for the Ctrl-C a terminal sends the whole process group.
    A worker is in the pool, to be stopped on the way out, before the parent acts on the interrupt."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to hold
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a signal held meanwhile is acted on here


START_PREFIX = "npu-port-start-"
_START_NAME = re.compile(re.escape(START_PREFIX) + r"(\d+)-")


def make_start_dir() -> str:
    """A new empty private folder for workers to start in, named after this process; the folders of
    runs that were killed (whose process is gone) are removed first, so none is left behind for long."""
    import shutil
    import tempfile

    base = tempfile.gettempdir()
    try:
        names = os.listdir(base)
    except OSError:
        names = []
    for name in names:
        m = _START_NAME.match(name)
        if m and int(m.group(1)) != os.getpid() and not process_alive(int(m.group(1))):
            full = os.path.join(base, name)
            try:
                if os.lstat(full).st_uid == os.getuid():
                    shutil.rmtree(full, ignore_errors=True)
            except OSError:
                pass
    return tempfile.mkdtemp(prefix=f"{START_PREFIX}{os.getpid()}-")


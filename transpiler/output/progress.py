"""Where a long run stands: a rich bar on a terminal, a plain line every few seconds in logs, or nothing."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Optional, cast

from npu_port.transpiler.output.console import escape

if TYPE_CHECKING:
    from rich.progress import TaskID

    from npu_port.transpiler.output.console import Console


class Reporter:
    """The interface the runner talks to; this base reports nothing (--quiet, or a single file)."""

    def start(self, total: int) -> None:
        pass

    def advance(self, current: Optional[str]) -> None:
        pass

    def stop(self) -> None:
        pass


class BarReporter(Reporter):
    def __init__(self, console: Console):
        # Imported for a bar only: rich.progress costs a small run (no bar) about 20 ms.
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[bold]converting"), BarColumn(bar_width=20), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("[dim]{task.fields[current]}"),
            console=cast(Any, getattr(console, "rich", console)), transient=True, refresh_per_second=8,  # a bar is rich's
        )
        self._task: Optional[TaskID] = None
        self._started = 0.0

    def start(self, total: int) -> None:
        self._started = time.monotonic()
        self._progress.start()
        self._task = self._progress.add_task("convert", total=total, current="", rate="")

    def advance(self, current: Optional[str]) -> None:
        done = self._progress.tasks[0].completed + 1
        elapsed = max(time.monotonic() - self._started, 1e-6)
        self._progress.update(cast("TaskID", self._task), advance=1, current=escape(_tail(current or "")),
                              rate=f"{done / elapsed:.0f}/s")

    def stop(self) -> None:
        self._progress.stop()


class LineReporter(Reporter):
    """For CI logs and pipes: one line every `interval` seconds, nothing for runs shorter than that."""

    def __init__(self, console: Console, interval: float = 5.0):
        self._console = console
        self._interval = interval
        self._total = self._done = 0
        self._started = self._last = 0.0

    def start(self, total: int) -> None:
        self._total, self._done = total, 0
        self._started = self._last = time.monotonic()

    def advance(self, current: Optional[str]) -> None:
        self._done += 1
        now = time.monotonic()
        if now - self._last < self._interval or self._done == self._total:
            return
        self._last = now
        rate = self._done / max(now - self._started, 1e-6)
        eta = (self._total - self._done) / rate if rate else 0.0
        self._console.print(f"npu-port: {self._done}/{self._total} files ({self._done * 100 // self._total}%), "
                            f"{rate:.0f} files/s, about {eta:.0f}s left; at {escape(current or '')}",
                            highlight=False, soft_wrap=True)


def _tail(path: str, width: int = 28) -> str:
    return path if len(path) <= width else "…" + path[-(width - 1):]


def reporter_for(console: Console, quiet: bool, enabled: bool = True) -> Reporter:
    if quiet or not enabled:
        return Reporter()
    if console.is_terminal:
        return BarReporter(console)
    return LineReporter(console)

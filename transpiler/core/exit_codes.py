"""The exit statuses of every command (README 'Exit codes'): one set, so a script can rely on them."""

from __future__ import annotations

from enum import IntEnum
from typing import NoReturn


class ExitCode(IntEnum):
    OK = 0  # done: nothing failed (check: no errors)
    FAILED = 1  # a file failed, check found errors, an output could not be written
    USAGE = 2  # a usage or configuration error (click's UsageError exits with it too)
    INTERNAL = 2  # a bug of npu-port, reported without a traceback (the same status as USAGE)
    WOULD_CHANGE = 3  # convert --check: something would change
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)


def exit_interrupted() -> NoReturn:
    """Ctrl-C or SIGTERM wherever it lands (an import, click's parsing, a command): one line and exit
    130, never a traceback. Both signals are ignored from here on, so a second one during the exit (the
    interpreter's clean-up of worker pools) cannot print one either."""
    import signal
    import sys

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        sys.stderr.write("npu-port: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    sys.exit(ExitCode.INTERRUPTED)

"""The exit statuses of every command (README 'Exit codes'): one set, so a script can rely on them."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # done: nothing failed (check: no errors)
    FAILED = 1  # a file failed, check found errors, an output could not be written
    USAGE = 2  # a usage or configuration error (click's UsageError exits with it too)
    INTERNAL = 2  # a bug of npu-port, reported without a traceback (the same status as USAGE)
    WOULD_CHANGE = 3  # convert --check: something would change
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)

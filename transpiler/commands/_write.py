"""Writing a command's output file: a destination that cannot be written is a one-line error, not a traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import click

from npu_port.transpiler.core.files import atomic_write


def why_unwritable(path: Path, exc: OSError) -> str:
    """What stands in the way of writing `path`, in words: a parent that is a file (mkdir's 'File exists'
    or 'Not a directory' would say nothing useful), else the system's reason."""
    for parent in Path(path).parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                return f"{parent} is a file, not a folder"
            break
    return exc.strerror or str(exc)


def write_output(path: Path, data: bytes, mode: Optional[int] = None, *, what: str = "") -> None:
    """atomic_write, with any OSError turned into click's error (exit 1) naming `path` and the reason."""
    try:
        atomic_write(path, data, mode)
    except OSError as exc:
        raise click.ClickException(f"cannot write {what + ' ' if what else ''}{path}: "
                                   f"{why_unwritable(path, exc)}") from None

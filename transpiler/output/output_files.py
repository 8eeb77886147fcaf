"""The files a command writes besides converted sources: `--report`, `--summary`, `check -o`
(write_by_rename), and the outputs of weave, generate, standalone and pipeline (write_data).

Reports and summaries are never written over an input, and are written whole by a rename, so a link
at the destination is replaced instead of followed.

A destination is refused when it is, or leads through links to, one of the paths given on the command
line or a source file (Python, shell, YAML, CUDA) under an input folder. Otherwise the text goes to a
temporary file in the destination's folder, which is renamed over it: a reader never sees half a
report, and a link planted there is replaced, not written through. A stream is written as it is
(/dev/stdout, /dev/null, a FIFO; see files.is_stream_output), and a folder or socket is refused.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Optional

import click

from npu_port.transpiler.core.files import (
    TMP_SUFFIX,
    atomic_write,
    is_stream_output,
    language_of,
    needs_head,
    open_stream,
    read_head,
)

SOURCE_LANGUAGES = ("python", "shell", "yaml", "cuda", "notebook", "manifest")


def same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` are the same file or folder: the same path once links are resolved, or the
    same inode (a bind mount, a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def input_clash(dest: Path, inputs: Iterable[Path]) -> Optional[str]:
    """Which input writing `dest` would overwrite, in words (None: none)."""
    real = os.path.realpath(dest)
    for root in inputs:
        if str(root) == "-":
            continue
        if same_file(dest, root):
            return f"the input {root}"
        base = os.path.realpath(root)
        if os.path.isdir(base) and real.startswith(base.rstrip(os.sep) + os.sep) and os.path.isfile(real):
            head = read_head(Path(real)) if needs_head(real) else b""
            if language_of(real, head) in SOURCE_LANGUAGES:
                return f"{real}, a source file under the input {root}"
    return None


def write_by_rename(dest: Path, write: Callable[[Path], None]) -> None:
    """Have `write(path)` write the file at a temporary path with the same name, then rename it over
    `dest` (a link there is replaced; an existing file keeps its mode); missing folders above it are
    created. A stream gets `write(dest)`."""
    if is_stream_output(dest):
        held = open_stream(dest)  # a FIFO with no reader is refused here, not waited on in write()
        try:
            write(dest)
        finally:
            os.close(held)
        return
    import shutil  # with tempfile, bz2 and lzma: only a run that writes a report or summary loads them
    import tempfile

    folder = dest.parent
    folder.mkdir(parents=True, exist_ok=True)  # `--report out/r.json` before out/ exists, as ruff's -o
    tmp_dir = tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=TMP_SUFFIX + "dir", dir=folder)
    try:
        tmp = Path(tmp_dir) / dest.name  # the same name: a writer that goes by the suffix sees it
        write(tmp)
        try:
            st = os.lstat(dest)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def why_unwritable(path: Path, exc: OSError) -> str:
    """What stands in the way of writing `path`, in words: a parent that is a file (mkdir's 'File exists'
    or 'Not a directory' would say nothing useful), else the system's reason."""
    for parent in Path(path).parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                return f"{parent} is a file, not a folder"
            break
    return exc.strerror or str(exc)


def write_data(path: Path, data: bytes, mode: Optional[int] = None, *, what: str = "") -> None:
    """atomic_write, with any OSError turned into click's error (exit 1) naming `path` and the reason."""
    try:
        atomic_write(path, data, mode)
    except OSError as exc:
        raise click.ClickException(f"cannot write {what + ' ' if what else ''}{path}: "
                                   f"{why_unwritable(path, exc)}") from None

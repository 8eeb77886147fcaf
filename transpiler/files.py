"""Finding files, telling their kind, reading them safely and writing atomically."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".npu-port-cache", ".venv", "venv", ".tox", ".nox",
    "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs",
})
SHELL_SUFFIXES = (".sh", ".bash")
YAML_SUFFIXES = (".yaml", ".yml")
DEFAULT_MAX_BYTES = 5 * 1024 * 1024


class ReadError(Exception):
    pass


def language_of(path: str | Path, head: bytes = b"") -> str:
    name = str(path).lower()
    if name.endswith((".py", ".pyi")):
        return "python"
    if name.endswith(SHELL_SUFFIXES):
        return "shell"
    if name.endswith(YAML_SUFFIXES):
        return "yaml"
    if head.startswith(b"#!") and (b"bash" in head[:80] or b"/sh" in head[:80]):
        return "shell"
    return "other"


def walk(root: Path) -> Iterator[Path]:
    """Every file under root in a stable order, skipping tool and VCS folders; never follows links."""
    if not root.is_dir():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath) / name
        # Symlinked folders are not descended into (os.walk lists them in dirnames): report them as files.
        for d in list(dirnames):
            if (Path(dirpath) / d).is_symlink():
                dirnames.remove(d)
                yield Path(dirpath) / d


def read_source(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Read a regular file; FIFOs, devices and oversized files are refused instead of blocking or exhausting memory."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ReadError("not a regular file (FIFO, socket or device)")
    if st.st_size > max_bytes:
        raise ReadError(f"too large ({st.st_size} bytes > limit {max_bytes})")
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror}") from None


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write via a temporary file in the same folder and rename, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".npu-port.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            try:
                mode = stat.S_IMODE(os.stat(path).st_mode)
            except FileNotFoundError:
                mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise

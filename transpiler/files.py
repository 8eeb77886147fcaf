"""Finding files, telling their kind, reading them safely and writing atomically."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Optional

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".npu-port-cache", ".venv", "venv", ".tox", ".nox",
    "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs",
})
SHELL_SUFFIXES = (".sh", ".bash")
YAML_SUFFIXES = (".yaml", ".yml")
CUDA_SUFFIXES = (".cu", ".cuh")
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
TMP_SUFFIX = ".npu-port.tmp"

# LibCST's native parser kills the process (SIGSEGV) somewhere above ~1000 nested brackets and CPython
# itself refuses more than 200 nested parentheses, so no valid file exceeds this and none is parsed.
MAX_BRACKET_DEPTH = 200


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
    if name.endswith(CUDA_SUFFIXES):
        return "cuda"
    if head.startswith(b"#!") and (b"bash" in head[:80] or b"/sh" in head[:80]):
        return "shell"
    return "other"


def needs_head(path: str | Path) -> bool:
    """Only files without a suffix can be shell scripts recognised by their `#!` line."""
    return language_of(path) == "other" and "." not in Path(path).name.lstrip(".")


def read_head(path: Path, size: int = 128) -> bytes:
    """The first bytes of a regular file, never blocking on FIFOs or devices."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return b""
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def walk(root: Path, exclude: Iterable[Path] = ()) -> Iterator[Path]:
    """Every file under root in a stable order, skipping tool and VCS folders and `exclude` (an
    output folder inside the input); never follows links, so link loops cannot trap it."""
    if not root.is_dir() or root.is_symlink():
        yield root
        return
    excluded = {os.path.realpath(p) for p in exclude}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            if d in SKIP_DIRS or os.path.realpath(full) in excluded and not os.path.islink(full):
                continue
            if os.path.islink(full):
                # os.walk lists links to folders as folders; they are entries of their own, not descended.
                filenames.append(d)
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            yield Path(dirpath) / name


def read_source(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Read a regular file; FIFOs, devices and oversized files are refused instead of blocking or exhausting memory."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ReadError("not a regular file (FIFO, socket or device)")
    if st.st_size > max_bytes:
        raise ReadError(f"too large ({st.st_size} bytes > limit {max_bytes}; see --max-bytes)")
    try:
        # O_NONBLOCK: should the file be swapped for a FIFO after the stat, open() still returns.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ReadError("not a regular file (FIFO, socket or device)")
            return fh.read()
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror}") from None


def bracket_depth_exceeds(data: bytes, limit: int = MAX_BRACKET_DEPTH) -> bool:
    """Whether brackets nest deeper than `limit`, counted cheaply over the bracket bytes alone.

    Brackets inside strings and comments count too, so this can only over-estimate: a file it lets
    through is safe for the parser; one it flags is checked again token by token.
    """
    brackets = data.translate(None, _NOT_BRACKETS)
    if brackets.count(b"(") + brackets.count(b"[") + brackets.count(b"{") <= limit:
        return False
    depth = peak = 0
    for b in brackets:
        if b in _OPENERS:
            depth += 1
            if depth > peak:
                peak = depth
        else:
            depth = max(depth - 1, 0)
    if peak <= limit:
        return False
    return _token_depth(data) > limit


_OPENERS = frozenset(b"([{")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"()[]{}")


def _token_depth(data: bytes) -> int:
    """Exact bracket depth from Python's tokenizer (strings and comments excluded)."""
    import io
    import tokenize

    depth = peak = 0
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type == tokenize.OP:
                if tok.string in "([{":
                    depth += 1
                    peak = max(peak, depth)
                elif tok.string in ")]}":
                    depth -= 1
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, LookupError):
        pass  # the parser reports the real error; what was seen so far decides
    return peak


_PY2_PATTERNS = (
    (re.compile(rb"^[ \t]*print[ \t]+(?![ \t]*[=(.,\[+\-*/%<>!&|^])", re.M), "a print statement"),
    (re.compile(rb"^[ \t]*except[ \t][^:\n]*,[ \t]*[A-Za-z_]\w*[ \t]*:", re.M), "`except X, e:`"),
    (re.compile(rb"^[ \t]*exec[ \t]+[\"'A-Za-z_]", re.M), "an exec statement"),
    (re.compile(rb"\b0[0-7]+L?\b|\b\d+L\b"), "a Python 2 number literal"),
)


def python2_hint(data: bytes) -> Optional[str]:
    """Why a file that fails to parse looks like Python 2, if it does."""
    for pattern, what in _PY2_PATTERNS:
        if pattern.search(data):
            return f"looks like Python 2 ({what}); port it to Python 3 first (e.g. with 2to3)"
    return None


def is_within(path: Path, root: Path) -> bool:
    """Whether `path`, its links resolved, lies inside `root` (resolved too)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _temp_beside(path: Path) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, durable: bool = True) -> None:
    """Write via a temporary file in the same folder and rename, so a crash never leaves half a file.

    `durable` also fsyncs before the rename: needed where the previous content is the user's only
    copy (in place); a mirrored output tree can be regenerated, and fsync per file would dominate.
    A link at `path` is replaced, never written through.
    """
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
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
        _unlink_quietly(tmp)
        raise


def atomic_copy(src: Path, dest: Path) -> None:
    """Copy bytes, mode and times (shutil.copy2) through a temporary file and a rename."""
    fd, tmp = _temp_beside(dest)
    os.close(fd)
    try:
        shutil.copy2(src, tmp, follow_symlinks=False)
        os.replace(tmp, dest)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def is_copy_of(src: Path, dest: Path) -> bool:
    """Whether `dest` is already what atomic_copy would make of `src` (a re-run into the same --out):
    a regular file of the same size, mode and modification time to the nanosecond, the check rsync
    trusts by default. Anything else is copied again."""
    try:
        a, b = os.lstat(src), os.lstat(dest)
    except OSError:
        return False
    return (stat.S_ISREG(b.st_mode) and a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns
            and stat.S_IMODE(a.st_mode) == stat.S_IMODE(b.st_mode))


def holds(dest: Path, data: bytes, mode: int) -> bool:
    """Whether `dest` is a regular file with exactly these bytes and mode (nothing to write)."""
    try:
        st = os.lstat(dest)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data) or stat.S_IMODE(st.st_mode) != mode:
            return False
        with open(dest, "rb") as fh:
            return fh.read() == data
    except OSError:
        return False


def copy_link(src: Path, dest: Path) -> None:
    """Recreate the link itself (its target text unchanged), never what it points to."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}{TMP_SUFFIX}")
    _unlink_quietly(tmp)
    os.symlink(os.readlink(src), tmp)
    try:
        os.replace(tmp, dest)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _unlink_quietly(path: str | Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

"""Finding files, telling their kind, reading them safely and writing atomically."""

from __future__ import annotations

import errno
import itertools
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Optional

from npu_port.transpiler.core.report import Language

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".npu-port-cache", ".venv", "venv", ".tox", ".nox",
    "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs",
})
# Batch scripts are shell scripts too: Slurm's sbatch, PBS/Torque's qsub (their #SBATCH / #PBS lines are
# comments to the shell).
SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".pbs")
# Suffixes of files that are never scripts: their first bytes are not read for a `#!` line.
_NOT_SCRIPTS = frozenset({
    ".md", ".rst", ".txt", ".json", ".jsonl", ".csv", ".tsv", ".toml", ".cfg", ".ini", ".lock", ".html", ".htm",
    ".css", ".js", ".ts", ".tsx", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".pdf", ".ipynb", ".pyc", ".so",
    ".o", ".a", ".gz", ".zip", ".tar", ".bz2", ".xz", ".whl", ".pt", ".pth", ".bin", ".safetensors", ".npy", ".npz",
    ".pkl", ".parquet", ".arrow", ".c", ".cc", ".cpp", ".h", ".hpp", ".java", ".go", ".rs", ".proto", ".xml",
    ".mp4", ".wav", ".ttf", ".woff", ".woff2", ".onnx", ".model", ".tiktoken", ".log",
})
YAML_SUFFIXES = (".yaml", ".yml")
CUDA_SUFFIXES = (".cu", ".cuh")
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
TMP_SUFFIX = ".npu-port.tmp"

# LibCST's native parser kills the process (SIGSEGV) somewhere above ~1000 nested brackets and CPython
# itself refuses more than 200 nested parentheses, so no valid file exceeds this and none is parsed.
MAX_BRACKET_DEPTH = 200


class ReadError(Exception):
    """An input that cannot be read as text: the message says why, without the file's name (the caller
    names it)."""


class DecodeError(ReadError):
    """Bytes that are not text in their encoding; `line` (1-based) holds the first bad byte."""

    def __init__(self, message: str, line: int = 1):
        super().__init__(message)
        self.line = line


# The one wording of each reason an input is not source text.
NUL_BYTES = "binary file (contains NUL bytes), not source text"
NOT_REGULAR = "not a regular file (FIFO, socket or device)"


def too_large(size: int, limit: int, flag: Optional[str] = "--max-bytes") -> str:
    return f"too large ({size} bytes > limit {limit}{f'; see {flag}' if flag else ''})"


def decode_problem(exc: UnicodeDecodeError) -> str:
    """`cannot decode: not UTF-8 text (byte N: why)`; an encoding other than UTF-8 is the one a Python
    coding line declared."""
    if exc.encoding.lower().replace("_", "-") in ("utf-8", "utf8", "utf-8-sig"):
        what = "UTF-8 text"
    else:
        what = f"{exc.encoding} text as its coding line declares"
    return f"cannot decode: not {what} (byte {exc.start}: {exc.reason})"


# Control characters (C0, DEL, C1): in a file name they would reach the terminal as escape sequences
# (a window title, a cleared screen) or forge lines of a report (a newline), so every name is printed
# with them escaped, in every format.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _escaped(match: re.Match) -> str:
    return repr(match.group())[1:-1]  # \n, \t, \x1b: as Python writes them


def encodable(text: str) -> str:
    """`text` as it can be stored as UTF-8: the bytes of a file name that is not UTF-8 (which Python holds as
    surrogates) shown as \\xff; for whole documents (a summary), whose lines stay lines."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate of another kind
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def printable(text: str) -> str:
    """A name (a path, a file name) as it can be printed and stored: `encodable`, and its control characters
    escaped (\\x1b, \\n), so reports, diffs and summaries always encode and never drive a terminal or
    forge a line."""
    shown = encodable(text)
    return _CONTROL.sub(_escaped, shown) if _CONTROL.search(shown) else shown


def language_of(path: str | Path, head: bytes = b"") -> Language:
    name = str(path).lower()
    if name.endswith((".py", ".pyi")):
        return "python"
    if name.endswith(SHELL_SUFFIXES):
        return "shell"
    if name.endswith(YAML_SUFFIXES):
        return "yaml"
    if name.endswith(CUDA_SUFFIXES):
        return "cuda"
    if name.endswith(".ipynb"):
        return "notebook"
    if is_manifest(name):
        return "manifest"
    if head.startswith(b"#!") and (b"bash" in head[:80] or b"/sh" in head[:80]):
        return "shell"
    return "other"


def is_manifest(name: str) -> bool:
    """A dependency list or a build or container recipe (lower-case `name`): requirements*.txt,
    constraints*.txt, pyproject.toml, setup.cfg, Dockerfile / Containerfile (also `Dockerfile.dev`,
    `gpu.dockerfile`), any .txt in a `requirements/` folder, a Makefile (`Makefile`, `GNUmakefile`,
    `makefile.in`, `*.mk`: its recipes install and build)."""
    parts = name.replace("\\", "/").rsplit("/", 2)
    base, folder = parts[-1], parts[-2] if len(parts) > 1 else ""
    return ((base.endswith(".txt") and ("requirements" in base or base.startswith("constraints")
                                        or folder == "requirements"))
            or (base.startswith("pyproject") and base.endswith(".toml")) or base == "setup.cfg"
            or base.startswith(("dockerfile", "containerfile")) or base.endswith(".dockerfile")
            or is_makefile(base))


def is_makefile(base: str) -> bool:
    """A make file, by its lower-case base name."""
    return base in ("makefile", "gnumakefile") or base.startswith("makefile.") or base.endswith(".mk")


def needs_head(path: str | Path) -> bool:
    """Whether a file may be a shell script known only by its `#!` line: one of no known kind whose suffix
    (if any) is not one of a data, document or source file of another language (`train`, `run.job`,
    `launch.cmd`)."""
    if language_of(path) != "other":
        return False
    name = Path(path).name.lstrip(".").lower()
    return "." not in name or "." + name.rsplit(".", 1)[1] not in _NOT_SCRIPTS


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
            if not name.endswith(TMP_SUFFIX):  # a killed run's half-written output, never an input
                yield Path(dirpath) / name


def empty_folders(root: Path, exclude: Iterable[Path] = ()) -> Iterator[Path]:
    """The folders under `root` that hold nothing at all (a placeholder such as VERL's `recipe/`), in
    the order `walk` visits them, with the same folders skipped; links are never followed."""
    if not root.is_dir() or root.is_symlink():
        return
    excluded = {os.path.realpath(p) for p in exclude}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if not dirnames and not filenames and dirpath != str(root):
            yield Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d))
                             and os.path.realpath(os.path.join(dirpath, d)) not in excluded)


def read_source(path: Path, max_bytes: int = DEFAULT_MAX_BYTES, flag: Optional[str] = "--max-bytes") -> bytes:
    """Read a regular file; FIFOs, devices and oversized files are refused (ReadError) instead of blocking
    or exhausting memory. `flag`: the option that sets `max_bytes`, named when a file is too large."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ReadError(NOT_REGULAR)
    if st.st_size > max_bytes:
        raise ReadError(too_large(st.st_size, max_bytes, flag))
    try:
        # O_NONBLOCK: should the file be swapped for a FIFO after the stat, open() still returns.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ReadError(NOT_REGULAR)
            return fh.read()
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror}") from None


def decode_text(data: bytes, *, bom: bool = False) -> str:
    """UTF-8 bytes as text (with `bom`, a leading byte-order mark, as Windows editors write it, is
    dropped); DecodeError otherwise."""
    try:
        return data.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        raise _not_text(data, exc) from None


def _not_text(data: bytes, exc: UnicodeDecodeError) -> DecodeError:
    return DecodeError(decode_problem(exc), data.count(b"\n", 0, exc.start) + 1)


def read_text(path: Path, max_bytes: int = DEFAULT_MAX_BYTES, *, bom: bool = False,
              flag: Optional[str] = "--max-bytes") -> str:
    """read_source, then decode_text: a regular UTF-8 file's text, or ReadError (DecodeError) saying why not."""
    return decode_text(read_source(path, max_bytes, flag), bom=bom)


def source_text(data: bytes, language: Language) -> str:
    """`data` as text, or ReadError saying why it is no source text: NUL bytes (a binary file), or bytes
    not valid in its encoding, UTF-8 or, for Python, the one its coding line declares (for Python the
    check is what counts: the parser decodes the file itself)."""
    if b"\x00" in data:
        raise ReadError(NUL_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if language != "python":
            raise _not_text(data, exc) from None
        utf8_error = _not_text(data, exc)
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise ReadError(f"cannot decode: {exc}") from None
    if encoding in ("utf-8", "utf-8-sig"):
        raise utf8_error
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise _not_text(data, exc) from None
    except LookupError as exc:
        raise ReadError(f"cannot decode: {exc}") from None


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


def too_deep_for_this_process(data: bytes) -> bool:
    """Whether parsing `data` with LibCST could crash the process that does it (for parses outside the
    isolated workers: stdin, `check` with one job, small inline runs).

    Past about 3,000 levels of attribute chains, calls, unary operators and the like, LibCST's
    native parser overflows the C stack (SIGSEGV), where CPython's own parser, guarded, raises
    RecursionError from about 3,000 on: no such file compiles, so asking CPython first loses nothing.
    A syntax error is left to LibCST, which reports it with its position."""
    return parse_refusal(data) is not None


# LibCST nests every binary and boolean operator (CPython's ast keeps `a and b and ...` flat), and
# its cost grows faster than the chain: 1,000 terms of `a + ...` take 0.6 s of CPU, 2,000 take 1.9 s,
# 2,900 take 10 s, 10,000 `and`s crash its native parser. Real code stays far below this: the longest
# chain in VERL, trl, LLaMA-Factory and vllm-ascend has 47 operators.
MAX_EXPRESSION_OPERATORS = 2000

# Bytes that can spell a nesting operator (binary, unary `-+~`, shifts), counted in one C-speed pass
# (bytes.translate) over a statement's text, with the substrings of the word operators: an upper
# bound on the operators a chain in that text can have.
_NOT_OPERATOR_BYTES = bytes(b for b in range(256) if b not in b"+-*/%@<>&|^~")
_OPERATOR_WORDS = (b"and", b"or", b"not", b"else")


def _operator_bound(text: bytes) -> int:
    return len(text.translate(None, _NOT_OPERATOR_BYTES)) + sum(text.count(w) for w in _OPERATOR_WORDS)


MAX_DEPTH_MESSAGE = "nested too deeply for the parser (Python itself cannot compile it)"


def parse_refusal(data: bytes) -> Optional[str]:
    """Why `data` must not be handed to LibCST's parser, or None: brackets nested past what any
    compiler accepts, code CPython's own parser finds too deep (RecursionError), or one expression
    with more than MAX_EXPRESSION_OPERATORS operators. The bound is in the input (a count of tokens
    and nodes), never a clock: each check is linear in the file and stops before LibCST sees it."""
    if bracket_depth_exceeds(data):
        return f"brackets nested too deeply for the parser (more than {MAX_BRACKET_DEPTH} levels)"
    import ast
    import sys
    import warnings

    # The user's Python compiles with the default limit; workers raise theirs, which would let ast
    # go as deep as LibCST cannot.
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(_DEFAULT_RECURSION_LIMIT)
        with warnings.catch_warnings():  # "\d" in a string: Python's concern, not a reason to print
            warnings.simplefilter("ignore")
            tree = ast.parse(data)
    except (RecursionError, MemoryError):
        return MAX_DEPTH_MESSAGE
    except (SyntaxError, ValueError):
        return None  # LibCST reports the error with its position
    finally:
        sys.setrecursionlimit(limit)
    _last_parse[:] = [data, tree]
    found = longest_expression(tree, data)
    if found[0] > MAX_EXPRESSION_OPERATORS:
        return (f"expression too long for the parser ({found[0]} operators in one expression at line {found[1]}; "
                f"the limit is {MAX_EXPRESSION_OPERATORS})")
    return None


# The tree parse_refusal built, for the conversion of the same file that follows it (its statement
# positions, analysis/locations, read it instead of parsing again): handed over once, to a caller
# holding the very bytes it was parsed from.
_last_parse: list = [None, None]


def parsed_tree(data: bytes):
    """The `ast` tree parse_refusal built from this `data` object, or None."""
    if _last_parse[0] is not data:
        return None
    tree = _last_parse[1]
    _last_parse[:] = [None, None]
    return tree


def longest_expression(tree, data: bytes, limit: int = MAX_EXPRESSION_OPERATORS) -> tuple[int, int]:
    """(operators, line) of an expression of `tree` (parsed from `data`) with the most operators in one
    connected chain of binary, boolean, unary and conditional operators (the ones LibCST nests), where
    that is more than `limit`; else some count up to `limit`.

    Walking every expression node in Python would cost a tenth of the parse, so the text of a
    statement is measured first (_operator_bound): only one with more than `limit` operator bytes and
    words can hold such a chain, and only its own expressions are walked; its nested statements are
    measured the same way."""
    import ast
    from itertools import accumulate

    if _operator_bound(data) <= limit:
        return 0, 0
    starts = [0, *accumulate(len(line) + 1 for line in data.split(b"\n"))]  # offset of line i + 1 at [i]

    def text_of(stmt: ast.AST) -> bytes:
        first, last = stmt.lineno, getattr(stmt, "end_lineno", None) or stmt.lineno  # type: ignore[attr-defined]
        return data[starts[first - 1]:starts[min(last, len(starts) - 1)]]

    best = (0, 0)
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.excepthandler)):
                if _operator_bound(text_of(child)) > limit:
                    stack.append(child)
            elif isinstance(child, ast.match_case):
                stack.append(child)
            else:
                found = _longest_chain(child)
                if found[0] > best[0]:
                    best = found
    return best


_CHAIN_NODES: tuple[type, ...] = ()


def _longest_chain(root) -> tuple[int, int]:
    """(operators, line) of the longest operator chain in the expression tree under `root`.
    Comparisons do not count: LibCST keeps `a < b < c` flat, as CPython does."""
    import ast

    global _CHAIN_NODES
    if not _CHAIN_NODES:
        _CHAIN_NODES = (ast.BinOp, ast.BoolOp, ast.UnaryOp, ast.IfExp)
    best = (0, 0)
    # Each entry: a node and the chain it belongs to ([operators, line], shared by the whole chain),
    # or None outside any chain. Iterative: a chain of thousands must not recurse.
    stack: list[tuple[ast.AST, Optional[list[int]]]] = [(root, None)]
    while stack:
        node, chain = stack.pop()
        if isinstance(node, _CHAIN_NODES):
            if chain is None:
                chain = [0, getattr(node, "lineno", 0)]
            chain[0] += len(node.values) - 1 if isinstance(node, ast.BoolOp) else 1
            if chain[0] > best[0]:
                best = (chain[0], chain[1])
        else:
            chain = None
        stack.extend((child, chain) for child in ast.iter_child_nodes(node))
    return best


_DEFAULT_RECURSION_LIMIT = 1000


def yaml_too_deep(text: str) -> bool:
    """Whether libyaml refuses `text` for its nesting (more than 1000 levels). It tells in milliseconds
    what the pure-Python YAML parsers (PyYAML's, ruamel's) find only after seconds of scanning, as a
    RecursionError a few hundred levels down: nothing they accept is refused. False without libyaml and
    for any other problem, which the caller's own parser reports."""
    if text.count("[") + text.count("{") <= 1000 and text.count("\n") <= 1000:
        return False  # too few openers and lines to nest 1000 levels
    try:
        import yaml

        loader = yaml.CSafeLoader
    except (ImportError, AttributeError):
        return False
    try:
        for _ in yaml.parse(text, Loader=loader):
            pass
    except yaml.YAMLError as exc:
        return "maximum nesting depth" in str(getattr(exc, "problem", ""))
    return False


# Past this many nodes, counting each alias as the nodes it stands for, a document is refused when
# its aliases multiply it more than tenfold: a "billion laughs" file (each anchor a list of aliases of
# the one before) expands nine levels of nine into 387 million, which any walk of the loaded document
# would go through. A document without aliases is never refused here (--max-bytes bounds it).
MAX_YAML_EXPANDED_NODES = 100_000


def yaml_alias_bomb(text: str, limit: int = MAX_YAML_EXPANDED_NODES) -> Optional[str]:
    """Why `text` must not be loaded, when its aliases expand it past `limit` nodes (and tenfold);
    None otherwise, and for text the parser refuses (the caller's own parser reports that).

    Counted over the parser's events, before anything is composed: an alias adds the size of the
    node its anchor names, so the count is exact and costs one pass over the text (libyaml's C parser
    where it is installed, PyYAML's own otherwise)."""
    if "&" not in text or "*" not in text:
        return None  # no anchor or no alias: nothing to expand
    try:
        import yaml
    except ImportError:
        return None
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    sizes: dict[str, int] = {}  # anchor -> nodes it stands for
    open_nodes: list[list] = []  # per open collection: [nodes in it so far, its anchor]
    nodes = expanded = 0  # nodes written out; nodes with each alias counted as its anchor's
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                open_nodes.append([1, event.anchor])
                nodes += 1
                expanded += 1
                continue
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                size, name = open_nodes.pop()
            elif isinstance(event, yaml.ScalarEvent):
                size, name = 1, event.anchor
                nodes += 1
                expanded += 1
            elif isinstance(event, yaml.AliasEvent):
                size, name = sizes.get(event.anchor or "", 1), None
                nodes += 1
                expanded += size
                if expanded > max(limit, 10 * nodes):
                    return (f"YAML aliases expand to more than {limit:,} nodes (each alias counted as the "
                            "nodes it stands for: a 'billion laughs' document); refused before loading")
            else:
                continue
            if name is not None:
                sizes[name] = size
            if open_nodes:
                open_nodes[-1][0] += size
    except yaml.YAMLError:
        return None
    return None


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


class NotReplaceable(OSError):
    """An output path holds something that must not be replaced: a folder, a device, a socket."""

    def __init__(self, path: Path, what: str):
        super().__init__(errno.EEXIST, f"{path} is {what}; it is never replaced (choose another output)")


class ChangedMeanwhile(OSError):
    def __init__(self, path: Path):
        super().__init__(errno.EAGAIN, f"{path} changed while it was being converted; it is left as it is "
                                       "(run again to convert the new content)")


def _is_system_link(path: Path) -> bool:
    """/dev/stdout, /dev/fd/N, /proc/self/fd/N: links that stand for a stream, whatever they point to."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    return folder == "/dev" or folder.startswith(("/dev/", "/proc/"))


def is_stream_output(path: Path, streams: bool = True) -> bool:
    """Whether `path` is a stream to write through (True) or something to create or replace atomically
    (False): a regular file, nothing yet, or a link (replaced, never written through). Raises for what
    must never be replaced: a folder, a block device, a socket, and streams where `streams` is False
    (a FIFO in an output tree would block the run forever)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        try:
            target = os.stat(path).st_mode
        except OSError:
            return False
        if not (_is_system_link(path) or stat.S_ISCHR(target) or stat.S_ISFIFO(target)):
            return False  # an ordinary link: replaced by the new file
        if streams:
            return True
        raise NotReplaceable(path, "a link to a stream")
    if stat.S_ISREG(mode):
        return False
    if (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)) and streams:
        return True
    what = ("a folder" if stat.S_ISDIR(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a block device" if stat.S_ISBLK(mode) else "a socket")
    raise NotReplaceable(path, what)


class NoReader(OSError):
    """A FIFO named as an output that no process is reading: writing would wait for ever."""

    def __init__(self, path: Path):
        super().__init__(errno.ENXIO, f"{path} is a FIFO that no process is reading; start its reader first")


def open_stream(path: Path) -> int:
    """A descriptor for writing to the stream `path` (is_stream_output). O_APPEND: /dev/stdout
    redirected to a file keeps what was written to it before. O_NONBLOCK: a FIFO without a reader fails
    at once (NoReader) instead of blocking in open(), where no signal stops it; once open, writes block
    again as usual, so a slow reader gets everything."""
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise NoReader(path) from None
        raise
    os.set_blocking(fd, True)
    return fd


def _write_stream(path: Path, data: bytes) -> None:
    with os.fdopen(open_stream(path), "wb") as fh:
        fh.write(data)


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new file beside `path`, open for writing, of this tool's temporary name pattern: the folder is
    made (and swept of stale temporary files) at its first file, and the name is unique to this process
    and call (created exclusively, never opened through a link), so no random name is drawn per file."""
    folder = str(path.parent)
    for _ in range(100):
        if folder not in _READY:
            path.parent.mkdir(parents=True, exist_ok=True)
            _remove_stale_temps(folder)
            _READY.add(folder)
        tmp = os.path.join(folder, f".{path.name}.{os.getpid()}.{next(_TEMP_NUMBERS)}{TMP_SUFFIX}")
        try:
            return os.open(tmp, _CREATE_FLAGS, 0o600), tmp
        except FileExistsError:
            continue  # left by a killed process that had this pid: the next number
        except FileNotFoundError:
            _READY.discard(folder)  # removed since it was made: made again
    raise FileExistsError(errno.EEXIST, "no free temporary name", folder)


_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                 | getattr(os, "O_BINARY", 0))
_TEMP_NUMBERS = itertools.count()
_READY: set[str] = set()  # folders this process made (or found) and swept
_TEMP_NAME = re.compile(r"\..+\.(\d+)\.[^.]+" + re.escape(TMP_SUFFIX) + "$")


def _remove_stale_temps(folder: str) -> None:
    """A run killed between writing a temporary file and its rename (SIGKILL) leaves it behind; the first
    write of a later run into the folder removes those whose process is gone. Only names of this tool's
    own pattern are touched, and never one of a process still running."""
    try:
        names = [n for n in os.listdir(folder) if n.endswith(TMP_SUFFIX)]
    except OSError:
        return
    for name in names:
        m = _TEMP_NAME.match(name)
        if m and int(m.group(1)) != os.getpid() and not process_alive(int(m.group(1))):
            _unlink_quietly(os.path.join(folder, name))


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process, or a number we cannot ask about: leave its file
    return True


def _keep_owner(tmp: str, path: Path) -> None:
    """Replacing a file as root must not hand it to root: the new file keeps the old one's owner."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) and hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:
            pass  # not permitted (not root): the file is ours then, as it would be for any editor


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, durable: bool = True,
                 streams: bool = True, expect: Optional[bytes] = None) -> None:
    """Write via a temporary file in the same folder and rename, so a crash never leaves half a file.

    `durable` also fsyncs before the rename: needed where the previous content is the user's only
    copy (in place); a mirrored output tree can be regenerated, and fsync per file would dominate.
    A link at `path` is replaced, never written through, except the system's stream links
    (/dev/stdout, /dev/fd/N); a character device or FIFO named as the output (`-o /dev/null`) is
    written to, never replaced (`streams=False` refuses them); a folder, block device or socket is
    refused. `expect`: the content `path` must still have just before the rename, else
    ChangedMeanwhile (an edit saved while the file was converted is never lost). The replaced file's
    owner and mode are kept.
    """
    if is_stream_output(path, streams):
        _write_stream(path, data)
        return
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
        _keep_owner(tmp, path)
        if expect is not None and _current_bytes(path) != expect:
            raise ChangedMeanwhile(path)
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _current_bytes(path: Path) -> Optional[bytes]:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def atomic_copy(src: Path, dest: Path, *, streams: bool = False) -> None:
    """Copy bytes, mode and times (as shutil.copy2, less extended attributes) through a temporary file
    and a rename; a device or FIFO in the way is refused (in an output tree) or, with `streams`,
    written to."""
    if is_stream_output(dest, streams):
        _write_stream(dest, read_source(src, max_bytes=1 << 62))
        return
    fd, tmp = _temp_beside(dest)
    try:
        try:
            _copy_into(src, fd, tmp)
        finally:
            os.close(fd)
        os.replace(tmp, dest)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _copy_into(src: Path, fd: int, tmp: str) -> None:
    """shutil.copy2's bytes, mode and times (not its extended attributes) from `src` into the open
    file `fd` (named `tmp`), through the descriptors: about half the system calls, which a tree of
    files copied one by one pays a thousand times. What is no longer a regular file when it is opened
    (a link, a FIFO put there meanwhile) is refused: a link is never followed, a FIFO never waited on."""
    source = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(source)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file any more", str(src))
        while True:
            chunk = os.read(source, 1 << 20)
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
    finally:
        os.close(source)
    target: int | str = fd if os.chmod in os.supports_fd else tmp
    os.chmod(target, stat.S_IMODE(st.st_mode))
    os.utime(fd if os.utime in os.supports_fd else tmp, ns=(st.st_atime_ns, st.st_mtime_ns))


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
    is_stream_output(dest, streams=False)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.link{TMP_SUFFIX}")
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

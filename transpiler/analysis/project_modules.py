"""What the converted project itself defines: a fork of a framework (a VERL fork, an old VERL release) may lack
a helper module that upstream has, and a name the output imports from it must exist in the tree being
converted, not only in the upstream snapshot.

Read from the project's files (never imported or run): a module is found beside the package the converted
file belongs to, and a name counts as defined where that module binds it at its top level (a def, a class,
an assignment or an import).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Optional, TypeVar

from npu_port.transpiler.core.files import ReadError, read_text

# A top-level binding of a name: `def name`, `class name`, `name =`, `name: T =`, or an import that binds it.
_BINDING = r"^(?:(?:async\s+)?def\s+{0}\b|class\s+{0}\b|{0}\s*[:=]|(?:from\s+\S+\s+)?import\b[^\n#]*\b{0}\b)"


@lru_cache(maxsize=64)
def _package_root(folder: str, top: str) -> Optional[str]:
    """The folder holding the outermost package named `top` that `folder` lies in, or None."""
    found = None
    here = folder
    while True:
        if os.path.basename(here) == top and os.path.isfile(os.path.join(here, "__init__.py")):
            found = os.path.dirname(here)
        parent = os.path.dirname(here)
        if parent == here:
            return found
        here = parent


def _module_file(root: str, module: str) -> Optional[tuple[str, str, str]]:
    """(path, text, digest) of `module` under `root` (a module file or a package's __init__.py), or None."""
    base = os.path.join(root, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        found = _current(candidate)
        if found is not None:
            return candidate, found[0], found[1]
    return None


def _current(path: str) -> Optional[tuple[str, str]]:
    """(text, digest) of the file as it is now, or None: remembered while its stat says it is unchanged (a
    process may convert the same tree twice, as the tests and a library user do)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _read(path, st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


@lru_cache(maxsize=512)
def _read(path: str, *stat_key: int) -> Optional[tuple[str, str]]:
    try:
        text = read_text(path)  # type: ignore[arg-type]
    except (ReadError, OSError):
        return None
    return text, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# What the file being converted read of other files of its project, path -> digest of the text read: a
# result that depends on them is valid only while they are unchanged (the cache checks them: bulk/cache).
_reads: Optional[dict[str, str]] = None


@contextmanager
def recording_reads() -> Iterator[dict[str, str]]:
    """Collect, into the dict it yields, every project file read while the block runs."""
    global _reads
    outer, _reads = _reads, {}
    try:
        yield _reads
    finally:
        _reads = outer


def record_reads(reads) -> None:
    """Count these (path, digest) pairs as read by the file being converted (recording_reads)."""
    if _reads is not None:
        _reads.update(reads)


_T = TypeVar("_T")
Remembered = dict[Hashable, tuple[Any, tuple[tuple[str, str], ...]]]


def remembered(store: Remembered, key: Hashable, compute: Callable[[], _T], limit: int = 512) -> _T:
    """compute() once per key, reused while every project file it read is unchanged; the files behind a remembered
    answer count as read by every file that asks (recording_reads), so a cached result is checked against them."""
    known = store.get(key)
    if known is None or any(digest_of_read(p) != d for p, d in known[1]):
        with recording_reads() as reads:
            value = compute()
        known = store[key] = (value, tuple(reads.items()))
        if len(store) > limit:
            store.pop(next(iter(store)))
    record_reads(known[1])
    return known[0]


def module_text(root: str, module: str) -> Optional[str]:
    """The text of the project's `module` under `root`, recorded as read (recording_reads)."""
    found = _module_file(root, module)
    if _reads is not None:
        base = os.path.join(root, *module.split("."))
        # A miss is recorded too (as the first place it would be): a module added later changes the answer.
        _reads[found[0] if found else base + ".py"] = found[2] if found else ""
    return found[1] if found else None


def digest_of_read(path: str) -> str:
    """What recording_reads would record for `path` now ("" for a file that is not there; for a folder,
    written with a trailing separator, the digest of its sorted listing)."""
    if path.endswith(os.sep):
        return _listing(path)[1]
    found = _current(path)
    return found[1] if found is not None else ""


def _listing(folder: str) -> tuple[list[str], str]:
    """The sorted entries of `folder` (ending in a separator) and their digest ("" where it is not a folder)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return [], ""
    return names, hashlib.blake2b("\0".join(names).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# torch_npu imported only where it is installed: inside a function, a `try` or an `if` (an indented import), or
# looked up by name (`find_spec("torch_npu")`, `import_module("torch_npu")`).
_LAZY_TORCH_NPU = re.compile(r"""^[ \t]+(?:import[ \t]+torch_npu\b|from[ \t]+torch_npu\b)"""
                             r"""|\b(?:find_spec|import_module)\(\s*["']torch_npu["']""", re.M)
_SCAN_LIMIT = 5000  # files of one package read for it, at most


def lazy_torch_npu_loader(path: str) -> Optional[str]:
    """Where the package the file `path` belongs to loads torch_npu only where it is installed ("file:line",
    the first found: accelerate's `is_npu_available()`, ms-swift's NPU patches), or None: a library that must
    keep importing on GPU and CPU hosts. Only a module of a package (its folder has an __init__.py) asks; the
    whole outermost package is read, in order, up to the first such import."""
    if not path or path.startswith("<"):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isfile(os.path.join(folder, "__init__.py")):
        return None
    while os.path.isfile(os.path.join(os.path.dirname(folder), "__init__.py")):
        folder = os.path.dirname(folder)
    return remembered(_LOADERS, folder, lambda: _lazy_loader(folder))


_LOADERS: Remembered = {}


def _lazy_loader(folder: str) -> Optional[str]:
    for full, text in python_files(folder, packages_only=True):
        m = _LAZY_TORCH_NPU.search(text) if "torch_npu" in text else None
        if m is not None:
            return f"{os.path.relpath(full, os.path.dirname(folder))}:{text.count(chr(10), 0, m.start()) + 1}"
    return None


# Not the project's own code (build output, installed packages) or not what reads its settings (tests, fixtures).
_SKIPPED_FOLDERS = frozenset({"node_modules", "site-packages", "build", "dist", "__pycache__", "tests", "test",
                              "fixtures"})


def python_files(folder: str, packages_only: bool = False) -> Iterator[tuple[str, str]]:
    """(path, text) of the Python files under `folder`, breadth first in name order (into packages only, or
    into every folder but hidden ones, build output and tests), at most _SCAN_LIMIT. Every file read and every
    folder listed is recorded (recording_reads): a module added or changed later changes what a scan found."""
    read = 0
    pending = [folder]
    while pending and read < _SCAN_LIMIT:
        here = pending.pop(0)
        names, digest = _listing(here + os.sep)
        if _reads is not None:
            _reads[here + os.sep] = digest
        for name in names:
            full = os.path.join(here, name)
            if name.endswith(".py"):
                found = _current(full)
                read += 1
                if _reads is not None:
                    _reads[full] = found[1] if found else ""
                if found is not None:
                    yield full, found[0]
            elif os.path.isfile(os.path.join(full, "__init__.py")) if packages_only else (
                    not name.startswith(".") and name not in _SKIPPED_FOLDERS and os.path.isdir(full)):
                pending.append(full)


def project_folders(path: str) -> list[str]:
    """Where the project the file `path` lies in keeps its code, nearest first: the nearest folder above it, up to
    four levels, that holds a Python package (a config folder's project; a snapshot without its .git), then the
    nearest with a project marker (.git, setup.py, pyproject.toml, setup.cfg); [] for neither."""
    if not path or path.startswith("<") or not os.path.dirname(path):
        return []  # (a bare name, text given without its place on disk, has no project around it)
    here = os.path.dirname(os.path.abspath(path))
    found: list[str] = []
    for level in range(64):
        if level < 4 and not found:
            try:
                if any(os.path.isfile(os.path.join(here, n, "__init__.py")) for n in os.listdir(here)):
                    found.append(here)
            except OSError:
                pass
        if any(os.path.exists(os.path.join(here, m)) for m in PROJECT_MARKERS):
            return found + [here] if here not in found else found
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return found


def package_root(path: str, top: str) -> Optional[str]:
    """The folder holding the outermost package named `top` that the file `path` lies in, or None."""
    if not path or path.startswith("<"):
        return None
    return _package_root(os.path.dirname(os.path.abspath(path)), top)


_SUBMODULE_PATH = re.compile(r"^\s*path\s*=\s*(\S+)\s*$", re.M)
PROJECT_MARKERS = (".git", "setup.py", "pyproject.toml", "setup.cfg")  # a project's root folder has one


def _submodules(folder: str) -> list[str]:
    """The paths .gitmodules in `folder` gives its submodules ([] without one)."""
    try:
        with open(os.path.join(folder, ".gitmodules"), encoding="utf-8", errors="replace") as f:
            return _SUBMODULE_PATH.findall(f.read(65536))
    except OSError:
        return []


@lru_cache(maxsize=256)
def _holds_package_above(folder: str, top: str) -> bool:
    here = folder
    while True:
        if os.path.isfile(os.path.join(here, top, "__init__.py")) or (
                os.path.basename(here) == top and os.path.isfile(os.path.join(here, "__init__.py"))):
            return True
        if any(p.rstrip("/").rsplit("/", 1)[-1] == top for p in _submodules(here)):
            return True
        if any(os.path.exists(os.path.join(here, marker)) for marker in PROJECT_MARKERS):
            return False  # the project's root: what lies above is another project
        parent = os.path.dirname(here)
        if parent == here:
            return False
        here = parent


def in_checkout_of(path: str, top: str) -> bool:
    """Whether the file `path` lies in a checkout of the project whose package is `top`: in that package, or
    beside it (its tests, examples and recipes, which import the checkout's own package, not a release), or
    in a project that carries it as a git submodule (`path = verl` in .gitmodules: RAGEN builds on the VERL
    commit it pins so, and a snapshot may hold the submodule's folder empty). Looked for up to the project's
    root (the first folder with a .git, setup.py, pyproject.toml or setup.cfg)."""
    if not path or path.startswith("<"):
        return False
    return _holds_package_above(os.path.dirname(os.path.abspath(path)), top)


def project_root_of(path: str, module: str) -> Optional[str]:
    """The folder the project's `module` is imported from by the file `path`: the package the file lies in,
    or, for a file outside it (tests/, recipes/, scripts/, a tests/ tree that mirrors the package's name),
    the nearest folder above it, up to the project's root, that holds the package (whether or not it has
    that module: a fork without verl/utils/device.py still answers for itself); None where the project has
    no such package (an installed library). Recorded as read (recording_reads)."""
    top = module.split(".", 1)[0]
    root = package_root(path, top)
    if root is not None and module_text(root, module) is not None:
        return root
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        if folder != root and (os.path.isfile(os.path.join(folder, top, "__init__.py"))
                               or _namespace_module(folder, module)):
            return folder
        if any(os.path.exists(os.path.join(folder, m)) for m in PROJECT_MARKERS):
            return root
        parent = os.path.dirname(folder)
        if parent == folder:
            return root
        folder = parent


def _namespace_module(folder: str, module: str) -> bool:
    """Whether `module` is a module or folder of modules under `folder` in a package without __init__.py
    (a namespace package, PEP 420: `picotron/model.py` beside `train.py`)."""
    base = os.path.join(folder, *module.split("."))
    if "." in module and os.path.isfile(base + ".py"):
        return True
    try:
        return os.path.isdir(base) and any(name.endswith(".py") for name in os.listdir(base))
    except OSError:
        return False


def project_defines(path: str, module: str, names: tuple[str, ...]) -> Optional[bool]:
    """Whether the project that the file `path` belongs to defines `module` with every one of `names`.
    None where the project has no package named like the module's top (`verl` for verl.utils.device): it
    then uses the installed framework, whose version decides (its pin)."""
    root = project_root_of(path, module)
    if root is None:
        return None
    text = module_text(root, module)
    if text is None:
        return False
    return all(re.search(_BINDING.format(re.escape(name)), text, re.M) for name in names)


_TEST_FILE = re.compile(r"(?:^|[/\\])(?:tests?[/\\].*|test_[^/\\]*\.py|[^/\\]*_test\.py|conftest\.py)$")


def is_test_path(path: str) -> bool:
    """Whether `path` is a test module or lies in a tests folder (pytest's and unittest's layouts)."""
    return _TEST_FILE.search(path) is not None

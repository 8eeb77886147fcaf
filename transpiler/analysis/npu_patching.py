"""NPU code already, project-wide: modules that run after an import that patches torch's CUDA names onto the NPU.

`from torch_npu.contrib import transfer_to_npu` rebinds torch.cuda's functions to torch.npu's, makes `.cuda()`
move to the NPU, maps "cuda" device arguments to "npu" and the "nccl" backend to "hccl";
`from mindspeed import megatron_adaptor` (MindSpeed, MindSpeed-LLM) does the same for Megatron code. A project
written that way (MindSpeed-RL) keeps CUDA names on purpose, and not only in the file with the import: Python
runs a package's `__init__.py` (and its parents') before any module of the package, and every module-level
import of those before the next line. So a file is NPU code already where the modules that run when it is
imported (its parent packages, its own module-level imports, and theirs, within the project) reach one of
those imports at module level. An import inside a function, an `if` or a `try` is not followed: code that
picks the NPU at run time runs on GPU hosts too.

Read from the project's files, never imported or run; every file read is recorded (project_modules), so that
a cached result is used only while they are unchanged.
"""

from __future__ import annotations

import os
import re
from collections import deque
from functools import lru_cache
from typing import Optional

from npu_port.transpiler.analysis.project_modules import module_text

# A module-level import that patches torch.cuda onto the NPU (column 0: not under a def, an `if` or a `try`).
PATCHING_IMPORT = re.compile(
    r"^(?:from[ \t]+torch_npu\.contrib[ \t]+import[ \t]+\(?[\w \t,]*\b(?P<t1>transfer_to_npu)\b"
    r"|import[ \t]+torch_npu\.contrib\.(?P<t2>transfer_to_npu)\b"
    r"|from[ \t]+(?P<m1>mindspeed\w*)[ \t]+import[ \t]+\(?[\w \t,]*\bmegatron_adaptor\b"
    r"|import[ \t]+(?P<m2>mindspeed\w*)\.megatron_adaptor\b)", re.M)
# Module-level imports: `from .a.b import c, d`, `import a.b as c, e`.
_TOP_FROM = re.compile(r"^from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.M)
_TOP_IMPORT = re.compile(r"^import[ \t]+([^\n#;]*)", re.M)
_PROJECT_MARKERS = ("setup.py", "pyproject.toml", "setup.cfg", ".git")
_MAX_MODULES = 2000  # a bound on one walk; a project larger than this is read no further


def patching_import(text: str) -> str:
    """The patching import's module written at module level in `text` ("torch_npu.contrib.transfer_to_npu",
    "mindspeed.megatron_adaptor"), or ""."""
    if "transfer_to_npu" not in text and "megatron_adaptor" not in text:
        return ""
    found = PATCHING_IMPORT.search(text)
    if found is None:
        return ""
    if found.group("t1") or found.group("t2"):
        return "torch_npu.contrib.transfer_to_npu"
    return f"{found.group('m1') or found.group('m2')}.megatron_adaptor"


def patched_by(path: str, text: str) -> str:
    """Why the file `path` (its `text`) runs with torch.cuda patched onto the NPU, or "": "it imports X" or
    "importing it runs X first, in M". One breadth-first walk over the project modules that importing the file
    runs (its packages first); every file read is recorded."""
    own = patching_import(text)
    if own:
        return f"it imports {own}"
    if not path or path.startswith("<"):
        return ""
    here = os.path.dirname(os.path.abspath(path))
    queue = deque(_parents(here) + list(_imports(here, text, None)))
    seen = set(queue)
    while queue and len(seen) < _MAX_MODULES:
        root, module = queue.popleft()
        found = module_text(root, module)
        if found is None:
            continue
        marker = patching_import(found)
        base = os.path.join(root, *module.split("."))
        is_package = os.path.isfile(os.path.join(base, "__init__.py"))
        if marker:
            where = os.path.join(base, "__init__.py") if is_package else base + ".py"
            return f"importing it runs {marker} first, in {os.path.relpath(where, root)}"
        folder = base if is_package else os.path.dirname(base)
        package = (root, module) if is_package else (root, module.rsplit(".", 1)[0]) if "." in module else None
        for nxt in _imports(folder, found, package):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return ""


def _parents(here: str) -> list[tuple[str, str]]:
    """(root, dotted name) of the packages a module in the folder `here` belongs to, outermost first."""
    parts: list[str] = []
    folder = here
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    return [(folder, ".".join(parts[:i])) for i in range(1, len(parts) + 1)]


@lru_cache(maxsize=4096)
def _imports(here: str, text: str, package: Optional[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """(root, dotted name) of the project modules that `text`'s module-level imports run, each with its parent
    packages. `here` is the module's folder; `package` the (root, dotted name) of the package it belongs to."""
    out: list[tuple[str, str]] = []
    if "import" not in text:
        return ()
    for m in _TOP_FROM.finditer(text):
        dots, module = m.group(1), m.group(2)
        names = [w.split()[0] for w in m.group(3).strip("()").replace("\\\n", " ").split(",") if w.split()]
        if dots:
            located = _relative(here, dots, module, package)
        else:
            located = _absolute(here, module)
        if located is None:
            continue
        root, dotted = located
        out += _with_parents(root, dotted)
        # `from pkg import sub`: sub may be a module of the package.
        out += [(root, f"{dotted}.{n}" if dotted else n) for n in names if n.isidentifier()]
    for m in _TOP_IMPORT.finditer(text):
        for part in m.group(1).split(","):
            words = part.split()
            if words:
                located = _absolute(here, words[0])
                if located is not None:
                    out += _with_parents(*located)
    return tuple(dict.fromkeys(out))


def _with_parents(root: str, dotted: str) -> list[tuple[str, str]]:
    parts = dotted.split(".")
    return [(root, ".".join(parts[:i])) for i in range(1, len(parts) + 1) if parts[0]]


def _relative(here: str, dots: str, module: str, package: Optional[tuple[str, str]]) -> Optional[tuple[str, str]]:
    if package is None:
        chain = _parents(here)
        if not chain:
            return None
        package = chain[-1]
    root, dotted = package
    parts = dotted.split(".")
    up = len(dots) - 1
    if up >= len(parts):
        return None
    base = parts[:len(parts) - up]
    return root, ".".join(base + ([module] if module else []))


def _absolute(here: str, module: str) -> Optional[tuple[str, str]]:
    """Where the project defines the absolute `module`: the folder above `here`, up to the project's root (a
    folder with setup.py, pyproject.toml, setup.cfg or .git), holding its top package or module."""
    if not module:
        return None
    root = _root_of(here, module.split(".", 1)[0])
    return (root, module) if root is not None else None


def _root_of(here: str, top: str) -> Optional[str]:
    key = (here, top)
    if key in _ROOTS:
        return _ROOTS[key]
    found = None
    folder = here
    for _ in range(12):
        if os.path.isfile(os.path.join(folder, top, "__init__.py")) or os.path.isfile(os.path.join(folder, top + ".py")):
            found = folder
            break
        if any(os.path.exists(os.path.join(folder, m)) for m in _PROJECT_MARKERS):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if len(_ROOTS) > 4096:
        _ROOTS.clear()
    _ROOTS[key] = found
    return found


_ROOTS: dict[tuple[str, str], Optional[str]] = {}




_NPU_PACKAGE_NAME = re.compile(r"^\w+_(?:ascend|npu)$")


def framework_project(path: str, text: str) -> str:
    """The NPU framework package (`vllm_ascend`, `*_npu`) at the root of the project the file lies in, where the
    file names it (imports it, or loads its modules by path, as vllm-ascend's patch tests do): a test or tool of
    that framework, NPU code already. "" otherwise."""
    if ("_ascend" not in text and "_npu" not in text) or not path or path.startswith("<"):
        return ""
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(12):
        if any(os.path.exists(os.path.join(folder, m)) for m in _PROJECT_MARKERS):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            return ""
        folder = parent
    else:
        return ""
    for name in _framework_packages(folder):
        if re.search(rf"\b{name}\b", text) and module_text(folder, name) is not None:
            return name
    return ""


@lru_cache(maxsize=64)
def _framework_packages(root: str) -> tuple[str, ...]:
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return ()
    return tuple(n for n in names if _NPU_PACKAGE_NAME.match(n) and os.path.isfile(os.path.join(root, n, "__init__.py")))

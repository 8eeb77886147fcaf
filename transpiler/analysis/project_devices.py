"""Device values that cross files: names a module imports from its own project that already answer the NPU's
name where the code runs on one.

Real code defines a device constant or a device-name helper once (`DEVICE_TYPE = get_device_name()`,
`def get_device(): return "npu" if is_npu_available() else "cuda"`) and compares it in other modules
(`if DEVICE_TYPE == "cuda": torch.cuda.reset_peak_memory_stats()`). Read file by file, that comparison looks
like a single-device module's and would be renamed: the NPU would then take the CUDA branch. Here the
imports of a file are followed into the project's own modules (read, never imported or run; through
re-exports, a few levels deep) and a name counts as such a value where its definition names the NPU in
code (torch.npu, torch_npu, an `is_*npu*` predicate, an "npu"/"hccl" literal) or uses another such name of
its module. Every file read is recorded (project_modules.recording_reads), so that a cached result is used
only while those files are unchanged.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Iterator
from functools import lru_cache
from typing import Optional

from npu_port.transpiler.analysis.project_modules import (
    Remembered,
    module_text,
    package_root,
    project_root_of,
    remembered,
)
from npu_port.transpiler.analysis.source_facts import dotted

# One `from M import a, b as c` (parenthesised or not) or `import a.b as c` at the start of a line.
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.M)
_PLAIN_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w.]+)", re.M)
_IMPORT_AS = re.compile(r"^[ \t]*import[ \t]+([\w.]+)[ \t]+as[ \t]+(\w+)", re.M)
# The NPU named by code: torch.npu, torch_npu, an is_*npu* predicate, an "npu"/"hccl" value.
_NPU_CODE = re.compile(r"""\btorch\.npu\b|\btorch_npu\b|\bis_\w*npu\w*|["'](?:npu|NPU|hccl|HCCL)(?::[^"'\n]*)?["']""")
_DEPTH = 4  # re-exports followed (`from .device import get_device` in a package's __init__.py)


def imported_npu_values(path: str, text: str) -> frozenset[str]:
    """The local names (and `alias.NAME` dotted names) of `text`, the file at `path`, bound by an import to
    a name of its own project whose value is the NPU's where the code runs on one."""
    if "import" not in text or not path or path.startswith("<"):
        return frozenset()
    found: set[str] = set()
    here = os.path.dirname(os.path.abspath(path))
    for m in _FROM_IMPORT.finditer(text):
        dots, module = m.group(1), m.group(2)
        located = _locate(here, dots, module)
        if located is None:
            continue
        root, qualified = located
        for name, alias in _aliases(m.group(3)):
            if _is_npu_value(root, qualified, name, _DEPTH):
                found.add(alias)
            elif module_text(root, f"{qualified}.{name}" if qualified else name) is not None:
                found.update(f"{alias}.{n}" for n in _npu_names(root, f"{qualified}.{name}" if qualified else name))
    for m in _IMPORT_AS.finditer(text):
        located = _locate(here, "", m.group(1))
        if located is not None:
            found.update(f"{m.group(2)}.{n}" for n in _npu_names(*located))
    return frozenset(found)


# A call of a torch.cuda function (`torch.cuda.is_available()`): what a test's mock of it reaches.
_CUDA_CALLED = re.compile(r"\btorch\.cuda\.(\w+)\s*\(")
# Vendor tests whose true side is NVIDIA-only code (ROCm reuses torch.cuda, so `torch.version.hip` counts): code
# behind one, or an `and` chain with one, keeps its torch.cuda calls (analysis/dispatch, nvidia_guard).
VENDOR_TEST = re.compile(r"\bis_nvidia\w*|\btorch\.version\.(?:cuda|hip)\b|\bis_(?:rocm|hip|amd)\b"
                         r"|\b(?:hip|rocr|rocm)_\w+|\b(?:HIP|ROCR)_VISIBLE_DEVICES\b")


def kept_cuda_calls(path: str, text: str) -> dict[str, frozenset[str]]:
    """For each name that `text`, the file at `path`, imports from its own project, the torch.cuda functions
    its defining module calls where that module also names the NPU in code (such a module picks the device
    itself and its CUDA test stays as written, analysis/dispatch), or that the name's function asks behind a
    vendor test (kept too): a test that mocks one of those functions and calls the name drives that CUDA path,
    which the port keeps. Names whose module calls none are left out."""
    if not path or path.startswith("<") or "import" not in text:
        return {}
    found: dict[str, frozenset[str]] = {}
    here = os.path.dirname(os.path.abspath(path))
    for m in _FROM_IMPORT.finditer(text):
        located = _locate(here, m.group(1), m.group(2))
        if located is None:
            continue
        root, qualified = located
        for name, alias in _aliases(m.group(3)):
            module = f"{qualified}.{name}" if qualified else name
            source = module_text(root, module)  # `from pkg import device`: the module itself
            if source is None:
                defined = _definition(root, qualified, name, _DEPTH)  # a def, through re-exports
                source = defined[1] if defined is not None else None
            if source is None or "torch.cuda" not in source:
                continue
            code = "".join(line.split("#", 1)[0] + "\n" for line in source.splitlines())
            calls = frozenset(_CUDA_CALLED.findall(code)) if _NPU_CODE.search(code) else _vendor_kept(code, name)
            if calls:
                found[alias] = calls
    return found


_NPU_CALLED = re.compile(r"\btorch\.npu\.(\w+)\s*\(")


def cuda_only_reads(path: str, text: str) -> dict[str, tuple[str, dict[str, int]]]:
    """For each name that `text`, the file at `path`, imports from its own project: (its module's file, {f: line})
    of the torch.cuda functions that module calls and never calls on torch.npu (comments dropped); names whose
    module has none are left out. A test that patches `torch.npu.f` and calls such a name misses the code."""
    found: dict[str, tuple[str, dict[str, int]]] = {}
    for root, qualified, name, alias in names_from_project(path, text):
        module = f"{qualified}.{name}" if qualified and module_text(root, f"{qualified}.{name}") is not None \
            else qualified
        source = module_text(root, module) if module else None
        if source is None or "torch.cuda" not in source:
            continue
        code = "".join(line.split("#", 1)[0] + "\n" for line in source.splitlines())
        # Of a function: what it and the module's functions it calls run; of anything else, the whole module.
        tree = _parse(code) if module == qualified else None
        functions = _reachable(tree, name) if tree is not None else []
        spans = [(f.lineno, f.end_lineno or f.lineno) for f in functions] or [(1, code.count("\n") + 1)]
        ported = _called_within(_NPU_CALLED, code, spans)
        reads = {f: line for f, line in _called_within(_CUDA_CALLED, code, spans).items() if f not in ported}
        if reads:
            base = os.path.join(root, *module.split("."))
            found[alias] = (os.path.join(base, "__init__.py") if _is_package(root, module) else base + ".py", reads)
    return found


def _called_within(pattern: re.Pattern, code: str, spans: list[tuple[int, int]]) -> dict[str, int]:
    """The functions `pattern` finds called in the given line spans of `code`, each with its first line."""
    found: dict[str, int] = {}
    for m in pattern.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        if any(a <= line <= b for a, b in spans):
            found.setdefault(m.group(1), line)
    return found


def _vendor_kept(code: str, name: str) -> frozenset[str]:
    """The torch.cuda functions that the module's function `name`, and the module's functions it calls, ask
    only behind a vendor test (`torch.cuda.is_available() and torch.version.hip is None`), which the port
    keeps; a function asked elsewhere in them too (ported there) is left out."""
    if "torch.cuda" not in code or not VENDOR_TEST.search(code):
        return frozenset()
    tree = _parse(code)
    if tree is None:
        return frozenset()
    lines = code.splitlines(keepends=True)
    kept: set[str] = set()
    plain: set[str] = set()
    for function in _reachable(tree, name):
        guarded: set[int] = set()
        for node in ast.walk(function):
            test = node if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) else \
                node.test if isinstance(node, (ast.If, ast.IfExp)) else None
            if test is not None and VENDOR_TEST.search(_segment(lines, test)):
                guarded.update(id(n) for n in ast.walk(node))
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and dotted(node.func.value) == "torch.cuda":
                (kept if id(node) in guarded else plain).add(node.func.attr)
    return frozenset(kept - plain)


def _reachable(tree: ast.Module, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's top-level function `name` and those of its functions it calls by name, transitively ([] where
    `name` is no function of the module)."""
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        if current in seen or current not in functions:
            continue
        seen.add(current)
        out.append(functions[current])
        todo += [n.func.id for n in ast.walk(functions[current])
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    return out



# A device value compared with CUDA's name: `x == "cuda"`, `"cuda:0" != x`, `x in ("cuda", ...)`,
# `x.startswith("cuda")`.
_CUDA_COMPARED = re.compile(r"""(?:[=!]=|\bin)\s*[(\[{]?\s*["']cuda(?::\d+)?["']|["']cuda(?::\d+)?["']\s*[=!]="""
                            r"""|\.startswith\(\s*\(?\s*["']cuda""")
# The NPU told apart: its name compared (anywhere in a comparison's list), its availability or count asked, an
# `is_*npu*` predicate, `.is_npu`.
_NPU_TESTED = re.compile(r"""(?:[=!]=|\bin)\s*[(\[{]?[^\n:]{0,60}["']npu(?::\d+)?["']|["']npu(?::\d+)?["']\s*[=!]="""
                         r"""|\.startswith\(\s*\(?[^)\n]{0,60}["']npu|\bis_\w*npu\w*|\btorch(?:_npu)?\.npu\."""
                         r"""(?:is_available|device_count)\b""")


def names_from_project(path: str, text: str) -> Iterator[tuple[str, str, str, str]]:
    """(root, module, name, alias) for each `from module import name as alias` of `text`, the file at `path`,
    whose module is one of its own project's (found as _locate finds it)."""
    if not path or path.startswith("<") or "import" not in text:
        return
    here = os.path.dirname(os.path.abspath(path))
    for m in _FROM_IMPORT.finditer(text):
        located = _locate(here, m.group(1), m.group(2))
        if located is not None:
            for name, alias in _aliases(m.group(3)):
                yield located[0], located[1], name, alias


def imported_cuda_only_tests(path: str, text: str) -> list[tuple[str, int]]:
    """(file, line) of the first device comparison with "cuda" of each project module that `text`, the file at
    `path`, imports (`import pkg.mod as m`, `from pkg.mod import f`, `from pkg import mod`), where that module
    never tells the NPU apart (compares no "npu", asks no NPU's availability): code that takes its other
    branch for every device but CUDA, the NPU included."""
    if not path or path.startswith("<") or "import" not in text:
        return []
    here = os.path.dirname(os.path.abspath(path))
    modules: list[tuple[str, str]] = []
    for root, qualified, name, _ in names_from_project(path, text):
        sub = f"{qualified}.{name}" if qualified else name
        modules.append((root, sub if module_text(root, sub) is not None else qualified))
    for m in _PLAIN_IMPORT.finditer(text):
        located = _locate(here, "", m.group(1))
        if located is not None:
            modules.append(located)
    found: list[tuple[str, int]] = []
    for root, module in dict.fromkeys(modules):
        source = module_text(root, module) if module else None
        line = _cuda_only_comparison(source) if source is not None else None
        if line is not None:
            base = os.path.join(root, *module.split("."))
            found.append((os.path.join(base, "__init__.py") if _is_package(root, module) else base + ".py", line))
    return found


@lru_cache(maxsize=512)
def _cuda_only_comparison(text: str) -> Optional[int]:
    """The line of the first comparison of a device value with "cuda" in `text`, where its code (comments
    dropped) never tells the NPU apart; None otherwise."""
    if "cuda" not in text:
        return None
    code = "".join(line.split("#", 1)[0] + "\n" for line in text.splitlines())
    found = _CUDA_COMPARED.search(code)
    if found is None or _NPU_TESTED.search(code):
        return None
    return code.count("\n", 0, found.start()) + 1


def imported_project_packages(path: str, text: str) -> list[str]:
    """The folders of the project's top-level packages that `text`, the file at `path`, imports from by an
    absolute import (found as _locate finds them), in order of first import."""
    if not path or path.startswith("<") or "import" not in text:
        return []
    here = os.path.dirname(os.path.abspath(path))
    found: list[str] = []
    modules = [m.group(2) for m in _FROM_IMPORT.finditer(text) if not m.group(1)]
    modules += [m.group(1) for m in _PLAIN_IMPORT.finditer(text)]
    for module in modules:
        located = _locate(here, "", module) if module else None
        if located is not None:
            folder = os.path.join(located[0], module.split(".", 1)[0])
            if os.path.isdir(folder) and folder not in found:
                found.append(folder)
    return found


def _locate(here: str, dots: str, module: str) -> Optional[tuple[str, str]]:
    """(root, dotted module under root) of an import's module inside the project, or None where it is not
    one of the project's (a library, or a file outside any package)."""
    if dots:
        base = here
        for _ in range(len(dots) - 1):
            base = os.path.dirname(base)
        # A relative import inside a package: name the package from the outermost folder with __init__.py.
        parts: list[str] = []
        folder = base
        while os.path.isfile(os.path.join(folder, "__init__.py")):
            parts.insert(0, os.path.basename(folder))
            folder = os.path.dirname(folder)
        if not parts:
            return None
        return folder, ".".join(parts + ([module] if module else []))
    if not module:
        return None
    root = project_root_of(os.path.join(here, "x.py"), module)
    return (root, module) if root is not None else None


def _aliases(names: str) -> list[tuple[str, str]]:
    out = []
    for part in names.strip("()").replace("\\\n", " ").split(","):
        words = part.split()
        if len(words) == 1 and words[0].isidentifier():
            out.append((words[0], words[0]))
        elif len(words) == 3 and words[1] == "as" and words[0].isidentifier() and words[2].isidentifier():
            out.append((words[0], words[2]))
    return out


def _is_npu_value(root: str, module: str, name: str, depth: int) -> bool:
    return depth > 0 and name in _npu_names(root, module, depth)


def _npu_names(root: str, module: str, depth: int = _DEPTH) -> frozenset[str]:
    """The top-level names of the project's `module` whose value is the NPU's name on an NPU: a def whose
    returned values, or an assignment whose value, name the NPU or use such a name of the module, and the
    names it re-exports."""
    return remembered(_NAMES, (root, module, depth), lambda: _find_npu_names(root, module, depth))


_NAMES: Remembered = {}


def _find_npu_names(root: str, module: str, depth: int) -> frozenset[str]:
    text = module_text(root, module)
    if text is None or "npu" not in text.lower() and "import" not in text:
        return frozenset()
    outline = _outline(text)
    if outline is None:
        return frozenset()
    sources, imported = outline
    found: set[str] = set()
    if depth > 1 and imported:
        # Where the module's own imports are read from: its folder (a package's: the package's own).
        here = os.path.join(root, *(module.split(".") if _is_package(root, module) else module.split(".")[:-1]))
        for level, source_module, names in imported:
            located = _locate(here, "." * level, source_module)
            if located is None:
                continue
            for name, local in names:
                if _is_npu_value(located[0], located[1], name, depth - 1):
                    found.add(local)
    found.update(n for n, source in sources.items() if _NPU_CODE.search(source))
    # Names that use a name found so far (`DEVICE = get_device_name()`), to a fixed point.
    while True:
        more = {n for n, source in sources.items() if n not in found
                and any(re.search(rf"\b{re.escape(f)}\b", source) for f in found)}
        if not more:
            return frozenset(found)
        found |= more


def _is_package(root: str, module: str) -> bool:
    return os.path.isfile(os.path.join(root, *module.split("."), "__init__.py"))


def _segment(lines: list[str], node: ast.AST) -> str:
    """The node's source lines, comments dropped (a comment naming the NPU is not code that does)."""
    start, end = getattr(node, "lineno", 1), getattr(node, "end_lineno", None) or getattr(node, "lineno", 1)
    return "".join(line.split("#", 1)[0] + "\n" for line in lines[start - 1:end])


@lru_cache(maxsize=256)
def _outline(text: str) -> Optional[tuple[dict[str, str], tuple[tuple[int, str, tuple[tuple[str, str], ...]], ...]]]:
    """What `_find_npu_names` reads of a module, whatever the depth it is asked at: the source of each
    top-level def's returned values and of each top-level assignment's value, and its from-imports
    (level, module, (name, local name) pairs). Kept per text: a module is asked about from many files."""
    tree = _parse(text)
    if tree is None:
        return None
    lines = text.splitlines(keepends=True)
    sources: dict[str, str] = {}
    imported = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # What it answers, not what it does: a loader that tests for the NPU returns no device name.
            sources[node.name] = "".join(_segment(lines, r.value) for r in ast.walk(node)
                                         if isinstance(r, ast.Return) and r.value is not None)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    sources[target.id] = _segment(lines, node.value)
        elif isinstance(node, ast.ImportFrom):
            imported.append((node.level, node.module or "",
                             tuple((a.name, a.asname or a.name) for a in node.names)))
    return sources, tuple(imported)


@lru_cache(maxsize=256)
def _parse(text: str) -> Optional[ast.Module]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return None


def project_function(path: str, text: str, local: str) -> Optional[tuple[str, str, str]]:
    """(file, its text, the def's name) of the project function that `text`, the file at `path`, imports
    under the name `local` (`from .mesh import build_mesh as local`), following re-exports; None where
    `local` is not imported from the project or its definition is not found."""
    if not path or path.startswith("<") or local not in text:
        return None
    here = os.path.dirname(os.path.abspath(path))
    for m in _FROM_IMPORT.finditer(text):
        for name, alias in _aliases(m.group(3)):
            if alias == local:
                located = _locate(here, m.group(1), m.group(2))
                return _definition(located[0], located[1], name, _DEPTH) if located is not None else None
    return None


def _definition(root: str, module: str, name: str, depth: int) -> Optional[tuple[str, str, str]]:
    text = module_text(root, module)
    tree = _parse(text) if text is not None and depth > 0 else None
    if text is None or tree is None:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            base = os.path.join(root, *module.split("."))
            return (os.path.join(base, "__init__.py") if _is_package(root, module) else base + ".py"), text, name
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    here = os.path.join(root, *(module.split(".") if _is_package(root, module) else module.split(".")[:-1]))
                    located = _locate(here, "." * node.level, node.module or "")
                    return _definition(located[0], located[1], alias.name, depth - 1) if located else None
    return None


_RELATIVE_IMPORT = re.compile(r"^[ \t]*from[ \t]+\.", re.M)


def imports_from_project(facts, beside: bool = False) -> bool:
    """Whether the file (its SourceFacts) imports from its own project: a relative import, or an absolute one
    of a package the file lies in (`beside`: or of one beside it, as tests/ and scripts/ import theirs). A
    scout's question: its calls may pass values into the project's functions."""
    if facts.unsure:
        return True
    if _RELATIVE_IMPORT.search(facts.code):
        return True
    found = project_root_of if beside else package_root
    return any(found(facts.path, root) is not None for root in facts.imported_roots)

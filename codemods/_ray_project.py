"""The Ray resource set of a project is one decision.

Ray places an actor that asks for "NPU" only in a placement-group bundle that has "NPU", and a bundle asking
for "GPU" never lands on an Ascend node. So the sites of a project that name Ray's accelerator resource
(placement-group bundles, `num_gpus=`, `resources=`, lookups of `ray.cluster_resources()`) are converted
together or not at all. A site the rules cannot convert blocks the others: a GPU count stored in a dict under
"num_gpus" and spread into a Ray call (`options["num_gpus"] = n; A.options(**options)`) where no arm of the
same function asks for the NPU resource instead (that is dispatch, as verl and LLaMA-Factory write it); and a
bundle-shaped dict (string keys "GPU" and "CPU": `{"GPU": n, "CPU": 10 * n}`) that does not reach a
placement-group call in its own file, so ray-resource-keys cannot tell it is one (a resource plan built in one
module and placed in another).

The project is the outermost package the file lies in (folders with `__init__.py`), or the file's own folder
outside a package; its Python files are read (never imported), and recorded as read, so that a cached result
is used only while they are unchanged.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from npu_port.transpiler.analysis.project_devices import imported_project_packages
from npu_port.transpiler.analysis.project_modules import digest_of_read, record_reads

_MAX_FILES = 5000
_OPTION_METHODS = frozenset({"options", "map", "map_batches", "flat_map", "filter"})  # ray.yaml num_gpus_methods
_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".tox", ".venv", "venv", "build", "dist"}


def _project_dir(path: str) -> str:
    here = os.path.dirname(os.path.abspath(path))
    top = None
    while os.path.isfile(os.path.join(here, "__init__.py")):
        top = here
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return top or os.path.dirname(os.path.abspath(path))


def _python_files(folder: str, recurse: bool) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")) if recurse else []
        found.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
        if len(found) > _MAX_FILES:
            break
    return found


def _spread_names(call: ast.Call) -> set[str]:
    """Names spread as Ray options: `A.options(**x)` (and Ray Data's map/map_batches/flat_map/filter, which
    take the same options), `ray.remote(**x)`; not `A.remote(**x)`, whose keywords go to the actor's
    constructor (OpenRLHF passes vLLM's own num_gpus= so)."""
    func = call.func
    options = isinstance(func, ast.Attribute) and func.attr in _OPTION_METHODS
    remote = (isinstance(func, ast.Name) and func.id == "remote") or (
        isinstance(func, ast.Attribute) and func.attr == "remote" and isinstance(func.value, ast.Name)
        and func.value.id == "ray")
    if not (options or remote):
        return set()
    return {k.value.id for k in call.keywords if k.arg is None and isinstance(k.value, ast.Name)}


def _subscript_key(target: ast.expr) -> Optional[tuple[str, str]]:
    if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)):
        return target.value.id, target.slice.value
    return None


def _asks_npu(value: ast.expr) -> bool:
    return isinstance(value, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "NPU" for k in value.keys)


def _scope_blockers(body: list[ast.stmt]) -> list[int]:
    """Lines in one scope (nested functions excluded) where a dict gets "num_gpus" and is spread into a Ray
    call, with no `dict["resources"] = {"NPU": ...}` for the same dict in the scope."""
    filled: dict[str, int] = {}
    npu: set[str] = set()
    spread: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                key = _subscript_key(target)
                if key and key[1] == "num_gpus":
                    filled.setdefault(key[0], node.lineno)
                elif key and key[1] == "resources" and _asks_npu(node.value):
                    npu.add(key[0])
                elif isinstance(target, ast.Name) and isinstance(node.value, ast.Dict) and any(
                        isinstance(k, ast.Constant) and k.value == "num_gpus" for k in node.value.keys):
                    filled.setdefault(target.id, node.lineno)
        elif isinstance(node, ast.Call):
            spread |= _spread_names(node)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(line for name, line in filled.items() if name in spread and name not in npu)


def _ast_bundle_dicts(expr: Optional[ast.expr]) -> list[ast.Dict]:
    """The dict displays of a bundles expression, as ray-resource-keys reads it (`_bundle_dicts`)."""
    if isinstance(expr, ast.Dict):
        return [expr]
    if isinstance(expr, (ast.List, ast.Tuple)):
        return [d for e in expr.elts for d in _ast_bundle_dicts(e)]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Add)):
        return _ast_bundle_dicts(expr.left) + _ast_bundle_dicts(expr.right)
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
        return _ast_bundle_dicts(expr.elt)
    if isinstance(expr, ast.IfExp):
        return _ast_bundle_dicts(expr.body) + _ast_bundle_dicts(expr.orelse)
    return []


def _unplaced_bundles(text: str, tree: ast.Module, target: str) -> list[int]:
    """Lines of bundle-shaped dicts ("GPU" and "CPU" keys) that ray-resource-keys does not rename: not in the
    bundles of a placement-group call of this file, nor assigned to a variable that reaches one."""
    from npu_port.codemods.ray_resource_keys import _names_passed_as_bundles  # it imports this module
    from npu_port.codemods.ray_support import RayTable

    table = RayTable.for_target(target)
    shaped = [d for d in ast.walk(tree) if isinstance(d, ast.Dict) and {table.gpu, "CPU"} <= {
        k.value for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}]
    if not shaped:
        return []
    names = _names_passed_as_bundles(text, table, tree)
    placed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            placed.update(id(d) for d in _ast_bundle_dicts(table.bundles_placed_by(node)))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            placed.update(id(d) for d in _ast_bundle_dicts(node.value))
    return [d.lineno for d in shaped if id(d) not in placed]


@lru_cache(maxsize=1024)
def _file_blockers(path: str, digest: str, target: str) -> tuple[tuple[int, str], ...]:
    """(line, kind) of the blocking sites of one file; kind "spread" or "bundle"."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except OSError:
        return ()
    spread = "num_gpus" in text and "**" in text
    shaped = "GPU" in text and "CPU" in text
    if not (spread or shaped):
        return ()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    found = {(line, "bundle") for line in _unplaced_bundles(text, tree, target)} if shaped else set()
    if spread:
        found.update((line, "spread") for line in spread_lines(tree))
    return tuple(sorted(found))


def spread_lines(tree: ast.Module) -> list[int]:
    """Lines of a module where a dict gets "num_gpus" and is spread into a Ray call, in any scope, with no NPU
    resources for the same dict beside it (_scope_blockers)."""
    lines = list(_scope_blockers(tree.body))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.extend(_scope_blockers(node.body))
    return sorted(lines)


@dataclass(frozen=True)
class Blocker:
    path: str  # absolute
    shown: str  # file:line, the file relative to the project's folder
    line: int
    kind: str  # "spread": num_gpus in a dict spread into Ray options; "bundle": a GPU bundle placed elsewhere


def ray_resource_blockers(path: str, target: str, text: str = "") -> tuple[Blocker, ...]:
    """Each site of the project of `path` that asks Ray for GPUs in a way no rule converts: in its own package
    (or folder), and in the project's packages `text`, the file's code, imports (a test of `verl` outside
    it places its actors in verl's resource pools). Empty outside a real file."""
    if not path or path.startswith("<") or not os.path.isfile(path):
        return ()
    folder = _project_dir(path)
    folders = [(folder, os.path.isfile(os.path.join(folder, "__init__.py")))]
    folders += [(f, True) for f in imported_project_packages(path, text) if f != folder]
    found: list[Blocker] = []
    reads: dict[str, str] = {}
    for top, in_package in folders:
        base = os.path.dirname(top) if in_package else top
        for file in _python_files(top, recurse=in_package):
            digest = digest_of_read(file)
            reads[file] = digest
            for line, kind in _file_blockers(file, digest, target):
                found.append(Blocker(file, f"{os.path.relpath(file, base)}:{line}", line, kind))
    record_reads(reads)
    return tuple(found)


def blocked_message(blockers: tuple[Blocker, ...], what: str) -> tuple[str, str]:
    """(message, hint) for a Ray resource site left because the project's resource set is one decision."""
    shown = ", ".join(b.shown for b in blockers[:5]) + (
        f" and {len(blockers) - 5} more" if len(blockers) > 5 else "")
    return (f"{what} left for CUDA: the project's Ray resources change together or not at all, and {shown} "
            "ask Ray for GPUs where no rule converts them (num_gpus in a dict spread into .options(**...), or a "
            "GPU bundle that is placed in another module); an NPU request beside a GPU bundle would never be placed",
            'port those sites by hand (options["resources"] = {"NPU": n}, bundles {"NPU": n, "CPU": ...} and '
            'their "GPU" lookups), then every Ray "GPU" request of the project together')


BUNDLE_BLOCKER = ("Ray bundle \"GPU\" that is placed in another module: ray-resource-keys cannot follow it there, so "
                  "every Ray \"GPU\" request of the project is left for CUDA (each is reported)")

"""Snapshot PyTorch's device-agnostic API, per torch minor release, and what torch_npu does to plug into it.

    python -m tools.torch_device_api_snapshot --download-dir /work/wheels [--out FILE] [--keep-wheels]
    python -m tools.torch_device_api_snapshot --from-dir DIR     # wheels already unpacked, one folder each

`convert --keep-cuda` writes code that runs on CUDA and on Ascend alike through `torch.accelerator`,
`torch.get_device_module()`, `torch.amp` and the default backend of `init_process_group`. Those names came
one release at a time (`torch.accelerator.current_device_idx` became `current_device_index`, the memory
functions came later still), so a rule must know which torch a form needs and fall back to an explicit
`if is_npu: ... else: ...` where the input pins an older one. This writes those facts to
codemods/data/api/torch_device_api.json, read from the real wheels:

- for the newest patch of each torch minor in TORCH_MINORS, `pip download --no-deps` fetches the wheel
  (CUDA builds, ~800 MB: each is read and deleted before the next is fetched unless --keep-wheels);
- for each torch-npu minor in TORCH_NPU_MINORS, its newest release the same way.

Nothing is imported: every fact comes from `ast` over the shipped sources, the `.pyi` stubs of `torch._C`,
torch_npu's op list (YAML) and its headers, and the symbol names its shared library links against. Where
an upstream file no longer has the shape a fact is read from, the script raises SnapshotError instead of
recording a guess. The extractors are pure functions of a SourceTree, so the tests run them on tiny trees.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from tools.api_snapshot import (
    PIP_PLATFORM_ARGS,
    DirectoryTree,
    SnapshotError,
    SourceTree,
    WheelTree,
    find_class,
    find_function,
    function_params,
    method_params,
    module_attribute_names,
    module_level_statements,
    scan_module,
    write_text,
)

GENERATED_BY = "python -m tools.torch_device_api_snapshot"
REGENERATE = ("python -m tools.torch_device_api_snapshot --download-dir DIR (downloads one wheel at a time, "
              "~800 MB each, deletes it after reading; see docs/api-snapshot.md)")
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "codemods" / "data" / "api" / "torch_device_api.json"

# Every torch minor from the first that torch-npu 2.1 pairs with to the newest on PyPI. The newest patch of
# each is read: it is what `pip install torch~=2.X.0` gives a user.
# (PyPI lists torch 2.15.0 too; the pip constraints of the machines this project runs on cap torch at 2.14.1.)
TORCH_MINORS = ["2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13",
                "2.14"]
# torch-npu publishes no 2.2 and nothing newer than 2.14 yet; its versions follow torch's.
TORCH_NPU_MINORS = ["2.1", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13",
                    "2.14"]

# Generic names a device-agnostic rewrite may emit at the top of `torch`, looked up in torch/__init__.py,
# its `from torch._C import *` (the stubs) and its submodules.
TOP_LEVEL_NAMES = ["Event", "OutOfMemoryError", "Stream", "accelerator", "amp", "get_device_module"]
# The classes of them that come from the torch._C stubs (`from torch._C import *`).
STUB_CLASSES = {"Event", "OutOfMemoryError", "Stream"}
# aten ops torch.amp.GradScaler calls: a device it works on must implement them (torch_npu's op list).
GRAD_SCALER_OPS = ["_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_"]
# C++ entry points whose presence in libtorch_npu.so's symbol names says how torch_npu registers itself.
# A registration is a call into libtorch, so the mangled name of the callee is in the dynamic symbol table.
NPU_LINKED_SYMBOLS = {
    # at::RegisterPrivateUse1HooksInterface(at::PrivateUse1HooksInterface*): the hooks torch.accelerator,
    # torch._C._get_accelerator() and the generic Generator/pin-memory paths ask for PrivateUse1.
    "RegisterPrivateUse1HooksInterface": b"RegisterPrivateUse1HooksInterface",
    # c10::register_privateuse1_backend(std::string const&): what rename_privateuse1_backend calls.
    "register_privateuse1_backend": b"register_privateuse1_backend",
    # c10::impl::DeviceGuardImplRegistrar: torch.accelerator's device index / stream / synchronize go
    # through the DeviceGuardImpl of the accelerator's device type.
    "DeviceGuardImplRegistrar": b"DeviceGuardImplRegistrar",
    # at::GraphImplRegistry (REGISTER_GRAPH_IMPL, torch 2.12+): what torch.accelerator.Graph needs.
    "GraphImplRegistry": b"GraphImplRegistry",
}


# --------------------------------------------------------------------------------------------------------------
# Small AST helpers
# --------------------------------------------------------------------------------------------------------------

def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _calls(tree: ast.AST, suffix: str) -> Iterator[ast.Call]:
    """Calls whose callee's dotted name is `suffix` or ends with `.suffix`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name is not None and (name == suffix or name.endswith("." + suffix)):
                yield node


def _decorated_deprecated(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if (_dotted(target) or "").split(".")[-1] == "deprecated":
            return True
    return False


def _literal(node: ast.expr | None) -> object:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def _keyword(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def _module_files(tree: SourceTree, package: str) -> list[str]:
    prefix = package.replace(".", "/") + "/"
    return sorted(p for p in tree.paths() if p.startswith(prefix) and p.endswith(".py"))


def _parse(tree: SourceTree, path: str) -> ast.Module | None:
    text = tree.read_text(path)
    if text is None:
        return None
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


# --------------------------------------------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------------------------------------------

def _resolve_callable(tree: SourceTree, module: str, name: str, depth: int = 0) -> dict:
    """Record of `module.name`: its params, or what it is bound to (`x = deprecated(...)(y)`, `from .m import x`)."""
    parsed = tree.module_ast(module)
    if parsed is None or depth > 3:
        raise SnapshotError(f"{module}.{name}: module not found")
    body = list(module_level_statements(parsed.body, skip_type_checking=False))
    fn = find_function(body, name)
    # defined_in: torch.accelerator.memory's functions need the device's allocator, graphs' a graph impl.
    if fn is not None:
        record: dict = {"defined_in": module, "params": function_params(fn)}
        if _decorated_deprecated(fn):
            record["deprecated"] = True
        return record
    cls = find_class(parsed, name)
    if cls is not None:
        params = method_params(cls, "__init__")
        record = {"class": True, "defined_in": module, "params": params if params is not None else []}
        if _decorated_deprecated(cls):
            record["deprecated"] = True
        return record
    for stmt in body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return _alias_record(stmt.value)
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    source = _relative_module(tree, module, stmt.level, stmt.module)
                    return _resolve_callable(tree, source, alias.name, depth + 1)
    raise SnapshotError(f"{module}.{name} is listed in __all__ but not defined")


def _relative_module(tree: SourceTree, module: str, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if tree.is_package(module) else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _alias_record(value: ast.expr) -> dict:
    """`current_device_idx = deprecated("...", category=FutureWarning)(current_device_index)`."""
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Call) and len(value.args) == 1
            and isinstance(value.args[0], ast.Name)):
        deprecated = (_dotted(value.func.func) or "").split(".")[-1] == "deprecated"
        return {"same_as": value.args[0].id, **({"deprecated": True} if deprecated else {})}
    if isinstance(value, ast.Name):
        return {"same_as": value.id}
    raise SnapshotError(f"unexpected binding {ast.unparse(value)}")


def accelerator_facts(tree: SourceTree) -> dict | None:
    """Every name of `torch.accelerator.__all__` with its parameters; None where the module is absent."""
    parsed = tree.module_ast("torch.accelerator")
    if parsed is None:
        return None
    names = scan_module(parsed).dunder_all
    if names is None:
        raise SnapshotError("torch.accelerator has no literal __all__")
    return {name: _resolve_callable(tree, "torch.accelerator", name) for name in sorted(set(names))}


def _none_branch_value(fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> str | None:
    """Source of the `elif <param> is None:` branch (the no-argument behaviour)."""
    for node in ast.walk(fn):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.Is) and isinstance(node.test.left, ast.Name)
                and node.test.left.id == param and isinstance(node.test.comparators[0], ast.Constant)
                and node.test.comparators[0].value is None):
            return "; ".join(ast.unparse(stmt) for stmt in node.body)
    return None


def get_device_module_facts(tree: SourceTree) -> dict | None:
    parsed = tree.module_ast("torch")
    if parsed is None:
        raise SnapshotError("torch/__init__.py not found")
    fn = find_function(list(module_level_statements(parsed.body, skip_type_checking=False)), "get_device_module")
    if fn is None:
        return None
    params = function_params(fn)
    record: dict = {"params": params}
    if params and params[0]["default"] == "None":
        value = _none_branch_value(fn, params[0]["name"])
        if value is None:
            raise SnapshotError("torch.get_device_module: optional argument without an `is None` branch")
        record["no_argument"] = value
        # torch._C._get_accelerator() (2.4) and torch._C._accelerator_getAccelerator() (2.14) are the
        # current accelerator; the branch falls back to cpu where there is none.
        record["no_argument_is_current_accelerator"] = any(
            f"torch._C.{binding}()" in value for binding in ("_get_accelerator", "_accelerator_getAccelerator"))
    return record


def _stub_class_params(tree: SourceTree, name: str) -> list[dict] | None:
    """Constructor parameters of a class of the `torch._C` stubs (`torch.Stream`, `torch.Event`)."""
    parsed = tree.module_ast("torch._C") or _parse(tree, "torch/_C/__init__.pyi")
    if parsed is None:
        return None
    cls = find_class(parsed, name)
    if cls is None:
        return None
    # The stubs overload __new__ (a device form, then a raw stream_id form): the first is the one user
    # code calls, `torch.Stream(device)`.
    for method in ("__new__", "__init__"):
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == method:
                return function_params(stmt)[1:]
    return None


def top_level_facts(tree: SourceTree) -> dict:
    """Which generic names `torch` has: definitions and submodules of torch/__init__.py, the stub classes."""
    names = set(module_attribute_names(tree, "torch"))
    facts: dict = {}
    for name in TOP_LEVEL_NAMES:
        if name in STUB_CLASSES:
            # params None: the class exists but its stub declares no constructor (torch 2.1's Stream).
            exported = find_class(_parse(tree, "torch/_C/__init__.pyi") or ast.Module(body=[], type_ignores=[]),
                                  name) is not None and _exported_from_c(tree, name)
            facts[name] = {"class": True, "params": _stub_class_params(tree, name)} if exported else None
        else:
            facts[name] = name in names
    return facts


def _exported_from_c(tree: SourceTree, name: str) -> bool:
    """`torch.Stream` exists when torch/__init__.py star-imports torch._C and the stub's `__all__` has it.

    torch 2.1 has `class Stream` in the stubs too; the question is whether `torch.Stream` is public.
    """
    stubs = _parse(tree, "torch/_C/__init__.pyi")
    torch_init = tree.read_text("torch/__init__.py") or ""
    if stubs is None or "from torch._C import *" not in torch_init:
        return False
    scan = scan_module(stubs)
    if scan.dunder_all is not None:
        return name in scan.dunder_all
    return find_class(stubs, name) is not None


AMP_NAMES = {"autocast": "torch.amp.autocast_mode", "custom_bwd": "torch.amp.autocast_mode",
             "custom_fwd": "torch.amp.autocast_mode", "GradScaler": "torch.amp.grad_scaler"}


def amp_facts(tree: SourceTree) -> dict:
    """torch.amp's device-generic names (autocast(device_type), GradScaler(device), custom_fwd(device_type=))."""
    exported = set(module_attribute_names(tree, "torch.amp"))
    facts: dict = {}
    for name, module in AMP_NAMES.items():
        parsed = tree.module_ast(module)
        facts[name] = None
        if name not in exported or parsed is None:
            continue
        cls = find_class(parsed, name)
        if cls is not None:
            params = method_params(cls, "__init__")
            facts[name] = {"class": True, "params": params} if params is not None else None
            continue
        fn = find_function(list(module_level_statements(parsed.body, skip_type_checking=False)), name)
        if fn is not None:
            facts[name] = {"params": function_params(fn)}
    facts["autocast_privateuse1_needs"] = _autocast_needs(tree)
    return facts


def _autocast_needs(tree: SourceTree) -> list[str] | None:
    """What autocast(device_type="npu") requires of the renamed privateuse1 module: `necessary_funcs`."""
    parsed = tree.module_ast("torch.amp.autocast_mode")
    cls = find_class(parsed, "autocast") if parsed is not None else None
    init = find_function(cls.body, "__init__") if cls is not None else None
    if init is None:
        return None
    for node in ast.walk(init):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "necessary_funcs"):
            value = _literal(node.value)
            if isinstance(value, list):
                return sorted(str(v) for v in value)
    return None


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return find_function(cls.body, name)


def distributed_facts(tree: SourceTree) -> dict:
    """How init_process_group chooses a backend when none is given, read from distributed_c10d.py."""
    parsed = tree.module_ast("torch.distributed.distributed_c10d")
    if parsed is None:
        raise SnapshotError("torch/distributed/distributed_c10d.py not found")
    body = list(module_level_statements(parsed.body, skip_type_checking=False))
    init = find_function(body, "init_process_group")
    backend_cls = find_class(parsed, "Backend")
    config_cls = find_class(parsed, "BackendConfig")
    if init is None or backend_cls is None or config_cls is None:
        raise SnapshotError("distributed_c10d: init_process_group, Backend or BackendConfig is gone")
    default_for_device = find_function(body, "get_default_backend_for_device")
    register = _method(backend_cls, "register_backend")
    config_init = _method(config_cls, "__init__")
    if register is None or config_init is None:
        raise SnapshotError("distributed_c10d: Backend.register_backend or BackendConfig.__init__ is gone")
    init_params = function_params(init)
    backend_param = next((p for p in init_params if p["name"] == "backend"), None)
    if backend_param is None:
        raise SnapshotError("init_process_group has no backend parameter")
    return {
        "init_process_group": {"params": init_params},
        "get_default_backend_for_device": (
            {"params": function_params(default_for_device)} if default_for_device is not None else None),
        "default_device_backend_map": _default_backend_map(backend_cls),
        "register_backend": {"params": method_params(backend_cls, "register_backend")},
        # Backend.register_backend(name, func, devices=["npu"]) writes default_device_backend_map[device]:
        # "last" (every registration overwrites it), "first" (only while the device has none), or None.
        "register_backend_device_default": _device_default_policy(register),
        # backend=None: BackendConfig(Backend.UNDEFINED) takes every default_device_backend_map entry whose
        # backend is available: one backend per device type (cpu:gloo plus npu:hccl, say).
        "backend_none_uses_device_map": _undefined_branch_reads_map(config_init),
        # backend=None with device_id=torch.device("npu", i): only that device type's default is used.
        "backend_none_with_device_id_picks_its_default": _reads_map_with_device_id(init),
    }


def _default_backend_map(cls: ast.ClassDef) -> dict:
    for stmt in cls.body:
        target: ast.expr
        if isinstance(stmt, ast.AnnAssign):
            target, value = stmt.target, stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "default_device_backend_map":
            if not isinstance(value, ast.Dict):
                break
            return {_literal(k): _constant_name(v) for k, v in zip(value.keys, value.values) if k is not None}
    raise SnapshotError("Backend.default_device_backend_map is not a dict literal")


def _constant_name(node: ast.expr) -> object:
    """`NCCL` in the Backend class body is the string "nccl"."""
    if isinstance(node, ast.Name):
        return node.id.lower()
    return _literal(node)


def _subscripts_map(node: ast.AST) -> bool:
    return isinstance(node, ast.Subscript) and (_dotted(node.value) or "").endswith("default_device_backend_map")


def _tests_absence(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    for op, right in zip(node.ops, node.comparators):
        if isinstance(op, ast.NotIn) and _mentions_map(right):
            return True
        if isinstance(op, ast.Is) and isinstance(right, ast.Constant) and right.value is None:
            return True
    return False


def _device_default_policy(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """Whether the last or the first `register_backend(..., devices=[d])` becomes d's default backend."""
    def visit(stmts: list[ast.stmt], guards: list[ast.expr]) -> str | None:
        for stmt in stmts:
            if isinstance(stmt, ast.Assign) and any(_subscripts_map(t) for t in stmt.targets):
                # A guard that the device has no default yet makes the first one win: `device not in
                # Backend.default_device_backend_map` (torch 2.8) or `current is None` (2.12).
                first = any(_tests_absence(n) for guard in guards for n in ast.walk(guard))
                return "first" if first else "last"
            for field in ("body", "orelse"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list):
                    extra = [stmt.test] if isinstance(stmt, ast.If) and field == "body" else []
                    found = visit(inner, guards + extra)
                    if found:
                        return found
        return None
    return visit(fn.body, [])


def _mentions_map(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "default_device_backend_map" for n in ast.walk(node))


def _undefined_branch_reads_map(fn: ast.AST) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and "UNDEFINED" in ast.unparse(node.test):
            return any(_mentions_map(stmt) for stmt in node.body)
    return False


def _reads_map_with_device_id(fn: ast.AST) -> bool:
    for node in ast.walk(fn):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and _mentions_map(node.func.value) and node.args and "device_id" in ast.unparse(node.args[0])):
            return True
    return False


def privateuse1_facts(tree: SourceTree) -> dict:
    """The hooks an out-of-tree device (torch_npu) uses to become `torch.npu` and the `npu` device type."""
    backend_registration = set(module_attribute_names(tree, "torch.utils.backend_registration"))
    torch_names = set(module_attribute_names(tree, "torch"))
    random = tree.module_ast("torch.random")
    seeds_custom = random is not None and any(True for _ in _calls(random, "_seed_custom_device"))
    return {
        "_register_device_module": "_register_device_module" in torch_names,
        "rename_privateuse1_backend": "rename_privateuse1_backend" in backend_registration,
        "generate_methods_for_privateuse1_backend": "generate_methods_for_privateuse1_backend" in backend_registration,
        # torch.manual_seed(s) also seeds the renamed privateuse1 device (torch.npu.manual_seed_all).
        "manual_seed_seeds_privateuse1": seeds_custom,
    }


def memory_needs_device_allocator(tree: SourceTree) -> bool | None:
    """Whether torch.accelerator's memory functions need the device's allocator to be a c10::DeviceAllocator.

    Read from the shipped headers: ATen/DeviceAccelerator.h implements emptyCache/getDeviceStats/... as
    `at::getDeviceAllocator(device_type)->...`, and c10/core/CachingDeviceAllocator.h's getDeviceAllocator
    asserts on a `dynamic_cast<DeviceAllocator*>`. None where torch has no accelerator memory functions.
    """
    accelerator = tree.read_text("torch/include/ATen/DeviceAccelerator.h")
    if accelerator is None or "getDeviceAllocator(" not in accelerator:
        return None
    caching = tree.read_text("torch/include/c10/core/CachingDeviceAllocator.h") or ""
    return "dynamic_cast<DeviceAllocator*>" in caching


def torch_facts(tree: SourceTree) -> dict:
    return {
        "accelerator": accelerator_facts(tree),
        "accelerator_memory_needs_device_allocator": memory_needs_device_allocator(tree),
        "amp": amp_facts(tree),
        "distributed": distributed_facts(tree),
        "get_device_module": get_device_module_facts(tree),
        "privateuse1": privateuse1_facts(tree),
        "top_level": top_level_facts(tree),
    }


# --------------------------------------------------------------------------------------------------------------
# torch_npu
# --------------------------------------------------------------------------------------------------------------

def _first_string(call: ast.Call, name: str, position: int) -> object:
    return _literal(_keyword(call, name, position))


_REGISTRATION_WORDS = ("_register_device_module", "privateuse1_backend", "register_backend",
                       "default_device_backend_map")


def _registration_calls(tree: SourceTree) -> dict:
    """How torch_npu's Python side registers itself with torch, each kind in source order with its file.

    The order of `Backend.register_backend` calls matters: torch_npu registers "lccl" and then "hccl" for
    the "npu" device, and which one becomes npu's default depends on whether the torch it runs on lets
    the last or the first registration win (`register_backend_device_default` of the torch facts).
    """
    found: dict = {"backends": [], "device_module": [], "privateuse1_name": [],
                   "generate_methods_for_privateuse1_backend": [], "default_device_backend_map": []}
    for path in _module_files(tree, "torch_npu"):
        text = tree.read_text(path) or ""
        # Most of the ~1500 files register nothing: a substring test before parsing keeps this quick.
        if not any(word in text for word in _REGISTRATION_WORDS):
            continue
        parsed = _parse(tree, path)
        if parsed is None:
            continue
        for call in _calls(parsed, "_register_device_module"):
            found["device_module"].append({"device_type": _literal(_keyword(call, "device_type", 0)),
                                           "module": _literal(_keyword(call, "module", 1)), "in": path})
        for call in _calls(parsed, "rename_privateuse1_backend"):
            found["privateuse1_name"].append({"name": _literal(_keyword(call, "backend_name", 0)), "in": path})
        if any(True for _ in _calls(parsed, "generate_methods_for_privateuse1_backend")):
            found["generate_methods_for_privateuse1_backend"].append({"in": path})
        # torch.distributed.Backend.register_backend only: torch_npu's rpc registry has a function of the
        # same name for rpc agents.
        for call in _calls(parsed, "Backend.register_backend"):
            found["backends"].append({"name": _literal(_keyword(call, "name", 0)),
                                      "devices": _literal(_keyword(call, "devices", 3)), "in": path})
        for node in ast.walk(parsed):
            # A torch_npu could also set the default itself: Backend.default_device_backend_map["npu"] = "hccl".
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and _subscripts_map(target):
                        found["default_device_backend_map"].append(
                            {"device": _literal(target.slice), "backend": _literal(node.value), "in": path})
    return found


def _shared_libraries(tree: SourceTree) -> list[str]:
    return sorted(p for p in tree.paths() if p.startswith("torch_npu/lib/") and ".so" in p.rsplit("/", 1)[-1])


def linked_symbols(tree: SourceTree) -> dict:
    """Which registration entry points of libtorch the NPU libraries link against (NPU_LINKED_SYMBOLS)."""
    libraries = _shared_libraries(tree)
    if not libraries:
        raise SnapshotError("torch_npu/lib/*.so not found")
    found = dict.fromkeys(NPU_LINKED_SYMBOLS, False)
    for path in libraries:
        data = tree.read_bytes(path) or b""
        for key, needle in NPU_LINKED_SYMBOLS.items():
            found[key] = found[key] or needle in data
    return found


def _native_ops(tree: SourceTree) -> set[str]:
    """Names of the aten ops torch_npu implements (its codegen op list: official, custom, ...)."""
    text = tree.read_text("torch_npu/csrc/aten/npu_native_functions.yaml") or ""
    text += tree.read_text("torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml") or ""
    return set(re.findall(r"(?:func|- )\s*:?\s*([A-Za-z_]\w*)(?:\.\w+)?\(", text)) | set(
        re.findall(r"^\s*-\s*([A-Za-z_]\w*)(?:\.\w+)?\s*$", text, re.M))


_NPU_ALLOCATOR = re.compile(r"class\s+NPUAllocator\s*:\s*public\s+([\w:]+)")


def allocator_base(tree: SourceTree) -> str | None:
    """Base class of torch_npu's caching allocator (`c10::Allocator`, or `c10::DeviceAllocator` that
    torch.accelerator's memory functions need), from the shipped NPUCachingAllocator.h."""
    header = tree.read_text("torch_npu/include/torch_npu/csrc/core/npu/NPUCachingAllocator.h")
    if header is None:
        return None
    match = _NPU_ALLOCATOR.search(header)
    if match is None:
        raise SnapshotError("NPUCachingAllocator.h no longer declares class NPUAllocator : public ...")
    return match.group(1)


def torch_npu_facts(tree: SourceTree) -> dict:
    if tree.module_ast("torch_npu.npu") is None:
        raise SnapshotError("torch_npu/npu/__init__.py not found")
    npu_names = sorted(n for n in module_attribute_names(tree, "torch_npu.npu") if not n.startswith("_"))
    ops = _native_ops(tree)
    return {
        "allocator_base": allocator_base(tree),
        "registers": _registration_calls(tree),
        "links": linked_symbols(tree),
        "implements_ops": {op: op in ops for op in GRAD_SCALER_OPS},
        # torch.npu is torch_npu.npu (torch._register_device_module("npu", torch_npu.npu)): the module
        # torch.get_device_module() returns on an Ascend host, so these are its names.
        "npu_names": npu_names,
    }


# --------------------------------------------------------------------------------------------------------------
# Wheels
# --------------------------------------------------------------------------------------------------------------

def _next_minor(minor: str) -> str:
    major, low = minor.split(".")
    return f"{major}.{int(low) + 1}"


def download(distribution: str, minor: str, download_dir: Path) -> Path:
    """Newest release of `distribution` in `minor` (`torch>=2.6,<2.7`), fetched into an empty folder."""
    target = download_dir / f"{distribution}-{minor}"
    target.mkdir(parents=True, exist_ok=True)
    spec = f"{distribution}>={minor},<{_next_minor(minor)}"
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                    *PIP_PLATFORM_ARGS, "--platform", "manylinux1_x86_64", "-d", str(target), spec], check=True)
    wheels = sorted(target.glob("*.whl"))
    if len(wheels) != 1:
        raise SnapshotError(f"{spec}: expected one wheel in {target}, found {len(wheels)}")
    return wheels[0]


def _version_of(tree: SourceTree) -> str | None:
    for name in tree.paths():
        if name.endswith(".dist-info/METADATA"):
            for line in (tree.read_text(name) or "").splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return None


def _minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def read_wheel(tree: SourceTree, wheel_name: str, package: str) -> tuple[str, dict]:
    version = _version_of(tree)
    if version is None:
        raise SnapshotError(f"{wheel_name}: no METADATA version")
    facts = torch_facts(tree) if package == "torch" else torch_npu_facts(tree)
    return _minor_of(version), {"version": version, "wheel": wheel_name, **facts}


class _UnpackedWheel(DirectoryTree):
    """A folder of an unpacked wheel, its file list read once (the extractors ask for it many times)."""

    def __init__(self, root: Path):
        super().__init__(root)
        self._paths: list[str] | None = None

    def paths(self) -> list[str]:
        if self._paths is None:
            self._paths = super().paths()
        return self._paths


def unpacked_wheels(root: Path) -> Iterable[tuple[str, str, SourceTree]]:
    """(package, wheel name, tree) for each folder of `root` named after the wheel it was unpacked from."""
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and folder.name.endswith(".whl"):
            package = folder.name.split("-")[0].replace("_", "-")
            yield ("torch" if package == "torch" else "torch-npu"), folder.name, _UnpackedWheel(folder)


def downloaded_wheels(download_dir: Path, keep: bool) -> Iterable[tuple[str, str, SourceTree]]:
    for package, minors in (("torch", TORCH_MINORS), ("torch-npu", TORCH_NPU_MINORS)):
        for minor in minors:
            wheel = download(package, minor, download_dir)
            yield package, wheel.name, WheelTree(wheel)
            if not keep:
                wheel.unlink()


def build(sources: Iterable[tuple[str, str, SourceTree]]) -> dict:
    record: dict = {"generated_by": GENERATED_BY, "regenerate": REGENERATE, "torch": {}, "torch_npu": {}}
    for package, wheel_name, tree in sources:
        minor, facts = read_wheel(tree, wheel_name, package)
        print(f"read {wheel_name}", file=sys.stderr)
        record["torch" if package == "torch" else "torch_npu"][minor] = facts
    if not record["torch"]:
        raise SnapshotError("no torch wheel read")
    record["pairs"] = pairs(record)
    return record


def npu_default_backend(torch: dict, torch_npu: dict) -> str | None:
    """The backend `init_process_group(backend=None)` uses for "npu" when this torch_npu runs on this torch.

    torch_npu registers several backends for "npu" (lccl and hccl); torch up to 2.7 keeps the last
    registration as the device's default and torch 2.8 on the first, and torch_npu changed its order
    to match in 2.8. A torch_npu on a torch of another minor can so end up with lccl.
    """
    explicit = [e["backend"] for e in torch_npu["registers"]["default_device_backend_map"] if e["device"] == "npu"]
    if explicit:
        return explicit[-1]
    names = [b["name"] for b in torch_npu["registers"]["backends"]
             if isinstance(b["devices"], list) and "npu" in b["devices"]]
    policy = torch["distributed"]["register_backend_device_default"]
    if not names or policy is None:
        return None
    return names[0] if policy == "first" else names[-1]


def pairs(record: dict) -> dict:
    """For each minor both packages have: the versions read and npu's default backend as a pair."""
    paired = {}
    for minor, npu in record["torch_npu"].items():
        torch = record["torch"].get(minor)
        if torch is None:
            continue
        paired[minor] = {"npu_default_backend": npu_default_backend(torch, npu),
                         "torch": torch["version"], "torch_npu": npu["version"]}
    return paired


def minor_key(minor: str) -> tuple[int, ...]:
    return tuple(int(p) for p in minor.split("."))


_HEADER = ("generated_by", "regenerate")


def layout(value: object, depth: int = 0) -> str:
    """JSON with one line per fact: dicts open up until a leaf (a list, a scalar, or a dict with params)."""
    if isinstance(value, dict) and value and not ({"params", "same_as"} & set(value)) and depth < 5:
        pad = " " * (depth + 1)
        # Minors in numeric order (2.9 before 2.10); at the top, the provenance header first.
        keys = sorted(value, key=lambda k: ((0, k) if depth == 0 and k in _HEADER else
                                            (1, *minor_key(k)) if re.fullmatch(r"\d+\.\d+", k) else (10**6, k)))
        items = [f"{pad}{json.dumps(k)}: {layout(value[k], depth + 1)}" for k in keys]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def write(record: dict, path: Path) -> int:
    return write_text(layout(record) + "\n", path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=GENERATED_BY, description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--download-dir", type=Path, help="where wheels are fetched, one at a time (outside the repo)")
    source.add_argument("--from-dir", type=Path, help="folders of unpacked wheels, each named after its wheel file")
    parser.add_argument("--keep-wheels", action="store_true", help="do not delete each wheel after reading it")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    sources = (unpacked_wheels(args.from_dir) if args.from_dir is not None
               else downloaded_wheels(args.download_dir, args.keep_wheels))
    try:
        record = build(sources)
    except (SnapshotError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    size = write(record, args.out)
    print(f"wrote {args.out} ({size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

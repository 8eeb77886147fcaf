"""Names torch_npu binds on itself while it imports, read statically from the wheel.

torch_npu's top level is mostly filled in at import time, not by its `__init__.py`: the ops of the
`torch.ops.npu` registry, the DType symbols of the C extension (`torch_npu.float8_e8m0fnu`), the ATB ops
that `op_plugin/atb/_atb_ops.py` sets in a loop over a list, `torch_npu.Format` assigned inside a patch
function, and a module object created with `types.ModuleType` (`torch_npu.atb`). None of them is a
definition a scan of `__init__.py` sees, so user code that is right (vllm-ascend's) would be reported as
using names torch_npu lacks. The helpers here find them without importing anything:

- `attribute_assignments(parsed, "torch_npu")`: `torch_npu.X = ...` anywhere in a module, and
  `setattr(torch_npu, NAME, ...)` where NAME is a string literal, a module constant bound to one, or the
  variable of a `for` over a literal list (or `chain(...)` / `+` of module constant lists);
- `module_objects(parsed, "torch_npu")`: `setattr(torch_npu, "atb", ATB_MODULE)` where
  `ATB_MODULE = types.ModuleType(...)`, with the names set on that object the same way;
- `dtype_symbols(binary, header)`: the Python names of the custom DType enum, from the `torch_npu.<name>`
  strings the shared library holds, checked against the number of members of the C++ enum in the
  shipped header (a mismatch raises, so a renamed enum is never recorded half right).

Pure functions of source text and bytes, so the tests can run them on tiny inputs.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterable

# The dtype spellings the enum's Python names take (`hifloat8`, `float4_e2m1fn_x2`, `uint1`, ...).
_DTYPE_NAME = re.compile(r"(?:u?int\d+|b?float\d+(?:_\w+)?|hifloat\d+|complex\d+|bool|string)")
# Each member of `enum class DType` is one TORCH_NPU_ENUM_OFFSET(NEW, OLD) entry (or `UNDEFINED = -1`).
_ENUM_BODY = re.compile(r"enum\s+class\s+DType\s*\{(.*?)\};", re.S)
_ENUM_OFFSET_ENTRY = re.compile(r"TORCH_NPU_ENUM_OFFSET\s*\(\s*(\w+)\s*,")


class ExportsError(RuntimeError):
    """The wheel no longer has the shape these helpers read (raised, never guessed around)."""


def _module_constants(parsed: ast.Module) -> dict[str, object]:
    """Module-level `NAME = <literal>` bindings (strings and lists of strings are what setattr loops use)."""
    constants: dict[str, object] = {}
    for stmt in parsed.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                constants[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                continue
    return constants


def _strings_of(node: ast.expr, constants: dict[str, object]) -> list[str] | None:
    """The strings a literal, a constant, a list of them, `a + b` or `chain(a, b)` stands for."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in constants:
        value = constants[node.id]
        if isinstance(value, str):
            return [value]
        if isinstance(value, (list, tuple, set)) and all(isinstance(v, str) for v in value):
            return list(value)
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        parts = [_strings_of(e, constants) for e in node.elts]
        return None if any(p is None for p in parts) else [s for p in parts for s in p or ()]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _strings_of(node.left, constants), _strings_of(node.right, constants)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and _dotted(node.func) in ("chain", "itertools.chain") and not node.keywords:
        parts = [_strings_of(a, constants) for a in node.args]
        return None if any(p is None for p in parts) else [s for p in parts for s in p or ()]
    return None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _loop_values(parsed: ast.Module, constants: dict[str, object]) -> dict[int, list[str]]:
    """id(Name node) of a setattr name argument -> the strings its enclosing `for` iterates over."""
    found: dict[int, list[str]] = {}
    for loop in ast.walk(parsed):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
            continue
        values = _strings_of(loop.iter, constants)
        if values is None:
            continue
        for node in ast.walk(loop):
            if isinstance(node, ast.Name) and node.id == loop.target.id:
                found[id(node)] = values
    return found


def _setattr_calls(parsed: ast.Module, target: str) -> Iterable[tuple[ast.Call, list[str]]]:
    """`setattr(target, name, value)` calls with the names they can set."""
    constants = _module_constants(parsed)
    loops = _loop_values(parsed, constants)
    for node in ast.walk(parsed):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and len(node.args) == 3 and _dotted(node.args[0]) == target):
            continue
        name = node.args[1]
        values = loops.get(id(name)) if isinstance(name, ast.Name) and id(name) in loops else \
            _strings_of(name, constants)
        if values:
            yield node, values


def attribute_assignments(parsed: ast.Module, target: str) -> set[str]:
    """Names a module sets on `target` (a dotted module name as the code spells it) anywhere in its code."""
    names: set[str] = set()
    for node in ast.walk(parsed):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and _dotted(t.value) == target:
                    names.add(t.attr)
    for _call, values in _setattr_calls(parsed, target):
        names.update(values)
    return {n for n in names if n.isidentifier()}


def module_objects(parsed: ast.Module, target: str) -> dict[str, list[str]]:
    """`{attribute: [names]}` for module objects made with `types.ModuleType` and set on `target`."""
    made: set[str] = set()
    for stmt in parsed.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call)
                and _dotted(stmt.value.func) in ("types.ModuleType", "ModuleType")):
            made.add(stmt.targets[0].id)
    found: dict[str, list[str]] = {}
    for call, values in _setattr_calls(parsed, target):
        value = call.args[2]
        if isinstance(value, ast.Name) and value.id in made:
            contents = sorted(attribute_assignments(parsed, value.id))
            for attribute in values:
                found[attribute] = contents
    return found


def dtype_symbols(binary: bytes, header: str) -> list[str]:
    """The Python names of torch_npu's custom DType enum (`torch_npu._C._cd.DType`).

    `binary` is the shared library that registers them (each value's repr, `torch_npu.<name>`, is a
    NUL-terminated string there), `header` the shipped `custom_dtype/Init.h` whose enum they mirror.
    """
    body = _ENUM_BODY.search(header)
    if body is None:
        raise ExportsError("`enum class DType` not found in the custom dtype header")
    members = _ENUM_OFFSET_ENTRY.findall(body.group(1))
    strings = {m.decode("ascii") for m in re.findall(rb"\x00torch_npu\.([A-Za-z0-9_]+)\x00", binary)}
    names = sorted(s for s in strings if _DTYPE_NAME.fullmatch(s))
    if not members or len(names) != len(members):
        raise ExportsError(f"the DType enum has {len(members)} members but the library names {len(names)} "
                           f"dtypes ({', '.join(names)}); read the binding before recording them")
    return names

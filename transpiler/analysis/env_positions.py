"""Where Python code names an environment variable, as opposed to merely containing its spelling.

An env-var name position is a string (or keyword) that the process environment, a child process's
environment or a Ray worker's environment is keyed by:

- `os.environ[K]` (read, write, del), `os.environ.get/setdefault/pop(K)`, `K in os.environ`;
- `os.getenv/putenv/unsetenv(K)`;
- `os.environ.update({K: v})` and `update(K=v)`;
- copies of the environment: `dict(os.environ, K=v)`, `{**os.environ, K: v}`, `os.environ | {K: v}`, and
  variables assigned such a copy (`env = os.environ.copy(); env[K] = ...`);
- `env={K: v}` / `env=dict(K=v)` of subprocess calls;
- a dict display that is an environment by its role and its keys: passed as `env=` / `environment=` /
  `envs=` / `extra_env=` to any call (launchers such as launchpad's `PythonProcess(env=...)`), assigned to a
  variable or returned from a function whose name says env (`worker_env = {...}`, `def _prepare_env(i):
  return {...}`), with every key a literal environment-style name (`CUDA_VISIBLE_DEVICES`, `RM_MODEL_NAME`)
  and no value one (a table of names, `{"CUDA_VISIBLE_DEVICES": "ASCEND_RT_VISIBLE_DEVICES"}`, is data);
- Ray: `{"env_vars": {K: v}}` (a runtime_env), `env_vars={K: v}` (RuntimeEnv), `runtime_env["env_vars"][K]`.

`from os import environ, getenv` and `import os as _os` resolve through the import table. A log message,
docstring or any other string that merely spells a variable's name is no position.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import ImportTable, dotted_name
from npu_port.transpiler.analysis.literals import string_value

ENVIRON = "os.environ"
NAME_FUNCTIONS = {"os.getenv": False, "os.putenv": True, "os.unsetenv": False}  # name -> sets the variable
KEY_METHODS = {"get": False, "setdefault": True, "pop": False}  # method -> sets the variable
SUBPROCESS_CALLS = frozenset({
    "subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
    "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
})
COPY_FUNCTIONS = frozenset({"copy.copy", "copy.deepcopy"})
RAY_ENV_KEY = "env_vars"
# Keywords that take an environment for the process a call starts, whatever the callee (subprocess,
# launchpad, mosec, docker's `environment=`): judged with the keys of the dict passed (env_dict).
ENV_KEYWORDS = frozenset({"env", "envs", "environment", "extra_env"})
# A variable's or function's name that says it holds an environment: one of its words (split at `_`).
_ENV_WORDS = frozenset({"env", "envs", "environ", "environment", "environments"})
_ENV_STYLE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


@dataclass(frozen=True)
class EnvName:
    """One env-var name position.

    `node` holds the name: a SimpleString, or the Name of a keyword argument (`update(K=v)`).
    `sets_process_env` is true when the code sets the variable in this process's own environment
    (`os.environ[K] = v`, `setdefault`, `update`, `putenv`); `value` is then the value set.
    """

    node: cst.CSTNode
    name: str
    value: Optional[cst.BaseExpression] = None
    sets_process_env: bool = False


class EnvPositions:
    """Answers "which env-var names does this node hold?" for one file. Remembers variables that
    hold a copy of the environment, so call `track_assignment` on assignments as the walk meets them."""

    def __init__(self, imports: ImportTable):
        self.imports = imports
        self._copies: set[str] = set()
        self._env_dicts: set[cst.Dict] = set()  # dict displays that are environments by their role
        self._defs: list[str] = []  # the enclosing functions' names

    # -- what is an environment mapping ------------------------------------------------------------
    def is_environ(self, expr: cst.BaseExpression) -> bool:
        """`os.environ` itself, under any import spelling."""
        return self.imports.resolve(expr) == ENVIRON

    def is_env_mapping(self, expr: cst.BaseExpression) -> bool:
        """`os.environ`, a copy of it, a variable holding a copy, or a Ray `...["env_vars"]`."""
        if self.is_environ(expr):
            return True
        name = dotted_name(expr)
        if name is not None and name in self._copies:
            return True
        if isinstance(expr, cst.Subscript):
            return string_value(single_index(expr)) == RAY_ENV_KEY
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "copy" and not expr.args:
                return self.is_env_mapping(func.value)
            first = _first_positional(expr)
            if first is None:
                return False
            if self._is_builtin_dict(func) or self.imports.resolve(func) in COPY_FUNCTIONS:
                return self.is_env_mapping(first)
            return False
        if isinstance(expr, cst.Dict):
            return any(isinstance(el, cst.StarredDictElement) and self.is_env_mapping(el.value)
                       for el in expr.elements)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
            return self.is_env_mapping(expr.left)
        return False

    def _is_builtin_dict(self, func: cst.BaseExpression) -> bool:
        return isinstance(func, cst.Name) and func.value == "dict" and self.imports.lookup("dict") is None

    def track_assignment(self, targets: Iterable[cst.BaseExpression], value: Optional[cst.BaseExpression]) -> None:
        """Remember (or forget) variables that hold a copy of the environment."""
        holds_copy = value is not None and self.is_env_mapping(value)
        for target in targets:
            name = dotted_name(target)
            if name is None:
                continue
            if isinstance(value, cst.Dict) and says_env(name.rsplit(".", 1)[-1]) and env_dict(value):
                self._env_dicts.add(value)
            if holds_copy:
                self._copies.add(name)
            else:
                self._copies.discard(name)

    def enter_def(self, name: str) -> None:
        self._defs.append(name)

    def leave_def(self) -> None:
        if self._defs:
            self._defs.pop()

    def track_return(self, value: Optional[cst.BaseExpression]) -> None:
        """A dict returned by a function whose name says env (`def _prepare_env(cid): return {...}`)."""
        if isinstance(value, cst.Dict) and self._defs and says_env(self._defs[-1]) and env_dict(value):
            self._env_dicts.add(value)

    # -- positions -------------------------------------------------------------------------------
    def in_subscript(self, node: cst.Subscript, assigned: Optional[cst.BaseExpression] = None) -> list[EnvName]:
        """`E[K]`; pass the assigned value when the subscript is an assignment target."""
        if not self.is_env_mapping(node.value):
            return []
        key = single_index(node)
        name = string_value(key)
        if key is None or name is None:
            return []
        sets = assigned is not None and self.is_environ(node.value)
        return [EnvName(key, name, assigned if sets else None, sets)]

    def in_comparison(self, node: cst.Comparison) -> list[EnvName]:
        """`K in E`, `K not in E`."""
        out = []
        left = node.left
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)) and self.is_env_mapping(target.comparator):
                name = string_value(left)
                if name is not None:
                    out.append(EnvName(left, name))
            left = target.comparator
        return out

    def in_dict(self, node: cst.Dict) -> list[EnvName]:
        """Keys of `{**E, K: v}`, and of the `env_vars` dict inside a Ray runtime_env `{"env_vars": {K: v}}`."""
        if node in self._env_dicts or self.is_env_mapping(node):
            return list(_dict_names(node))
        for el in node.elements:
            if (isinstance(el, cst.DictElement) and string_value(el.key) == RAY_ENV_KEY
                    and isinstance(el.value, cst.Dict)):
                return list(_dict_names(el.value))
        return []

    def in_binary_operation(self, node: cst.BinaryOperation) -> list[EnvName]:
        """Keys of the literal in `E | {K: v}`."""
        if (isinstance(node.operator, cst.BitOr) and isinstance(node.right, cst.Dict)
                and self.is_env_mapping(node.left)):
            return list(_dict_names(node.right))
        return []

    def in_call(self, node: cst.Call) -> list[EnvName]:
        func = node.func
        resolved = self.imports.resolve(func)
        if resolved in NAME_FUNCTIONS:
            return self._name_function(node, sets=NAME_FUNCTIONS[resolved])
        out: list[EnvName] = []
        if isinstance(func, cst.Attribute) and self.is_env_mapping(func.value):
            own = self.is_environ(func.value)
            method = func.attr.value
            if method in KEY_METHODS:
                first = _first_positional(node)
                name = string_value(first) if first is not None else None
                if first is not None and name is not None:
                    sets = own and KEY_METHODS[method]
                    value = _positional(node, 1) if sets else None
                    out.append(EnvName(first, name, value, sets))
            elif method == "update":
                out.extend(self._update_names(node, sets=own))
        if self._is_builtin_dict(func) and (first := _first_positional(node)) is not None \
                and self.is_env_mapping(first):
            out.extend(_keyword_names(node))  # dict(os.environ, K=v)
        for arg in node.args:
            if arg.keyword is None:
                continue
            kw = arg.keyword.value
            if kw == "env" and resolved in SUBPROCESS_CALLS:
                out.extend(self._env_argument(arg.value))
            elif kw in ENV_KEYWORDS and isinstance(arg.value, cst.Dict) and env_dict(arg.value):
                out.extend(_dict_names(arg.value))
            elif kw == RAY_ENV_KEY and isinstance(arg.value, cst.Dict):
                out.extend(_dict_names(arg.value))  # RuntimeEnv(env_vars={...})
        return out

    def _name_function(self, node: cst.Call, sets: bool) -> list[EnvName]:
        arg = _first_positional(node)
        if arg is None:
            kw = next((a for a in node.args if a.keyword is not None and a.keyword.value == "key"), None)
            arg = kw.value if kw is not None else None
        name = string_value(arg) if arg is not None else None
        if arg is None or name is None:
            return []
        return [EnvName(arg, name, _positional(node, 1) if sets else None, sets)]

    def _update_names(self, node: cst.Call, sets: bool) -> Iterator[EnvName]:
        for arg in node.args:
            if arg.keyword is not None:
                yield EnvName(arg.keyword, arg.keyword.value, arg.value if sets else None, sets)
            elif not arg.star and isinstance(arg.value, cst.Dict):
                for found in _dict_names(arg.value):
                    yield EnvName(found.node, found.name, found.value if sets else None, sets)
            elif not arg.star and isinstance(arg.value, cst.Call) and self._is_builtin_dict(arg.value.func):
                for found in _keyword_names(arg.value):
                    yield EnvName(found.node, found.name, found.value if sets else None, sets)

    def _env_argument(self, value: cst.BaseExpression) -> list[EnvName]:
        """The `env=` of a subprocess call: a dict display or `dict(K=v, ...)`."""
        if isinstance(value, cst.Dict):
            return list(_dict_names(value))
        if isinstance(value, cst.Call) and self._is_builtin_dict(value.func):
            return list(_keyword_names(value))
        return []


def says_env(name: str) -> bool:
    """Whether a variable's or function's name says it holds an environment (`env`, `worker_env`,
    `_prepare_env`, `ENV_VARS`)."""
    return any(word in _ENV_WORDS for word in name.lower().split("_"))


def env_dict(node: cst.Dict) -> bool:
    """A dict display keyed like an environment: at least one element, every key a literal
    environment-style name (`CUDA_VISIBLE_DEVICES`), no `**` spread, no value such a name (a table that
    maps names to names is data, not an environment)."""
    if not node.elements:
        return False
    for el in node.elements:
        if not isinstance(el, cst.DictElement):
            return False
        key = string_value(el.key)
        if key is None or not _ENV_STYLE.fullmatch(key):
            return False
        value = string_value(el.value)
        if value is not None and _ENV_STYLE.fullmatch(value):
            return False
    return True


def single_index(node: cst.Subscript) -> Optional[cst.BaseExpression]:
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return node.slice[0].slice.value
    return None


def _positional(node: cst.Call, index: int) -> Optional[cst.BaseExpression]:
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    return positional[index] if index < len(positional) else None


def _first_positional(node: cst.Call) -> Optional[cst.BaseExpression]:
    return _positional(node, 0)


def _dict_names(node: cst.Dict) -> Iterator[EnvName]:
    for el in node.elements:
        if isinstance(el, cst.DictElement):
            name = string_value(el.key)
            if name is not None:
                yield EnvName(el.key, name, el.value)


def _keyword_names(node: cst.Call) -> Iterator[EnvName]:
    for arg in node.args:
        if arg.keyword is not None:
            yield EnvName(arg.keyword, arg.keyword.value, arg.value)

"""env-var-names on Python's `ast` (core/ast_pass), for a file it leaves unchanged: the LibCST rule's findings
(codemods/env_var_names) where no environment variable is renamed (names with no NPU equivalent, a rename
left because the target name is set beside it, or in device dispatch). `AstEnvPositions` is
analysis/env_positions.EnvPositions read on `ast`. Where the rule would rename a variable the twin
declines and the file takes the LibCST path, as it does with --keep-cuda."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any, Optional

from npu_port.codemods._env_table import EnvVarTable
from npu_port.codemods.env_var_names import EnvVarNames
from npu_port.transpiler.analysis.ast_source import (
    AstImports,
    Decline,
    FStringDepth,
    Source,
    call_arguments,
    dotted,
    plain_string,
)
from npu_port.transpiler.analysis.env_positions import (
    COPY_FUNCTIONS,
    ENVIRON,
    KEY_METHODS,
    NAME_FUNCTIONS,
    RAY_ENV_KEY,
    SUBPROCESS_CALLS,
)
from npu_port.transpiler.core.rules import AstContext

# (the node holding the name: a string literal or a keyword; the name)
EnvName = tuple[Any, str]


class AstEnvPositions:
    """env_positions.EnvPositions on `ast`: the same names, in the same order."""

    def __init__(self, imports: AstImports, source: Source):
        self.imports = imports
        self.source = source
        self._copies: set[str] = set()

    def string(self, node: Optional[ast.AST]) -> Optional[str]:
        return plain_string(self.source, node)

    def single_index(self, node: ast.Subscript) -> Optional[ast.AST]:
        index = node.slice
        if isinstance(index, ast.Slice) or isinstance(index, ast.Tuple) \
                and not self.source.text.startswith("(", self.source.start(index)):
            return None
        return index

    def is_environ(self, expr: ast.AST) -> bool:
        return self.imports.resolve(expr) == ENVIRON

    def is_env_mapping(self, expr: ast.AST) -> bool:
        if self.is_environ(expr):
            return True
        name = dotted(expr)
        if name is not None and name in self._copies:
            return True
        if isinstance(expr, ast.Subscript):
            return self.string(self.single_index(expr)) == RAY_ENV_KEY
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr == "copy" and not call_arguments(expr):
                return self.is_env_mapping(func.value)
            first = _positional(expr, 0)
            if first is None:
                return False
            if self._is_builtin_dict(func) or self.imports.resolve(func) in COPY_FUNCTIONS:
                return self.is_env_mapping(first)
            return False
        if isinstance(expr, ast.Dict):
            return any(key is None and self.is_env_mapping(value) for key, value in zip(expr.keys, expr.values))
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            return self.is_env_mapping(expr.left)
        return False

    def _is_builtin_dict(self, func: ast.AST) -> bool:
        return isinstance(func, ast.Name) and func.id == "dict" and self.imports.lookup("dict") is None

    def track_assignment(self, targets: list[ast.AST], value: Optional[ast.AST]) -> None:
        holds_copy = value is not None and self.is_env_mapping(value)
        for target in targets:
            name = dotted(target)
            if name is None:
                continue
            if holds_copy:
                self._copies.add(name)
            else:
                self._copies.discard(name)

    def in_subscript(self, node: ast.Subscript) -> list[EnvName]:
        if not self.is_env_mapping(node.value):
            return []
        key = self.single_index(node)
        name = self.string(key)
        return [(key, name)] if key is not None and name is not None else []

    def in_comparison(self, node: ast.Compare) -> list[EnvName]:
        out = []
        left = node.left
        for op, comparator in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)) and self.is_env_mapping(comparator):
                name = self.string(left)
                if name is not None:
                    out.append((left, name))
            left = comparator
        return out

    def in_dict(self, node: ast.Dict) -> list[EnvName]:
        if self.is_env_mapping(node):
            return list(self._dict_names(node))
        for key, value in zip(node.keys, node.values):
            if key is not None and self.string(key) == RAY_ENV_KEY and isinstance(value, ast.Dict):
                return list(self._dict_names(value))
        return []

    def in_binary_operation(self, node: ast.BinOp) -> list[EnvName]:
        if isinstance(node.op, ast.BitOr) and isinstance(node.right, ast.Dict) and self.is_env_mapping(node.left):
            return list(self._dict_names(node.right))
        return []

    def in_call(self, node: ast.Call) -> list[EnvName]:
        func = node.func
        resolved = self.imports.resolve(func)
        if resolved in NAME_FUNCTIONS:
            return self._name_function(node)
        out: list[EnvName] = []
        if isinstance(func, ast.Attribute) and self.is_env_mapping(func.value):
            method = func.attr
            if method in KEY_METHODS:
                first = _positional(node, 0)
                name = self.string(first)
                if first is not None and name is not None:
                    out.append((first, name))
            elif method == "update":
                out.extend(self._update_names(node))
        if self._is_builtin_dict(func) and (first := _positional(node, 0)) is not None and self.is_env_mapping(first):
            out.extend(_keyword_names(node))
        for k in node.keywords:
            if k.arg == "env" and resolved in SUBPROCESS_CALLS:
                out.extend(self._env_argument(k.value))
            elif k.arg == RAY_ENV_KEY and isinstance(k.value, ast.Dict):
                out.extend(self._dict_names(k.value))
        return out

    def _name_function(self, node: ast.Call) -> list[EnvName]:
        arg = _positional(node, 0)
        if arg is None:
            arg = next((k.value for k in node.keywords if k.arg == "key"), None)
        name = self.string(arg)
        return [(arg, name)] if arg is not None and name is not None else []

    def _update_names(self, node: ast.Call) -> Iterator[EnvName]:
        for arg in call_arguments(node):
            if isinstance(arg, ast.keyword):
                if arg.arg is not None:
                    yield arg, arg.arg
            elif isinstance(arg, ast.Dict):
                yield from self._dict_names(arg)
            elif isinstance(arg, ast.Call) and self._is_builtin_dict(arg.func):
                yield from _keyword_names(arg)

    def _env_argument(self, value: ast.AST) -> list[EnvName]:
        if isinstance(value, ast.Dict):
            return list(self._dict_names(value))
        if isinstance(value, ast.Call) and self._is_builtin_dict(value.func):
            return list(_keyword_names(value))
        return []

    def _dict_names(self, node: ast.Dict) -> Iterator[EnvName]:
        for key in node.keys:
            name = self.string(key)
            if key is not None and name is not None:
                yield key, name


def _positional(node: ast.Call, index: int) -> Optional[ast.expr]:
    positional = [a for a in node.args if not isinstance(a, ast.Starred)]
    return positional[index] if index < len(positional) else None


def _keyword_names(node: ast.Call) -> Iterator[EnvName]:
    for k in node.keywords:
        if k.arg is not None:
            yield k, k.arg


class AstEnvVarNames(FStringDepth):
    ID = EnvVarNames.ID

    def __init__(self, ctx: AstContext):
        self.ctx = ctx
        self.table = EnvVarTable.for_options(ctx.options)
        self.positions = AstEnvPositions(ctx.imports, ctx.source)
        self._renames: dict[int, tuple[str, Optional[str]]] = {}
        self._seen: set[int] = set()
        self._siblings: dict[int, frozenset[str]] = {}

    def _note(self, node: Any, message: str, **kw: Any) -> None:
        if self._fstrings:
            raise Decline("a name inside an f-string, which Python 3.11 may place otherwise")
        self.ctx.note_at(node.lineno, node.col_offset, self.ID, message, **kw)

    def _take(self, found: list[EnvName]) -> None:
        for node, name in found:
            if id(node) in self._seen:
                continue
            self._seen.add(id(node))
            row = self.table.lookup(name)
            if row is None or row.status == "keep":
                continue
            if row.status == "rename":
                self._renames[id(node)] = (name, row.npu)
            else:
                self._note(node, f"{name} has no {self.ctx.target} equivalent; left as is", severity="warning",
                           hint=row.hint)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.positions.track_assignment(list(node.targets), node.value)
        for t in node.targets:
            if isinstance(t, ast.Subscript):
                self._take(self.positions.in_subscript(t))
        if len(node.targets) > 1:
            keys = [self.positions.single_index(t) for t in node.targets if isinstance(t, ast.Subscript)]
            named = {self.positions.string(k) for k in keys if k is not None}
            for key in keys:
                rename = self._renames.get(id(key)) if key is not None else None
                if rename is not None and rename[1] in named:
                    del self._renames[id(key)]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.positions.track_assignment([node.target], node.value)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._take(self.positions.in_subscript(node))

    def visit_Call(self, node: ast.Call) -> None:
        self._take(self.positions.in_call(node))
        self._note_siblings([(k, k.arg) for k in node.keywords if k.arg is not None])

    def visit_Compare(self, node: ast.Compare) -> None:
        self._take(self.positions.in_comparison(node))

    def visit_Dict(self, node: ast.Dict) -> None:
        self._take(self.positions.in_dict(node))
        self._note_siblings([(key, self.positions.string(key)) for key in node.keys if key is not None])

    def _note_siblings(self, named: list[tuple[ast.AST, Optional[str]]]) -> None:
        if any(id(node) in self._renames for node, _ in named):
            names = frozenset(name for _, name in named if name)
            for node, _ in named:
                self._siblings[id(node)] = names

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self._take(self.positions.in_binary_operation(node))

    def _renamed(self, node: ast.AST) -> None:
        rename = self._renames.get(id(node))
        if rename is None:
            return
        old, new = rename
        if new in self._siblings.get(id(node), ()):
            self._note(node, f"{old} is set next to {new}; left as is (renaming it would set {new} twice)",
                       severity="info", hint=f"delete the {old} entry")
            return
        if self._fstrings:
            raise Decline("a name inside an f-string, which Python 3.11 may place otherwise")
        if not self.ctx.left_as_is(node, self.ID):
            raise Decline("an environment variable renamed")

    def leave_Constant(self, node: ast.Constant) -> None:
        self._renamed(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        self._renamed(node)  # (LibCST's keyword Name is left before the value is walked)

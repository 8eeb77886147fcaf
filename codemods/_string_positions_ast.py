"""The string-position rules (device-string, nccl-backend, amp-device) on Python's `ast` (core/ast_pass), for a
file they leave unchanged: what codemods/_string_positions.StringPositionRule reports there (strings in a
position left in device dispatch or a shim, values passed where a callee takes no NPU setting, a value
keying a dict in the same call, the notes of values that flow through variables and the file's own
functions and are left). Where the rule would rewrite a string the twin declines and the file takes the
LibCST path, as it does with --keep-cuda. `AstPositionFinder` is analysis/positions.PositionFinder
read on `ast`, method for method; where `ast` spells a node otherwise than LibCST (glued string
literals, which LibCST splits; nodes inside an f-string, which Python 3.11 may place otherwise) the file
is declined."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any, Optional

from npu_port.codemods._string_positions import _LocalFlow, _Signature, flow_into_position
from npu_port.codemods.amp_device import AmpDevice
from npu_port.codemods.device_string import DeviceString
from npu_port.codemods.nccl_backend import _IS_NCCL, NcclBackend
from npu_port.transpiler.analysis.ast_source import (
    Decline,
    Source,
    argument_value,
    call_arguments,
    dotted,
    plain_string,
    single_string_token,
)
from npu_port.transpiler.analysis.positions import PositionPolicy
from npu_port.transpiler.core.rules import AstContext
from npu_port.transpiler.tables.mapping import load_table

_STRINGS = (ast.Constant, ast.JoinedStr)


def _star(arg: Any) -> bool:
    return isinstance(arg, ast.Starred) or isinstance(arg, ast.keyword) and arg.arg is None


def _positional(call: ast.Call) -> list[ast.expr]:
    return [a for a in call.args if not isinstance(a, ast.Starred)]


class AstPositionFinder:
    """positions.PositionFinder on `ast`: the same strings, in the same order."""

    def __init__(self, policy: PositionPolicy, ctx: AstContext):
        self.policy = policy
        self.ctx = ctx
        self.source: Source = ctx.source
        self.bound: Any = lambda name: False
        self.converts: Any = lambda token: True  # whether the rule would change a string token's text

    def resolve(self, node: ast.AST) -> Optional[str]:
        return self.ctx.resolve(node)

    # -- strings -------------------------------------------------------------------------------------
    def string(self, node: ast.AST) -> Optional[str]:
        """literals.string_value: the value of one plain string literal (LibCST's SimpleString)."""
        return plain_string(self.source, node)  # (glued literals: no SimpleString, None)

    def leaves(self, expr: Optional[ast.AST]) -> Iterator[ast.AST]:
        """positions.string_leaves."""
        if expr is None:
            return
        if isinstance(expr, _STRINGS):
            if isinstance(expr, ast.JoinedStr) or isinstance(expr.value, (str, bytes)):
                text = self.source.segment(expr)
                if single_string_token(text):
                    yield expr
                elif self.converts(_first_token(text)):
                    # LibCST yields the first piece; a piece the rule leaves is a leaf nothing acts on (each
                    # use of a leaf asks first whether the rule changes it), so only then is it no matter.
                    raise Decline("glued string literals whose first piece the rule changes")
        elif isinstance(expr, ast.Name):
            yield expr
        elif isinstance(expr, ast.IfExp):
            yield from self.leaves(expr.body)
            yield from self.leaves(expr.orelse)
        elif isinstance(expr, ast.BoolOp):
            for value in expr.values:
                yield from self.leaves(value)
        elif isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Mod)):
            yield from self.leaves(expr.left)
        elif isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            for el in expr.elts:
                if not isinstance(el, ast.Starred):
                    yield from self.leaves(el)
        elif isinstance(expr, ast.Dict):
            for key, value in zip(expr.keys, expr.values):
                if key is not None:
                    yield from self.leaves(key)
                    yield from self.leaves(value)
        elif isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr == "format":
                yield from self.leaves(func.value)
            elif dotted(func) in ("field", "dataclasses.field"):
                for k in expr.keywords:
                    if k.arg == "default":
                        yield from self.leaves(k.value)
            elif isinstance(func, ast.Name):
                yield expr

    # -- PositionFinder ------------------------------------------------------------------------------
    def produces(self, value: Optional[ast.AST]) -> bool:
        if value is None:
            return False
        if isinstance(value, ast.Call) and (self.resolve(value.func) or dotted(value.func)) in self.policy.returned_by:
            return True
        return self._compared(value)

    def setting_name(self, target: ast.AST) -> Optional[str]:
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target, ast.Attribute):
            return target.attr
        if isinstance(target, ast.Subscript) and not isinstance(target.slice, ast.Slice) \
                and not (isinstance(target.slice, ast.Tuple) and not self._parenthesized(target.slice)):
            return self.string(target.slice)
        return None

    def _parenthesized(self, node: ast.AST) -> bool:
        return self.source.text.startswith("(", self.source.start(node))

    def excluded(self, call: ast.Call) -> Optional[str]:
        return self.policy.not_a_position(self.resolve(call.func)) if self.policy.not_positions else None

    def argument_leaves(self, call: ast.Call) -> Iterator[ast.AST]:
        for arg in call_arguments(call):
            if not _star(arg) and (not isinstance(arg, ast.keyword) or self.policy.names_setting(arg.arg)):
                yield from self.leaves(argument_value(arg))

    def in_call(self, call: ast.Call) -> Iterator[ast.AST]:
        p = self.policy
        if self.excluded(call):
            return
        positional = _positional(call)
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in p.methods and self.resolve(func) is None:
            indexes = p.methods[func.attr]
        else:
            indexes = p.positional_indexes(self.resolve(func))
        for i in indexes:
            if i < len(positional):
                yield from self.leaves(positional[i])
        for k in call.keywords:
            if k.arg is not None and p.names_setting(k.arg):
                yield from self.leaves(k.value)
        yield from self._defaults_of_lookups(call)
        yield from self._patched_returns(call)
        if isinstance(func, ast.Attribute) and func.attr in ("startswith", "endswith") \
                and self._compared(func.value) and positional:
            yield from self.leaves(positional[0])
        if isinstance(func, ast.Attribute) and func.attr == "add_argument" and p.names_setting(self._argparse_dest(call)):
            for k in call.keywords:
                if k.arg in ("default", "choices", "const"):
                    yield from self.leaves(k.value)

    def _argparse_dest(self, call: ast.Call) -> Optional[str]:
        for k in call.keywords:
            if k.arg == "dest" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, (str, bytes)):
                return self.string(k.value)
        longest = None
        for arg in _positional(call):
            text = self.string(arg)
            if text is not None and (longest is None or text.startswith("--")):
                longest = text
        return longest

    def _patched_returns(self, call: ast.Call) -> Iterator[ast.AST]:
        if not self.policy.returned_by or not isinstance(call.func, (ast.Attribute, ast.Name)):
            return
        name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
        positional = _positional(call)
        target = None
        if name == "patch" and positional:
            target = self.string(positional[0])
        elif name == "object" and isinstance(call.func, ast.Attribute) and dotted(call.func.value) in (
                "patch", "mock.patch", "unittest.mock.patch", "mocker.patch") and len(positional) >= 2:
            attribute = self.string(positional[1])
            owner = self.resolve(positional[0]) or dotted(positional[0])
            target = f"{owner}.{attribute}" if owner and attribute is not None else None
        if target is not None and target in self.policy.returned_by:
            for k in call.keywords:
                if k.arg == "return_value":
                    yield from self.leaves(k.value)

    def _defaults_of_lookups(self, call: ast.Call) -> Iterator[ast.AST]:
        args = _positional(call)
        func = call.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(args) == 3:
            key, default = args[1], args[2]
        elif isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault") and len(args) == 2:
            key, default = args[0], args[1]
        else:
            return
        name = self.string(key)
        if name is not None and self.policy.names_setting(name):
            yield from self.leaves(default)

    def in_annotation(self, name: Optional[str], annotation: Optional[ast.AST]) -> Iterator[ast.AST]:
        if annotation is None or not self.policy.names_setting(name):
            return
        if isinstance(annotation, ast.Subscript) and dotted(annotation.value) in (
                "Literal", "typing.Literal", "typing_extensions.Literal"):
            index = annotation.slice
            if isinstance(index, ast.Tuple) and not self._parenthesized(index):
                for element in index.elts:
                    if isinstance(element, ast.Starred):
                        raise Decline("a starred subscript element")
                    if not isinstance(element, ast.Slice):
                        yield from self.leaves(element)
            elif not isinstance(index, ast.Slice):
                yield from self.leaves(index)

    def in_assign(self, targets: list[ast.AST], value: Optional[ast.AST]) -> Iterator[ast.AST]:
        if value is not None and any(self.policy.names_setting(self.setting_name(t)) for t in targets):
            yield from self.leaves(value)

    def in_dict(self, node: ast.Dict) -> Iterator[ast.AST]:
        for key, value in zip(node.keys, node.values):
            name = self.string(key) if key is not None else None
            if name is not None and self.policy.names_setting(name):
                yield from self.leaves(value)

    def _compared(self, expr: ast.AST) -> bool:
        names = self.policy.compared_with
        if isinstance(expr, ast.Call):
            func = expr.func
            arguments = call_arguments(expr)
            if dotted(func) == "str" and arguments:
                return self._compared(argument_value(arguments[0]))
            name = func.attr if isinstance(func, ast.Attribute) else dotted(func)
            return bool(name) and name.rsplit(".", 1)[-1] in names  # type: ignore[union-attr]
        if isinstance(expr, ast.Attribute) and expr.attr == "type":
            return self._compared(expr.value)
        if isinstance(expr, ast.Name) and self.bound(expr.id):
            return True
        name = self.setting_name(expr)
        return bool(name) and (name in names or self.policy.names_setting(name))

    def in_comparison(self, node: ast.Compare) -> Iterator[ast.AST]:
        operands = [node.left, *node.comparators]
        if any(self._compared(o) for o in operands):
            for o in operands:
                yield from self.leaves(o)


class AstStringPositionRule:
    """StringPositionRule's walk for a file it leaves unchanged; subclasses name the rule (`RULE`)."""

    RULE: Any

    def __init__(self, ctx: AstContext):
        self.ID = self.RULE.ID
        self.ctx = ctx
        self.source = ctx.source
        policy = PositionPolicy.from_data(load_table(ctx.target, "positions")[self.RULE.POSITION])
        self.finder = AstPositionFinder(policy, ctx)
        self.finder.bound = lambda name: name in self._scopes[-1].bound or name in self._scopes[0].bound
        self.finder.converts = self.converts_token
        self._marked: set[int] = set()
        self._scopes: list[_LocalFlow] = [_LocalFlow()]
        self._signatures: dict[str, Optional[_Signature]] = {}
        self._held_args: dict[int, tuple] = {}
        self._deferred: dict[int, tuple] = {}  # id(string) -> (key, string)
        self._returning: set[str] = set()
        self._defaults: dict[int, ast.expr] = {}  # id(ast.arg) -> its default (LibCST's Param.default)
        self._fstrings = 0

    def _at(self, node: ast.AST) -> tuple[int, int]:
        if self._fstrings:
            raise Decline("a string inside an f-string, which Python 3.11 may place otherwise")
        return node.lineno, node.col_offset  # type: ignore[attr-defined]

    def _left(self, node: ast.AST) -> None:
        """PythonRule.rewrite of a string: its note where it is left as it is, else a decline."""
        self._at(node)
        if not self.ctx.left_as_is(node, self.ID):
            raise Decline("a string rewritten")

    def _report(self, node: ast.AST, message: str, *, severity: Any = "warning", hint: str = "") -> None:
        self.ctx.note_at(*self._at(node), self.ID, message, severity=severity, hint=hint)

    def _text(self, node: ast.AST) -> str:
        return self.source.segment(node)

    def converted(self, node: ast.AST) -> bool:
        """StringPositionRule._converted is not None: the literal's text (its leading text for an f-string)
        changes under the rule's new_text."""
        if not isinstance(node, _STRINGS) or isinstance(node, ast.Constant) and not isinstance(node.value, (str, bytes)):
            return False
        return self.converts_token(self.source.segment(node))

    def converts_token(self, token: str) -> bool:
        """The same for one string token's text."""
        body = token.lstrip("rRbBuUfF")
        prefix = token[:len(token) - len(body)]
        if "b" in prefix.lower():
            return False
        quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
        raw: Optional[str] = body[len(quote):len(body) - len(quote)]
        if "f" in prefix.lower():
            raw = _leading_text(raw)  # type: ignore[arg-type]
            if raw is None:
                return False
        new = self.RULE.new_text(raw)
        return new is not None and new != raw

    def _mark(self, nodes) -> None:
        for node in nodes:
            if isinstance(node, ast.Name):
                self._scopes[-1].used.add(node.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                self._returning.add(node.func.id)
            else:
                self._marked.add(id(node))

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._fstrings += 1

    def leave_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._fstrings -= 1
        self._leave_string(node)

    def leave_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, (str, bytes)):
            self._leave_string(node)

    def visit_Return(self, node: ast.Return) -> None:
        signature = self._scopes[-1].signature
        if signature is not None and node.value is not None:
            self._hold_argument(node.value, ("return", signature.name))

    # -- scopes ----------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: Any) -> None:
        self._note_defaults(node.args)
        flow = _LocalFlow()
        if len(self._scopes) == 1:
            args = node.args
            name = node.name
            flow.signature = _Signature(name, [a.arg for a in (*args.posonlyargs, *args.args)],
                                        {a.arg for a in args.kwonlyargs})
            self._signatures[name] = None if name in self._signatures else flow.signature
            for param in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                default = self._defaults.get(id(param))
                if default is not None:
                    self._hold_argument(default, ("param", name, param.arg))
        self._scopes.append(flow)

    visit_AsyncFunctionDef = visit_FunctionDef

    def leave_FunctionDef(self, node: Any) -> None:
        flow = self._scopes.pop()
        if flow.signature is not None:
            flow.signature.positions = {p for p in flow.signature.all_params() if p in flow.used}
        self._settle(flow)

    leave_AsyncFunctionDef = leave_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._note_defaults(node.args)

    def _note_defaults(self, args: ast.arguments) -> None:
        positional = [*args.posonlyargs, *args.args]
        for param, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
            self._defaults[id(param)] = default
        for param, kw_default in zip(args.kwonlyargs, args.kw_defaults):
            if kw_default is not None:
                self._defaults[id(param)] = kw_default

    def leave_Module(self, node: ast.Module) -> None:
        self._settle(self._scopes.pop())
        self._settle_arguments()

    # -- strings passed to the file's own functions ---------------------------------------------
    def _hold_argument(self, value: ast.AST, key: tuple) -> None:
        for leaf in self.finder.leaves(value):
            if not isinstance(leaf, (ast.Name, ast.Call)) and id(leaf) not in self._marked and self.converted(leaf):
                self._held_args.setdefault(id(leaf), key)

    def _hold_call(self, node: ast.Call) -> None:
        if not isinstance(node.func, ast.Name) or self.ctx.imports.binding(node.func.id) is not None \
                or any(_star(a) for a in call_arguments(node)):
            return
        index = 0
        for arg in call_arguments(node):
            if isinstance(arg, ast.keyword):
                self._hold_argument(arg.value, ("call", node.func.id, None, arg.arg))
            else:
                self._hold_argument(arg, ("call", node.func.id, index, None))
                index += 1

    def _settle_arguments(self) -> None:
        for key, original in self._deferred.values():
            if flow_into_position(self._signatures, self._returning, key) is not None:
                self._left(original)

    def _bind(self, targets: list[ast.AST], value: Optional[ast.AST]) -> None:
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and self.finder.produces(value):
            self._scopes[-1].bound.add(targets[0].id)

    def _hold(self, targets: list[ast.AST], value: Optional[ast.AST]) -> None:
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and value is not None:
            for leaf in self.finder.leaves(value):
                if not isinstance(leaf, ast.Name) and id(leaf) not in self._marked:
                    self._scopes[-1].held.setdefault(id(leaf), targets[0].id)

    def _settle(self, flow: _LocalFlow) -> None:
        if not any(var in flow.used for var, _ in flow.rewrites.values()):
            return
        for var, original in flow.rewrites.values():
            if var in flow.used:
                self._left(original)

    # -- positions -------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        self._visit_call(node)
        self._hold_call(node)

    def _visit_call(self, node: ast.Call) -> None:
        why = self.finder.excluded(node)
        if why:
            callee = self.ctx.resolve(node.func)
            for leaf in self.finder.argument_leaves(node):
                if not isinstance(leaf, ast.Name) and self.converted(leaf):
                    self._report(leaf, f"{self._text(leaf)} left as is: `{callee}` takes no NPU {self.RULE.POSITION}",
                                 hint=why)
            return
        leaves = list(self.finder.in_call(node))
        keyed = self._dict_keys_among(node, {id(x) for x in leaves}) \
            if any(isinstance(argument_value(a), ast.Dict) for a in call_arguments(node)) else set()
        for leaf in leaves:
            value = self.finder.string(leaf) if isinstance(leaf, ast.Constant) else None
            if value in keyed and self.converted(leaf):
                self._report(leaf, f"{self._text(leaf)} left as is: the same call keys a dict by it; rename the value "
                                   "and the key together", severity="info")
                leaves = [x for x in leaves if x is not leaf]
        self._mark(leaves)

    def _dict_keys_among(self, call: ast.Call, positions: set[int]) -> set[str]:
        keys: set[str] = set()
        for arg in call_arguments(call):
            value = argument_value(arg)
            if isinstance(value, ast.Dict) and not any(k is not None and id(v) in positions
                                                       for k, v in zip(value.keys, value.values)):
                for key in value.keys:
                    name = self.finder.string(key) if key is not None else None
                    if name is not None:
                        keys.add(name)
        return keys

    def visit_Assign(self, node: ast.Assign) -> None:
        targets: list[ast.AST] = list(node.targets)
        self._mark(self.finder.in_assign(targets, node.value))
        self._hold(targets, node.value)
        self._bind(targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._mark(self.finder.in_assign([node.target], node.value))
        self._bind([node.target], node.value)
        self._mark(self.finder.in_annotation(self.finder.setting_name(node.target), node.annotation))

    def visit_arg(self, node: ast.arg) -> None:
        default = self._defaults.get(id(node))
        if default is not None and self.finder.policy.names_setting(node.arg):
            self._mark(self.finder.leaves(default))
        self._mark(self.finder.in_annotation(node.arg, node.annotation))

    def visit_Dict(self, node: ast.Dict) -> None:
        self._mark(self.finder.in_dict(node))

    def visit_Compare(self, node: ast.Compare) -> None:
        self._mark(self.finder.in_comparison(node))

    def _leave_string(self, node: ast.AST) -> None:
        if id(node) in self._marked:
            if self.converted(node):
                self._left(node)
            return
        key = self._held_args.get(id(node))
        if key is not None and self.converted(node):
            self._at(node)  # (placed later, when the walk is out of any f-string: asked now)
            self._deferred[id(node)] = (key, node)
        var = self._scopes[-1].held.get(id(node))
        if var is not None and self.converted(node):
            self._at(node)
            self._scopes[-1].rewrites[id(node)] = (var, node)



def _first_token(text: str) -> str:
    """The first string token of glued literals' text (Python 3.11: an f-string's fields hold no quote
    of its own kind)."""
    body = text.lstrip("rRbBuUfF")
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    i = len(text) - len(body) + len(quote)
    while i < len(text) and not text.startswith(quote, i):
        i += 2 if text[i] == "\\" else 1
    return text[:i + len(quote)]


def _leading_text(raw: str) -> Optional[str]:
    """The raw text before an f-string's first replacement field (`{{` is text), or None where the
    f-string begins with one (LibCST: its first part is no FormattedStringText)."""
    i = 0
    while i < len(raw):
        if raw[i] == "{":
            if raw.startswith("{{", i):
                i += 2
                continue
            return raw[:i] if i else None
        i += 1
    return raw or None


class AstDeviceString(AstStringPositionRule):
    RULE = DeviceString


class AstAmpDevice(AstStringPositionRule):
    RULE = AmpDevice


class AstNcclBackend(AstStringPositionRule):
    RULE = NcclBackend

    def leave_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "NCCL" and self.ctx.resolve(node) == "torch.distributed.Backend.NCCL" \
                or node.attr == "is_nccl_available" and self.ctx.resolve(node) == _IS_NCCL:
            self._left(node)

    def leave_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not node.level and node.module == "torch.distributed" and len(node.names) == 1 \
                and node.names[0].name == "is_nccl_available":
            self._left(node)

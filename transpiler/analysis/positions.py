"""Which string literals sit in a device, AMP device-type or backend position.

A `PositionPolicy` (from codemods/data/<target>/positions.yaml) names the settings, callees and methods
of one kind of position; `PositionFinder` walks the expression that flows into such a position and
yields the strings whose value is that setting. Everything else (log messages, docstrings, paths,
comments, user identifiers) is never yielded, so no rule can touch it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.literals import string_value


@dataclass(frozen=True)
class PositionPolicy:
    settings: tuple[str, ...]
    positional: dict[str, tuple[int, ...]]
    methods: dict[str, tuple[int, ...]]
    compared_with: tuple[str, ...]
    # callee (`x.*` matches any member of x) -> why its arguments are no position although a keyword is
    # named like one (ray.util.collective takes backend="nccl" but has no HCCL group).
    not_positions: dict[str, str] = field(default_factory=dict)
    # Functions whose result is such a value: a test's stand-in for one (`patch("...get_backend",
    # return_value="nccl")`) returns a position.
    returned_by: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: dict) -> PositionPolicy:
        return cls(
            settings=tuple(data.get("settings", ())),
            positional={k: tuple(v) for k, v in (data.get("positional") or {}).items()},
            methods={k: tuple(v) for k, v in (data.get("methods") or {}).items()},
            compared_with=tuple(data.get("compared_with", ())),
            not_positions=dict(data.get("not_positions") or {}),
            returned_by=tuple(data.get("returned_by", ())),
        )

    def not_a_position(self, callee: Optional[str]) -> Optional[str]:
        """Why the arguments of `callee` are left although they look like positions, or None."""
        if not callee or not self.not_positions:
            return None
        for pattern, why in self.not_positions.items():
            if callee == pattern or (pattern.endswith(".*") and callee.startswith(pattern[:-1])):
                return why
        return None

    def names_setting(self, name: Optional[str]) -> bool:
        if not name:
            return False
        name = name.lstrip("-").replace("-", "_").lower()
        return any(name == s or (s.startswith("_") and name.endswith(s)) for s in self.settings)

    def positional_indexes(self, callee: Optional[str]) -> tuple[int, ...]:
        if callee is None:
            return ()
        if callee in self.positional:
            return self.positional[callee]
        parent = callee.rsplit(".", 1)[0]
        return self.positional.get(parent + ".*", ())


def string_leaves(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The string literals whose text becomes the value of `expr` (or its leading part), the plain
    variables (Name nodes) whose value does, and the calls of plain names (`get_device()`) whose result
    does: a rule may follow those to their assignment or to the function's returns."""
    if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.Name)):
        yield expr
    elif isinstance(expr, cst.ConcatenatedString):
        yield from string_leaves(expr.left)
    elif isinstance(expr, cst.IfExp):
        yield from string_leaves(expr.body)
        yield from string_leaves(expr.orelse)
    elif isinstance(expr, cst.BooleanOperation):
        yield from string_leaves(expr.left)
        yield from string_leaves(expr.right)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Modulo)):
        yield from string_leaves(expr.left)
    elif isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        for el in expr.elements:
            if isinstance(el, cst.Element):
                yield from string_leaves(el.value)
    elif isinstance(expr, cst.Dict):
        for entry in expr.elements:
            if isinstance(entry, cst.DictElement):
                yield from string_leaves(entry.key)
                yield from string_leaves(entry.value)
    elif isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value == "format":
            yield from string_leaves(func.value)  # "cuda:{}".format(i)
        elif dotted_name(func) in ("field", "dataclasses.field"):
            for arg in expr.args:
                if arg.keyword is not None and arg.keyword.value == "default":
                    yield from string_leaves(arg.value)
        elif isinstance(func, cst.Name):
            yield expr  # `f()`: the file's own function may return the string (rules follow its returns)


def _argparse_dest(call: cst.Call) -> Optional[str]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dest" and isinstance(arg.value, cst.SimpleString):
            return arg.value.evaluated_value if isinstance(arg.value.evaluated_value, str) else None
    longest = None
    for arg in call.args:
        if arg.keyword is None and isinstance(arg.value, cst.SimpleString):
            text = arg.value.evaluated_value
            if isinstance(text, str) and (longest is None or text.startswith("--")):
                longest = text
    return longest


class PositionFinder:
    """Yields, node by node, the strings a policy's positions receive. `resolve` is the import table's."""

    def __init__(self, policy: PositionPolicy, resolve: Callable[[cst.BaseExpression], Optional[str]]):
        self.policy = policy
        self.resolve = resolve
        # Plain variables the caller knows to hold such a value (`d = torch.device(...)`): compared like
        # `x.device` (`d.type == "cuda"`). The rules track them per scope (see `produces`).
        self.bound: Callable[[str], bool] = lambda name: False

    def produces(self, value: Optional[cst.BaseExpression]) -> bool:
        """`value` is such a value itself: a call of a function that returns one (the policy's
        `returned_by`: `torch.device(...)`, `dist.get_backend()`), or what a comparison reads as one."""
        if value is None:
            return False
        if isinstance(value, cst.Call) and (self.resolve(value.func) or dotted_name(value.func)) in self.policy.returned_by:
            return True
        return self._compared(value)

    def setting_name(self, target: cst.BaseExpression) -> Optional[str]:
        if isinstance(target, cst.Name):
            return target.value
        if isinstance(target, cst.Attribute):
            return target.attr.value
        if isinstance(target, cst.Subscript) and len(target.slice) == 1:
            index = target.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                value = index.value.evaluated_value
                return value if isinstance(value, str) else None
        return None

    def excluded(self, call: cst.Call) -> Optional[str]:
        """Why this call's arguments are no position (see PositionPolicy.not_positions), or None."""
        return self.policy.not_a_position(self.resolve(call.func)) if self.policy.not_positions else None

    def argument_leaves(self, call: cst.Call) -> Iterator[cst.BaseExpression]:
        """The strings of a call's positional arguments and of its keywords named like a setting."""
        for arg in call.args:
            if not arg.star and (arg.keyword is None or self.policy.names_setting(arg.keyword.value)):
                yield from string_leaves(arg.value)

    def in_call(self, call: cst.Call) -> Iterator[cst.BaseExpression]:
        p = self.policy
        if self.excluded(call):
            return
        positional = [a for a in call.args if a.keyword is None and not a.star]
        indexes: tuple[int, ...] = ()
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in p.methods and self.resolve(func) is None:
            indexes = p.methods[func.attr.value]
        else:
            indexes = p.positional_indexes(self.resolve(func))
        for i in indexes:
            if i < len(positional):
                yield from string_leaves(positional[i].value)
        for arg in call.args:
            if arg.keyword is not None and p.names_setting(arg.keyword.value):
                yield from string_leaves(arg.value)
        yield from self._defaults_of_lookups(call)
        yield from self._parametrized(call)
        yield from self._patched_returns(call)
        yield from self._patched_setting(call)
        if isinstance(func, cst.Attribute) and func.attr.value in ("startswith", "endswith") \
                and self._compared(func.value) and positional:
            yield from string_leaves(positional[0].value)  # str(x.device).startswith("cuda")
        if isinstance(func, cst.Attribute) and func.attr.value in _EQUALITY_ASSERTS and len(positional) >= 2:
            # unittest's assertEqual(x.device.type, "cuda"): the comparison `x.device.type == "cuda"` is.
            first, second = positional[0].value, positional[1].value
            if self._compared(first) or self._compared(second):
                yield from string_leaves(first)
                yield from string_leaves(second)
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument" \
                and p.names_setting(_argparse_dest(call)):
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value in ("default", "choices", "const"):
                    yield from string_leaves(arg.value)

    def _parametrized(self, call: cst.Call) -> Iterator[cst.BaseExpression]:
        yield from parametrized_values(call, self.policy.names_setting)

    def _patched_returns(self, call: cst.Call) -> Iterator[cst.BaseExpression]:
        """`patch("torch.distributed.get_backend", return_value="nccl")` and `patch.object(dist,
        "get_backend", return_value=...)` (unittest.mock, pytest-mock's mocker): the stand-in's result."""
        if not self.policy.returned_by or not isinstance(call.func, (cst.Attribute, cst.Name)):
            return
        name = call.func.attr.value if isinstance(call.func, cst.Attribute) else call.func.value
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        target = None
        if name == "patch" and positional and isinstance(positional[0], cst.SimpleString):
            target = positional[0].evaluated_value
        elif name == "object" and isinstance(call.func, cst.Attribute) and dotted_name(call.func.value) in (
                "patch", "mock.patch", "unittest.mock.patch", "mocker.patch") and len(positional) >= 2 \
                and isinstance(positional[1], cst.SimpleString):
            owner = self.resolve(positional[0]) or dotted_name(positional[0])
            target = f"{owner}.{positional[1].evaluated_value!s}" if owner else None
        if isinstance(target, str) and target in self.policy.returned_by:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "return_value":
                    yield from string_leaves(arg.value)

    def _patched_setting(self, call: cst.Call) -> Iterator[cst.BaseExpression]:
        """The value a setting is set to by name, as an assignment would set it: `setattr(args, "device", v)`,
        `monkeypatch.setattr("pkg.utils.device_type", v)`, `patch("pkg.DEVICE", v)` / `new=v`,
        `patch.object(mod, "device", v)`."""
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name not in ("setattr", "patch", "object"):
            return
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "new"), None)
        if len(positional) >= 3 and name != "patch":
            setting, value = string_value(positional[1]), positional[2]
        elif positional and name != "object":
            target = string_value(positional[0])
            setting = target.rsplit(".", 1)[-1] if target and "." in target else None
            value = positional[1] if len(positional) >= 2 else value
        else:
            return
        if value is not None and self.policy.names_setting(setting):
            yield from string_leaves(value)

    def _defaults_of_lookups(self, call: cst.Call) -> Iterator[cst.BaseExpression]:
        """The default of a lookup of a setting by name (see setting_lookup)."""
        found = setting_lookup(call)
        if found is not None and self.policy.names_setting(found[0]):
            yield from string_leaves(found[1])

    def in_annotation(self, name: Optional[str], annotation: Optional[cst.Annotation]):
        """`device: Literal["cpu", "cuda"]`: the choices of a setting."""
        if annotation is None or not self.policy.names_setting(name):
            return
        node = annotation.annotation
        if isinstance(node, cst.Subscript) and dotted_name(node.value) in ("Literal", "typing.Literal",
                                                                           "typing_extensions.Literal"):
            for element in node.slice:
                if isinstance(element.slice, cst.Index):
                    yield from string_leaves(element.slice.value)

    def in_assign(self, targets: list[cst.BaseExpression], value: Optional[cst.BaseExpression]):
        if value is None:
            return
        if any(self.policy.names_setting(self.setting_name(t)) for t in targets):
            yield from string_leaves(value)
            return
        # `dev, dt = "cuda", torch.bfloat16`: each element of a tuple target takes the element of the
        # same place in a tuple value of the same length.
        for target in targets:
            if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                    and len(target.elements) == len(value.elements) \
                    and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
                for name, element in zip(target.elements, value.elements):
                    if self.policy.names_setting(self.setting_name(name.value)):
                        yield from string_leaves(element.value)

    def in_param(self, param: cst.Param):
        if param.default is not None and self.policy.names_setting(param.name.value):
            yield from string_leaves(param.default)

    def in_dict(self, node: cst.Dict):
        for el in node.elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
                key = el.key.evaluated_value
                if isinstance(key, str) and self.policy.names_setting(key):
                    yield from string_leaves(el.value)

    def _compared(self, expr: cst.BaseExpression) -> bool:
        """`x.device.type`, `device`, `str(x.device)`, `args.device`, `dist.get_backend()`, a bound variable."""
        names = self.policy.compared_with
        if isinstance(expr, cst.Call):
            func = expr.func
            if dotted_name(func) == "str" and expr.args:
                return self._compared(expr.args[0].value)
            # `os.getenv("DEVICE", "cuda") == "cuda"`, `getattr(args, "device", "cuda") == "cuda"`: a read of
            # the setting by name, compared as the setting is (its default changes with it).
            read = setting_read(expr)
            if read is not None and self.policy.names_setting(read[0]):
                return True
            name = func.attr.value if isinstance(func, cst.Attribute) else dotted_name(func)
            return name is not None and name != "" and name.rsplit(".", 1)[-1] in names
        if isinstance(expr, cst.Attribute) and expr.attr.value == "type":
            return self._compared(expr.value)
        if isinstance(expr, cst.Name) and self.bound(expr.value):
            return True
        name = self.setting_name(expr)
        return bool(name) and (name in names or self.policy.names_setting(name))

    def in_comparison(self, node: cst.Comparison):
        operands = [node.left] + [c.comparator for c in node.comparisons]
        if any(self._compared(o) for o in operands):
            for o in operands:
                yield from string_leaves(o)



_EQUALITY_ASSERTS = frozenset({"assertEqual", "assertEquals", "assertNotEqual", "assertNotEquals"})


def parametrized_values(call: cst.Call, names_setting: Callable[[str], bool]) -> Iterator[cst.SimpleString]:
    """The strings a test's parameter named like a setting takes: `@pytest.mark.parametrize("device", ["cpu",
    "cuda"])`, `("device,dtype", [("cuda", x), ...])`, `pytest.param("cuda", marks=...)`, as arguments would
    give them (the test's `if device == "cuda" and not torch.cuda.is_available(): skip` is ported with them)."""
    if not (dotted_name(call.func) or "").endswith("mark.parametrize"):
        return
    values = [a.value for a in call.args if a.keyword is None and not a.star]
    values += [a.value for a in call.args if a.keyword is not None and a.keyword.value == "argvalues"]
    names = string_value(values[0]) if values else None
    if not names or len(values) < 2 or not isinstance(values[1], (cst.List, cst.Tuple)):
        return
    fields = [n.strip() for n in names.split(",")]
    wanted = [i for i, n in enumerate(fields) if names_setting(n)]
    for element in values[1].elements:
        case = element.value
        if isinstance(case, cst.Call) and (dotted_name(case.func) or "").endswith("param"):
            parts = [a.value for a in case.args if a.keyword is None and not a.star]
        elif len(fields) > 1 and isinstance(case, (cst.Tuple, cst.List)):
            parts = [e.value for e in case.elements]
        else:
            parts = [case]
        for i in wanted:
            part = parts[i] if i < len(parts) else None
            if isinstance(part, cst.SimpleString):
                yield part


def setting_read(call: cst.Call) -> Optional[tuple[str, Optional[cst.BaseExpression]]]:
    """(name, default or None) of a lookup by a literal name: `getattr(args, "backend"[, "nccl"])`,
    `kwargs.get("device"[, "cuda"])`, `.pop(...)`, `.setdefault(...)`, `os.getenv("DEVICE"[, "cuda"])`;
    else None."""
    args = [a for a in call.args if a.keyword is None and not a.star]
    func = call.func
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    if isinstance(func, cst.Name) and func.value == "getattr" and len(args) in (2, 3):
        key, rest = args[1].value, args[2:]
    elif method in ("get", "pop", "setdefault") and len(args) in (1, 2):
        key, rest = args[0].value, args[1:]
    elif (method == "getenv" or (isinstance(func, cst.Name) and func.value == "getenv")) and len(args) in (1, 2):
        key, rest = args[0].value, args[1:]
    else:
        return None
    name = string_value(key)
    return (name, rest[0].value if rest else None) if name is not None else None


def setting_lookup(call: cst.Call) -> Optional[tuple[str, cst.BaseExpression]]:
    """(name, default) of a lookup by a literal name with a default (see setting_read); else None."""
    found = setting_read(call)
    return (found[0], found[1]) if found is not None and found[1] is not None else None

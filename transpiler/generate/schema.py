"""Option schemas of the skeleton templates: types, ranges, defaults, and validation of user values.

Each skeleton kind has a `schema.yaml` next to its templates. Validation happens before any template
is rendered, so a bad value never produces a half-written file. Every value that survives validation
has a plain Python type (int, float, bool, str, None), which the renderer turns into literals.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

TYPES = ("int", "float", "bool", "str", "choice", "identifier", "config_name")

# A name that ends up as a file name and a Hydra --config-name: letters, digits, '_', '-', '.'.
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class SchemaError(ValueError):
    """The schema file itself is malformed (a bug in the skeleton, not in the user's input)."""


class OptionError(ValueError):
    """One or more user values are invalid; `problems` lists every one of them."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def _short(value: Any, limit: int = 60) -> str:
    """A value as a message shows it: its repr, cut after `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True)
class Option:
    name: str
    type: str
    help: str
    default: Any = None
    min: Optional[float] = None
    max: Optional[float] = None
    choices: tuple[str, ...] = ()
    nullable: bool = False  # None (YAML null, an empty CLI value) is allowed
    max_length: int = 4096

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def describe_range(self) -> str:
        if self.type == "choice":
            return "one of " + ", ".join(self.choices)
        fmt = (lambda v: str(int(v))) if self.type == "int" else (lambda v: f"{v:g}")
        if self.min is not None and self.max is not None:
            return f"{fmt(self.min)} to {fmt(self.max)}"
        if self.min is not None:
            return f">= {fmt(self.min)}"
        if self.max is not None:
            return f"<= {fmt(self.max)}"
        return ""

    def coerce(self, raw: Any) -> Any:
        """The validated value, or ValueError with a message that names the option."""
        if raw is None or (isinstance(raw, str) and raw == "" and self.nullable):
            if self.nullable:
                return None
            raise ValueError(f"{self.flag}: a value is required")
        value = self._convert(raw)
        self._check_range(value)
        return value

    def _convert(self, raw: Any) -> Any:
        t = self.type
        if t == "bool":
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.lower() in _TRUE | _FALSE:
                return raw.lower() in _TRUE
            raise ValueError(f"{self.flag}: expected true or false, got {_short(raw)}")
        if t == "int":
            if isinstance(raw, bool) or isinstance(raw, float) and not raw.is_integer():
                raise ValueError(f"{self.flag}: expected an integer, got {_short(raw)}")
            try:
                return int(raw)
            except (TypeError, ValueError):
                raise ValueError(f"{self.flag}: expected an integer, got {_short(raw)}") from None
        if t == "float":
            if isinstance(raw, bool):
                raise ValueError(f"{self.flag}: expected a number, got {_short(raw)}")
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ValueError(f"{self.flag}: expected a number, got {_short(raw)}") from None
            if not math.isfinite(value):
                raise ValueError(f"{self.flag}: expected a finite number, got {_short(raw)}")
            return value
        if not isinstance(raw, str):
            raise ValueError(f"{self.flag}: expected text, got {type(raw).__name__} {_short(raw)}")
        if len(raw) > self.max_length:
            raise ValueError(f"{self.flag}: longer than {self.max_length} characters")
        if "\x00" in raw:
            raise ValueError(f"{self.flag}: contains a NUL character")
        if "${" in raw:
            # OmegaConf/Hydra would resolve it as an interpolation (${oc.env:...}) instead of keeping the text.
            raise ValueError(f"{self.flag}: '${{' is not allowed (OmegaConf would resolve it as an interpolation)")
        if t == "choice" and raw not in self.choices:
            raise ValueError(f"{self.flag}: {_short(raw)} is not one of {', '.join(self.choices)}")
        if t == "identifier" and not is_identifier(raw):
            raise ValueError(f"{self.flag}: {_short(raw)} is not a Python identifier (letters, digits, '_'; "
                             "not a keyword)")
        if t == "config_name" and not _CONFIG_NAME.match(raw):
            raise ValueError(f"{self.flag}: {_short(raw)} is not a config name (letters, digits, '_', '-', '.'; "
                             "no path separators)")
        return raw

    def _check_range(self, value: Any) -> None:
        if self.type not in ("int", "float"):
            return
        if self.min is not None and value < self.min:
            raise ValueError(f"{self.flag}: {value!r} is below the minimum {self.min:g}")
        if self.max is not None and value > self.max:
            raise ValueError(f"{self.flag}: {value!r} is above the maximum {self.max:g}")


def is_identifier(text: str) -> bool:
    return text.isidentifier() and text.isascii() and not keyword.iskeyword(text)


@dataclass(frozen=True)
class Constraint:
    """A rule across options: the product of `a` divides (`divides`) or is at most (`at_most`) the
    product of `b`; `sum_at_most` compares sums instead; `at_least` holds when the product of `a` is at
    least `value` (a number, not an option: GRPO needs two or more responses per prompt).

    `when` restricts it to some option values (e.g. only for algorithm=ppo). `message` is formatted
    with the option values.
    """

    rule: str  # "divides" | "at_most" | "sum_at_most"
    a: tuple[str, ...]
    b: tuple[str, ...]
    message: str
    when: tuple[tuple[str, Any], ...] = ()
    value: Optional[float] = None

    def holds(self, values: Mapping[str, Any]) -> bool:
        if any(values.get(k) != v for k, v in self.when):
            return True
        if self.rule == "at_least":
            return self.value is not None and math.prod(values[n] for n in self.a) >= self.value
        if self.rule == "sum_at_most":
            return sum(values[n] for n in self.a) <= sum(values[n] for n in self.b)
        a = math.prod(values[n] for n in self.a)
        b = math.prod(values[n] for n in self.b)
        return b % a == 0 if self.rule == "divides" else a <= b


@dataclass
class Schema:
    kind: str
    summary: str
    template: str
    config_template: Optional[str]
    config_language: Optional[str]
    options: dict[str, Option] = field(default_factory=dict)
    # Companion files the main file needs next to it (file name -> template), e.g. the agent's tools.
    companions: dict[str, str] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    # Checks a framework applies that a product rule cannot say (MindSpeed-RL's validate_rl_args): values in,
    # problems out; they run once every option and constraint holds.
    checks: list[Callable[[Mapping[str, Any]], list[str]]] = field(default_factory=list)

    def defaults(self) -> dict[str, Any]:
        return {name: opt.default for name, opt in self.options.items()}

    def validate(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with `given`, every value checked; raises OptionError listing all problems."""
        problems = []
        values = self.defaults()
        for key, raw in given.items():
            if not isinstance(key, str):  # `~: 1` or `1: 2` in a --from spec
                problems.append(f"option names are text, not {type(key).__name__} {_short(key)}")
                continue
            name = key.replace("-", "_")
            opt = self.options.get(name)
            if opt is None:
                problems.append(f"unknown option {_short(key)} for {self.kind} (known: {', '.join(self.options)})")
                continue
            try:
                values[name] = opt.coerce(raw)
            except ValueError as exc:
                problems.append(str(exc))
        if not problems:
            problems = [c.message.format(**values) for c in self.constraints if not c.holds(values)]
        if not problems:
            problems = [p for check in self.checks for p in check(values)]
        if problems:
            raise OptionError(problems)
        return values


def parse_schema(data: Mapping[str, Any], parents: Mapping[str, Schema] = {}) -> Schema:
    """Build a Schema from its YAML form; `extends` pulls in another kind's options first."""
    try:
        schema = Schema(kind=data["kind"], summary=data["summary"].strip(), template=data["template"],
                        config_template=data.get("config_template"), config_language=data.get("config_language"))
    except KeyError as exc:
        raise SchemaError(f"schema lacks {exc}") from None
    for parent in data.get("extends", []):
        if parent not in parents:
            raise SchemaError(f"{schema.kind}: extends unknown kind {parent!r}")
        schema.options.update(parents[parent].options)
        schema.constraints.extend(parents[parent].constraints)
    for name, spec in (data.get("options") or {}).items():
        schema.options[name] = _parse_option(schema.kind, name, spec)
    for name, template in (data.get("companions") or {}).items():
        if "/" in name or name.startswith(".") or not name:
            raise SchemaError(f"{schema.kind}: companion {name!r} must be a plain file name")
        schema.companions[name] = template
    for name in data.get("drop_options", []):
        schema.options.pop(name, None)
    for c in data.get("constraints", []):
        schema.constraints.append(_parse_constraint(schema, c))
    return schema


def _parse_option(kind: str, name: str, spec: Mapping[str, Any]) -> Option:
    if not is_identifier(name):
        raise SchemaError(f"{kind}: option name {name!r} is not an identifier")
    t = spec.get("type")
    if t not in TYPES:
        raise SchemaError(f"{kind}.{name}: type {t!r} is not one of {TYPES}")
    opt = Option(name=name, type=t, help=spec.get("help", "").strip(), default=spec.get("default"),
                 min=spec.get("min"), max=spec.get("max"), choices=tuple(spec.get("choices", ())),
                 nullable=bool(spec.get("nullable", False)))
    if t == "choice" and not opt.choices:
        raise SchemaError(f"{kind}.{name}: a choice needs choices")
    if not opt.help:
        raise SchemaError(f"{kind}.{name}: every option needs help text")
    try:
        opt.coerce(opt.default)
    except ValueError as exc:
        raise SchemaError(f"{kind}.{name}: the default is invalid: {exc}") from None
    return opt


def _parse_constraint(schema: Schema, spec: Mapping[str, Any]) -> Constraint:
    c = Constraint(rule=spec.get("rule", ""), a=tuple(spec.get("a", ())), b=tuple(spec.get("b", ())),
                   message=spec.get("message", ""), when=tuple((spec.get("when") or {}).items()),
                   value=spec.get("value"))
    needs_b = c.rule != "at_least"
    if (c.rule not in ("divides", "at_most", "sum_at_most", "at_least") or not c.a or bool(c.b) != needs_b
            or not c.message or (c.rule == "at_least") != isinstance(c.value, (int, float))):
        raise SchemaError(f"{schema.kind}: malformed constraint {dict(spec)!r}")
    for name in c.a + c.b + tuple(k for k, _ in c.when):
        if name not in schema.options or (name in c.a + c.b and schema.options[name].type != "int"):
            raise SchemaError(f"{schema.kind}: constraint names {name!r}, which is not an int option")
    return c

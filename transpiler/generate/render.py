"""Renders a skeleton kind: validated options in, generated source text out.

User values reach generated code only through the filters below: `py` (a Python literal via repr),
`yaml` (a YAML scalar via yaml.safe_dump), `sh` (shlex.quote) and `ident` (a checked identifier).
tests/test_generate_security.py asserts that every output expression in a template ends in one of
them, so no template can paste a raw value into code.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Optional

import jinja2
import yaml

from npu_port.transpiler.generate import handoff_checks, msrl_checks
from npu_port.transpiler.generate.contexts import CONTEXT_BUILDERS, npu_env_vars
from npu_port.transpiler.generate.schema import Schema, is_identifier, parse_schema

# kind name -> folder under skeletons/, in dependency order (a schema may extend an earlier one).
KIND_FOLDERS = {
    "verl-train": "verl_train",
    "msrl-train": "msrl_train",
    "vllm-infer": "vllm_infer",
    "pipeline": "pipeline",
}
# Checks a kind's framework applies at start-up, beyond its schema's constraints.
# Checks of a kind's values beyond its schema: each returns the problems it finds.
KIND_CHECKS: dict[str, list[Callable[[Mapping[str, Any]], list[str]]]] = {
    "msrl-train": [msrl_checks.problems], "pipeline": [handoff_checks.problems]}


class RenderError(ValueError):
    pass


def python_literal(value: Any) -> str:
    """Source text of a Python literal equal to `value`; only plain data is accepted."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RenderError(f"not a finite number: {value!r}")
        return repr(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(python_literal(v) for v in value)
        return f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items()) + "}"
    raise RenderError(f"cannot render a {type(value).__name__} as a Python literal")


def yaml_scalar(value: Any) -> str:
    """One YAML flow value (quoted where YAML would otherwise read another type or structure)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise RenderError(f"not a finite number: {value!r}")
    if not (value is None or isinstance(value, (bool, int, float, str, list))):
        raise RenderError(f"cannot render a {type(value).__name__} as YAML")
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=False, width=1 << 30)
    return text.removesuffix("\n...\n").rstrip("\n")


def yaml_block(value: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(value), default_flow_style=False, sort_keys=False, allow_unicode=False,
                          width=1 << 30).rstrip("\n")


def shell_word(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise RenderError(f"cannot render a {type(value).__name__} as a shell word")
    return shlex.quote(str(value))


def identifier(value: Any) -> str:
    if not isinstance(value, str) or not is_identifier(value):
        raise RenderError(f"not a Python identifier: {value!r}")
    return value


_DOC_TEXT = re.compile(r"[A-Za-z0-9 .,:;()=`'/+_<>{}\[\]-]*")


def doc_text(value: Any) -> str:
    """Plain text inside a docstring or a comment: one line, no quotes or backslashes that could end or
    escape it (version numbers and the version set's wording, never a user's free text)."""
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    if text is None or not _DOC_TEXT.fullmatch(text):
        raise RenderError(f"not plain one-line text: {value!r}")
    return text


SAFE_FILTERS = {"py": python_literal, "doc": doc_text, "yaml": yaml_scalar, "yaml_block": yaml_block, "sh": shell_word,
                "ident": identifier}


@cache
def environment() -> jinja2.Environment:
    root = resources.files("npu_port.skeletons")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(SAFE_FILTERS)
    return env


@cache
def schemas() -> dict[str, Schema]:
    root = resources.files("npu_port.skeletons")
    loaded: dict[str, Schema] = {}
    for kind, folder in KIND_FOLDERS.items():
        data = yaml.safe_load((root / folder / "schema.yaml").read_text(encoding="utf-8"))
        loaded[kind] = parse_schema(data, loaded)
        loaded[kind].checks.extend(KIND_CHECKS.get(kind, []))
        if loaded[kind].kind != kind:
            raise RenderError(f"{folder}/schema.yaml names kind {loaded[kind].kind!r}, expected {kind!r}")
    return loaded


@dataclass(frozen=True)
class Rendered:
    kind: str
    main: str
    config: Optional[str]  # the framework config (--config-out), where the kind has one
    config_language: Optional[str]
    companions: Optional[dict[str, str]] = None  # file name -> text, written next to the main file


def template_context(kind: str, values: Mapping[str, Any]) -> dict[str, Any]:
    ctx = dict(values)
    ctx["kind"] = kind
    ctx["npu_env_vars"] = npu_env_vars()
    builder = CONTEXT_BUILDERS.get(kind)
    if builder:
        ctx.update(builder(values))
    return ctx


def _template_path(folder: str, name: str) -> str:
    # A bare name lives in the kind's folder; "other_kind/x.j2" reuses another kind's template.
    return name if "/" in name else f"{folder}/{name}"


def render(kind: str, values: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> Rendered:
    """Render `kind` with already validated `values` (Schema.validate); `extra` overrides derived context."""
    schema = schemas()[kind]
    folder = KIND_FOLDERS[kind]
    env = environment()
    ctx = template_context(kind, values)
    ctx.update(extra or {})
    main = env.get_template(_template_path(folder, schema.template)).render(ctx)
    config = None
    if schema.config_template:
        config = env.get_template(_template_path(folder, schema.config_template)).render(ctx)
    companions = {name: env.get_template(_template_path(folder, template)).render(ctx)
                  for name, template in schema.companions.items()}
    return Rendered(kind, main, config, schema.config_language, companions or None)


def render_partial(template: str, kind: str, values: Mapping[str, Any]) -> str:
    """Render one template file (e.g. the adapter classes for weave) with `kind`'s validated `values`."""
    return environment().get_template(template).render(template_context(kind, values))

"""User values never become code: every template output goes through a literal filter, and hostile
values come out as inert data (or are rejected)."""

from __future__ import annotations

import ast
import subprocess
from importlib import resources

import jinja2
import pytest
import yaml
from jinja2 import nodes

from npu_port.transpiler.generate.render import SAFE_FILTERS, environment, python_literal, render, schemas
from npu_port.transpiler.generate.schema import OptionError

PAYLOAD = 'a"); import os; os.system("x")#'
SHELL_PAYLOAD = "x'; touch /tmp/npu_port_pwned; echo '$(id)`id`"
# Names the templates print that are derived from schema data or constants, never from user text.
TRUSTED_NAMES = {"comment", "kind"}


def _templates() -> list[str]:
    root = resources.files("npu_port.skeletons")
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.j2"))  # type: ignore[attr-defined]


def _unsafe_outputs(node: nodes.Node) -> list[str]:
    bad = []
    for out in node.find_all(nodes.Output):
        for expr in out.nodes:
            if isinstance(expr, nodes.TemplateData):
                continue
            if isinstance(expr, nodes.Filter) and expr.name in SAFE_FILTERS:
                continue
            if isinstance(expr, nodes.Name) and expr.name in TRUSTED_NAMES:
                continue
            if isinstance(expr, nodes.CondExpr) and all(
                    isinstance(e, nodes.Const) for e in (expr.expr1, expr.expr2)):
                continue
            bad.append(f"line {expr.lineno}: {type(expr).__name__}")
    return bad


@pytest.mark.parametrize("template", _templates())
def test_every_template_output_goes_through_a_literal_filter(template):
    source = environment().loader.get_source(environment(), template)[0]
    assert not _unsafe_outputs(environment().parse(source)), template


def test_the_meta_check_catches_a_raw_value():
    tree = jinja2.Environment().parse("x = {{ model_path }}\ny = {{ model_path | py }}")
    assert _unsafe_outputs(tree) == ["line 1: Name"]


def _str_options(kind):
    return [n for n, o in schemas()[kind].options.items() if o.type == "str"]


@pytest.mark.parametrize("kind", ["verl-train", "vllm-infer", "pipeline"])
def test_python_payload_renders_as_an_inert_string(kind):
    options = _str_options(kind)
    rendered = render(kind, schemas()[kind].validate({n: PAYLOAD for n in options}))
    tree = ast.parse(rendered.main)
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "os.system" not in calls
    literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == PAYLOAD]
    assert len(literals) >= len(options)
    if rendered.config:
        flat = yaml.safe_load(rendered.config)
        assert PAYLOAD in str(flat)


def test_shell_and_yaml_payloads_stay_data(tmp_path):
    values = schemas()["msrl-train"].validate({"master_addr": SHELL_PAYLOAD, "tokenizer_path": SHELL_PAYLOAD,
                                               "data_path": PAYLOAD})
    rendered = render("msrl-train", values)
    assert subprocess.run(["bash", "-n"], input=rendered.main.encode()).returncode == 0
    line = next(l for l in rendered.main.splitlines() if l.startswith("MASTER_ADDR="))
    probe = subprocess.run(["bash", "-c", f'{line}\nprintf %s "$MASTER_ADDR"'], capture_output=True, text=True,
                           cwd=tmp_path)
    assert probe.stdout == SHELL_PAYLOAD
    assert not list(tmp_path.iterdir())
    config = yaml.safe_load(rendered.config)
    assert config["megatron_training"]["tokenizer_name_or_path"] == SHELL_PAYLOAD
    assert config["megatron_training"]["data_path"] == PAYLOAD


@pytest.mark.parametrize("value", ["YES", "null", "1e-6", "[a, b]", "{x: 1}", "a: b", "- a", "#c", "'q'"])
def test_yaml_scalars_keep_their_text(value):
    values = schemas()["msrl-train"].validate({"tokenizer_path": value})
    config = yaml.safe_load(render("msrl-train", values).config)
    assert config["megatron_training"]["tokenizer_name_or_path"] == value


@pytest.mark.parametrize("option,value,message", [
    ("config_name", "../../etc/x", "not a config name"),
    ("config_name", "a b", "not a config name"),
    ("tokenizer_path", "${oc.env:HOME}", "interpolation"),
    ("tokenizer_path", "a\x00b", "NUL"),
])
def test_unsafe_names_are_rejected(option, value, message):
    with pytest.raises(OptionError, match=message):
        schemas()["msrl-train"].validate({option: value})


def test_identifier_type_rejects_code():
    from npu_port.transpiler.generate.schema import Option
    opt = Option(name="entry", type="identifier", help="x", default="main")
    assert opt.coerce("train_step") == "train_step"
    for bad in ("main()", "import", "a.b", "x; y", "1abc"):
        with pytest.raises(ValueError):
            opt.coerce(bad)


def test_python_literal_only_accepts_data():
    assert python_literal([1, 2.5, True, None, "x'\""]) == "[1, 2.5, True, None, 'x\\'\"']"
    assert ast.literal_eval(python_literal({"k": ("a",)})) == {"k": ("a",)}
    with pytest.raises(ValueError):
        python_literal(object())
    with pytest.raises(ValueError):
        python_literal(float("nan"))

"""YAML files whose trigger words lie only in comments are not loaded (ruamel's pure-Python loader
is most of a YAML file's cost): libyaml's events say where the keys and values are, and the triggers
are looked for in the text without its comments. Each case that is not loaded is checked against every
rule run without the prefilter: none may change or report anything there."""

from __future__ import annotations

import pytest

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.text.yaml_code import without_comments


@pytest.mark.parametrize("text,expected", [
    ("a: 1 # cuda\n", "a: 1 \n"),
    ("# cuda\na: 1\n", "\na: 1\n"),
    ("a: b#cuda\n", "a: b#cuda\n"),  # `#` inside a plain scalar: no comment
    ("a: 'x # cuda'\n", "a: 'x # cuda'\n"),
    ("run: |\n  # cuda in a block scalar\n  x\n", "run: |\n  # cuda in a block scalar\n  x\n"),
    ("l: [a, # cuda\n  b]\n", "l: [a, \n  b]\n"),
    ("a: &x1 v # cuda\r\nb: \"é\" # cuda\r\n", "a: &x1 v \r\nb: \"é\" \r\n"),
    ("k: v\n", "k: v\n"),
])
def test_yaml_comments_are_found_by_libyaml(text, expected):
    assert without_comments(text) == expected


@pytest.mark.parametrize("text", [
    "a: &x [1]\nb: *x  # cuda\n",  # an alias: the loader's own bomb guard must see it
    "a: [1\n# cuda\n",  # libyaml refuses it: the conversion reports the error as before
    "{{- if .Values.gpu }}\nimage: x  # cuda\n{{- end }}\n",  # a Helm template, loaded masked
])
def test_yaml_libyaml_cannot_tell_about_is_loaded_as_before(text):
    assert without_comments(text) is None
    assert Engine(Settings()).needs_parse(text.encode(), "yaml")


@pytest.mark.parametrize("text", [
    "model:\n  # device: cuda\n  device: npu\n",
    "# export CUDA_VISIBLE_DEVICES=0\nenv:\n  HOME: /root\n",
    "resources:\n  limits:\n    cpu: 4  # was nvidia.com/gpu: 1\n",
])
def test_yaml_with_trigger_words_only_in_comments_is_not_loaded(text):
    data = text.encode()
    engine = Engine(Settings(select=("ALL",)))
    assert engine.triggered(data, "yaml")[0], "the byte search alone would load it"
    assert engine.needs_parse(data, "yaml") == []
    full = Engine(Settings(select=("ALL",)), prefilter=False).convert(data, "c.yaml")
    assert full.output is None and not full.outcome.findings


@pytest.mark.parametrize("text", [
    "trainer:\n  device: cuda  # cuda\n",
    "run: |\n  # comment in a script\n  CUDA_VISIBLE_DEVICES=0 python x.py\n",
])
def test_yaml_with_a_trigger_outside_comments_is_loaded(text):
    assert Engine(Settings()).needs_parse(text.encode(), "yaml")

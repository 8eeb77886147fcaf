"""YAML documents built from libyaml's events (text/yaml_c_load.py) are ruamel's own, or not built at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from npu_port.transpiler.text import yaml_c_load

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_YAML = sorted(p for p in (ROOT / "fixtures").rglob("*") if p.suffix in (".yaml", ".yml"))


def ruamel_load(text: str) -> list:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True
    return list(yaml.load_all(text))


def difference(a, b, path="$"):
    """Where two loaded documents differ: type, value, key order, line/column data, flow style, anchor, merge."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} != {type(b).__name__}"
    anchor = (getattr(getattr(a, "anchor", None), "value", None), getattr(getattr(b, "anchor", None), "value", None))
    if anchor[0] != anchor[1]:
        return f"{path}: anchor {anchor}"
    if isinstance(a, (CommentedMap, CommentedSeq)):
        if (a.lc.line, a.lc.col, a.lc.data and dict(a.lc.data)) != (b.lc.line, b.lc.col, b.lc.data and dict(b.lc.data)):
            return f"{path}: positions {a.lc.data} != {b.lc.data}"
        if a.fa.flow_style() != b.fa.flow_style():
            return f"{path}: flow style"
        if isinstance(a, CommentedSeq):
            pairs = list(zip(range(len(a)), a, b)) if len(a) == len(b) else None
        else:
            pairs = [(k, a[k], b[k]) for k in a] if list(a) == list(b) else None
            merges = [list(getattr(m, "merge", None) or []) for m in (a, b)]
            if len(merges[0]) != len(merges[1]):
                return f"{path}: merges"
            for x, y in zip(*merges):
                found = difference(x[1] if isinstance(x, tuple) else x, y[1] if isinstance(y, tuple) else y, path + "<<")
                if found:
                    return found
        if pairs is None:
            return f"{path}: keys or length"
        for k, x, y in pairs:
            found = difference(x, y, f"{path}.{k}")
            if found:
                return found
        return None
    return None if repr(a) == repr(b) else f"{path}: {a!r} != {b!r}"


def assert_same(text: str) -> None:
    built = yaml_c_load.load_all(text)
    assert built is not None
    expected = ruamel_load(text)
    assert len(built) == len(expected)
    for x, y in zip(expected, built):
        assert difference(x, y) is None


@pytest.mark.parametrize("path", FIXTURE_YAML, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fixture_loads_as_ruamel_loads_it(path):
    text = path.read_text(encoding="utf-8")
    built = yaml_c_load.load_all(text)
    if built is None:  # declined: nothing to compare (the cases below say which)
        return
    expected = ruamel_load(text)
    assert len(built) == len(expected)
    for x, y in zip(expected, built):
        assert difference(x, y) is None


def test_most_fixtures_are_built_from_events():
    # The point of the module: a declined text costs a ruamel load as before, so nearly all must be built.
    built = sum(yaml_c_load.load_all(p.read_text(encoding="utf-8")) is not None for p in FIXTURE_YAML)
    assert built >= 0.9 * len(FIXTURE_YAML)


@pytest.mark.parametrize("text", [
    "\ufeffa: 1\nb: [x, y]\n",  # a BOM
    "a: 1\r\nb:\r\n  c: d\r\n",  # CRLF
    "a: 1\rb:\r  c: d\r",  # lone CR
    "a: 'ü' \nb:   名\nc: [名, 2]\nd: '😀😀'\ne: {f: 😀, g: h}\n",  # columns count characters
    "a: yes\nb: on\nc: 0o17\nd: 017\ne: 1_000\nf: 1:20\ng: .inf\nh: ~\ni: 2001-12-14\nj: 0x1F\nk: 1e3\nl: .5\n",
    "a:\nb:\n  c:\n\nd:\n",  # empty values: placed where the next token starts
    "- \n- a\n-\n- a:\n- c:\n  d:\n",  # empty items, empty values in a sequence's mappings
    "? a\n? b\n: 1\n",  # an explicit key without a value
    "a: |\n  x\n   y\nb: >-\n  p\n  q\n\nc: |+\n  z\n\n",
    "a: \"x\\ty\\u00e9\"\nb: \"\\/\"\n'c d': 1\n\"e\": {'f': 2}\n",
    "a: 1\n---\nb: 2\n...\n---\n- c\n",
    "a: 1\na: 2\nb: {c: 1, c: 2}\n",  # duplicate keys, allowed
    "? [a, b]\n: 1\n",
    "base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\ne: &s [1]\nf: *s\ng: &n\nh: *n\n",  # anchors, aliases, a merge
    "a: this is\n  a long\n\n  plain\nb: c\n",
    "",
    "# only a comment\n",
])
def test_odd_texts_load_as_ruamel_loads_them(text):
    assert_same(text)


@pytest.mark.parametrize("text", [
    "a:\t1\n",  # ruamel refuses the tab, libyaml takes it
    "a: x\x85b: y\n", "a: x\u2028b: y\n", "a: 'x\u2029y'\n",  # line breaks in YAML 1.1 only
    "%YAML 1.2\n---\na: 1\n",  # a directive
    "a: !!str 1\n",  # an explicit tag
    "a: &x 1\nb: &x 2\n",  # a reused anchor (ruamel warns)
    "a: *nowhere\n",  # an undefined alias (ruamel's error)
    "a: {b, c: 1}\n", "a: [b, {c: }]\n",  # empty values in flow mappings
    "a: # c\n  # d\nb: 1\n", "x:\n  a:\n    # note\n  b: 2\n",  # a comment after an empty value
    "a: [1, 2\n",  # libyaml refuses it: ruamel reports its own error
    "".join("  " * i + f"k{i}:\n" for i in range(260)) + "  " * 260 + "v: 1\n",  # deeper than the builder goes
])
def test_what_the_parsers_may_read_differently_is_left_to_ruamel(text):
    assert yaml_c_load.load_all(text) is None


def test_the_yaml_rules_load_through_it(monkeypatch):
    from npu_port.transpiler.text import yaml_edit

    calls = []
    monkeypatch.setattr(yaml_c_load, "load_all", lambda text: calls.append(text) or None)
    assert yaml_edit.YamlDocument("a: 1\n").documents == [{"a": 1}]  # declined: ruamel's load
    assert calls == ["a: 1\n"]

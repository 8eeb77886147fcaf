"""Hostile input is refused before the expensive step, not after a clock runs out.

Each test makes the expensive step (LibCST's parser, ruamel's loader) fail the test if it is reached:
the bound is in the input the guard counts, so the tests need no timing and hold on any machine.
"""

from __future__ import annotations

import pytest

from npu_port.transpiler.bulk.worker import Task, convert_task
from npu_port.transpiler.core import files
from npu_port.transpiler.core.settings import Settings

BILLION_LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}' if prev else 'lol'] * 9)}]\n"
    for prev, name in zip([None, *"abcdefgh"], "abcdefghi"))


@pytest.fixture
def no_libcst_parse(monkeypatch):
    import libcst

    def refuse(*args, **kwargs):
        raise AssertionError("LibCST's parser was reached")

    monkeypatch.setattr(libcst, "parse_module", refuse)


@pytest.fixture
def no_yaml_load(monkeypatch):
    from ruamel.yaml import YAML

    def refuse(self, *args, **kwargs):
        raise AssertionError("ruamel composed the document")

    monkeypatch.setattr(YAML, "load_all", refuse)


def convert(data: bytes, name: str, language):
    return convert_task(Task(0, name, name, language, data=data), Settings())


@pytest.mark.parametrize("operator", [" + a", " and a", " or a", " if b else a", " * -a"])
def test_a_10000_term_expression_never_reaches_libcst(operator, no_libcst_parse):
    data = b"import torch\nx = torch.cuda.device_count()" + operator.encode() * 10_000 + b"\n"
    outcome = convert(data, "long.py", "python").outcome
    assert outcome.status == "failed"
    assert "expression too long" in outcome.error or "nested too deeply" in outcome.error


def test_a_long_chain_inside_nested_statements_is_found(no_libcst_parse):
    data = (b"import torch\nclass C:\n    def f(self):\n        try:\n            pass\n        except E:\n"
            b"            y = (torch.cuda.is_available()" + b" or\n a" * 2500 + b")\n")
    outcome = convert(data, "nested.py", "python").outcome
    assert outcome.status == "failed"
    assert outcome.error == ("expression too long for the parser (2500 operators in one expression at line 7; "
                             "the limit is 2000)")


def test_chains_at_the_limit_and_comparisons_pass():
    at_limit = b"x = a" + b" + a" * files.MAX_EXPRESSION_OPERATORS + b"\n"
    assert files.parse_refusal(at_limit) is None
    # LibCST keeps comparisons flat, as CPython does: a long one costs it nothing special.
    assert files.parse_refusal(b"x = a" + b" < a" * 5000 + b"\n") is None
    # Many short expressions are not one long one.
    assert files.parse_refusal(b"".join(b"x%d = a + b - c * d\n" % i for i in range(2000))) is None


def test_longest_expression_counts_one_chain():
    import ast

    data = b"y = -a + b * c\nz = (p and q and r) or s\nw = f(a + b, c + d)\n" * 400
    assert files.longest_expression(ast.parse(data), data, limit=0)[0] == 3
    data += b"def f():\n    return a - b - c - d - (e < f)\n"
    assert files.longest_expression(ast.parse(data), data, limit=0) == (4, 1202)


def test_billion_laughs_is_refused_before_ruamel_composes_it(no_yaml_load):
    data = ("device: cuda\n" + BILLION_LAUGHS + "backend: *i\n").encode()
    outcome = convert(data, "laughs.yaml", "yaml").outcome
    assert outcome.status == "failed"
    assert "billion laughs" in outcome.error and "refused before loading" in outcome.error


def test_alias_counting_stops_at_the_bound(monkeypatch):
    """The count ends at the first alias past the bound, however far the document would expand."""
    import yaml

    seen = []
    parse = yaml.parse

    def counting(text, Loader):
        for event in parse(text, Loader=Loader):
            seen.append(event)
            yield event

    monkeypatch.setattr(yaml, "parse", counting)
    deeper = BILLION_LAUGHS + "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("ijklm", "jklmn"))
    assert files.yaml_alias_bomb(deeper) is not None
    assert len(seen) < 200  # the document has about 150 events; expanded, 9**14


def test_yaml_with_ordinary_anchors_loads():
    text = "defaults: &d {device: cuda, backend: nccl}\ntrain:\n  <<: *d\n  lr: 1\neval: *d\n"
    assert files.yaml_alias_bomb(text) is None
    assert convert(text.encode(), "conf.yaml", "yaml").outcome.status != "failed"


def test_deep_yaml_is_refused_before_ruamel_composes_it(no_yaml_load):
    if not hasattr(pytest.importorskip("yaml"), "CSafeLoader"):
        pytest.skip("the depth check asks libyaml")
    data = b"device: cuda\nx: " + b"[" * 1200 + b"]" * 1200 + b"\n"
    outcome = convert(data, "deep.yaml", "yaml").outcome
    assert outcome.status == "failed" and "nested too deeply" in outcome.error


def test_the_lexer_reads_a_line_of_from_words_once():
    """What lies between `from` and `import` is read as a dotted name, so a word not followed by `import`
    ends the attempt at once. (Read as "anything up to an import", each of the 40,000 words below scanned
    the rest of the line: hours of the prefilter for 200 KB, before any per-file bound applied.)"""
    from npu_port.transpiler.analysis.source_facts import scan

    facts = scan(b"import os\nx = 1\n" + b"from " * 40_000 + b"\nfrom a . b import (c,\n d)\n")
    assert facts.imported_roots == {"os", "a"}
    assert [type(s).__name__ for s in facts.code_imports or ()] == ["Import", "ImportFrom"]


def test_grouping_parentheses_are_unwrapped_to_a_bounded_depth():
    from npu_port.transpiler.analysis.source_facts import scan

    shallow = scan(b"import torch\nx = " + b"(" * 3 + b"torch" + b")" * 3 + b".npu.nope()\n")
    assert shallow.dotted_chains(frozenset({"torch.npu"})) == ("torch.npu.nope",)
    deep = scan(b"import torch\nx = " + b"(" * 5000 + b"torch" + b")" * 5000 + b".npu.nope()\n")
    assert deep.dotted_chains(frozenset({"torch.npu"})) is None  # past the bound: the scout asks the ast


def test_an_unclosed_import_list_is_read_to_its_line_end():
    from npu_port.transpiler.analysis.source_facts import scan

    facts = scan(b"from torch_npu import (a,\n" * 2000)
    assert facts.imported_roots == {"torch_npu"}
    assert facts.code_imports is None  # the statements cut at their line ends parse as nothing

"""codemods/_yaml_entries.py: where the rules that add YAML settings insert their lines."""

from __future__ import annotations

from npu_port.codemods._yaml_entries import child_lines, entry_below, indent_step
from npu_port.transpiler.text.yaml_edit import YamlDocument


def _insert(text: str, insertion) -> str:
    offset, new = insertion
    return text[:offset] + new + text[offset:]


def test_entry_below_keeps_the_indentation_and_the_comment_line():
    text = "quant:\n  bits: 4  # nf4\n  method: bnb\n"
    doc = YamlDocument(text)
    quant = doc.documents[0]["quant"]
    assert _insert(text, entry_below(doc, quant, "bits", "double: false")) == \
        "quant:\n  bits: 4  # nf4\n  double: false\n  method: bnb\n"


def test_entry_below_the_last_line_without_a_newline():
    text = "bits: 4"
    doc = YamlDocument(text)
    assert _insert(text, entry_below(doc, doc.documents[0], "bits", "double: false")) == "bits: 4\ndouble: false"


def test_no_entry_where_the_layout_is_not_one_of_block_lines():
    flow = YamlDocument("q: {bits: 4}\n")
    assert entry_below(flow, flow.documents[0]["q"], "bits", "x: 1") is None
    in_a_sequence = YamlDocument("- bits: 4\n  method: bnb\n")
    assert entry_below(in_a_sequence, in_a_sequence.documents[0][0], "bits", "x: 1") is None
    block_scalar = YamlDocument("note: |\n  two\n  lines\nbits: 4\n")
    assert entry_below(block_scalar, block_scalar.documents[0], "note", "x: 1") is None


def test_child_lines_nest_in_the_files_indentation():
    text = "a:\n    b:\n        c: 1\n    d: 2\n"
    doc = YamlDocument(text)
    assert indent_step(doc) == 4
    root = doc.documents[0]
    assert _insert(text, child_lines(doc, root, "a", {"e": {"f": "false"}})) == \
        "a:\n    e:\n        f: false\n    b:\n        c: 1\n    d: 2\n"


def test_child_lines_refuse_a_flow_or_empty_mapping():
    doc = YamlDocument("a: {b: 1}\nc: {}\n")
    root = doc.documents[0]
    assert child_lines(doc, root, "a", {"x": "1"}) is None
    assert child_lines(doc, root, "c", {"x": "1"}) is None

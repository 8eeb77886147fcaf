"""Where a new entry goes in a block-style YAML mapping, written as the file is: the rules that add settings
(bitsandbytes-npu-yaml, yaml-verl-npu-settings) insert text lines, never dump the document."""

from __future__ import annotations

from typing import Any, Optional

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from npu_port.transpiler.text.yaml_edit import YamlDocument


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _key_indent(doc: YamlDocument, mapping: CommentedMap, key: Any) -> Optional[int]:
    """The column of `key`, None where something else shares its line (`- key: v` in a sequence)."""
    start, _ = doc.key_span(mapping, key)
    line = _line_start(doc.text, start)
    return start - line if not doc.text[line:start].strip(" ") else None


def entry_below(doc: YamlDocument, mapping: CommentedMap, key: Any, entry: str) -> Optional[tuple[int, str]]:
    """(offset, text) that puts the line `entry` just below the entry `key` of a block mapping, at its
    indentation; None where the value is not one scalar on the key's line or the mapping is a flow one."""
    if mapping.fa.flow_style() or isinstance(mapping[key], (CommentedMap, CommentedSeq)):
        return None
    indent = _key_indent(doc, mapping, key)
    key_start, _ = doc.key_span(mapping, key)
    _, end = doc.value_span(mapping, key)
    text = doc.text
    if indent is None or "\n" in text[key_start:end] or text[end - 1:end] in "|>":
        return None
    nl = text.find("\n", end)
    if nl < 0:
        return len(text), "\n" + " " * indent + entry
    return nl + 1, " " * indent + entry + "\n"


def indent_step(doc: YamlDocument) -> int:
    """How far the file indents a nested mapping (the first one under a top-level key), 2 if none."""
    for root in doc.documents:
        if not isinstance(root, CommentedMap):
            continue
        for value in root.values():
            if isinstance(value, CommentedMap) and value and not value.fa.flow_style():
                indent = _key_indent(doc, value, next(iter(value)))
                if indent:
                    return indent
    return 2


def child_lines(doc: YamlDocument, parent: CommentedMap, key: Any, tree: dict[str, Any]) -> Optional[tuple[int, str]]:
    """(offset, text) that adds `tree` (nested keys; a leaf is the value text) as the first entries of the
    block mapping `parent[key]`, just below the `key:` line; None where that mapping is a flow one, is
    empty, or shares its line with something else."""
    mapping = parent[key]
    if not isinstance(mapping, CommentedMap) or not mapping or mapping.fa.flow_style():
        return None
    indent = _key_indent(doc, mapping, next(iter(mapping)))
    if indent is None:
        return None
    _, key_end = doc.key_span(parent, key)
    nl = doc.text.find("\n", key_end)
    if nl < 0:
        return None
    step = indent_step(doc)

    def render(node: dict[str, Any], at: int) -> list[str]:
        lines = []
        for name, value in node.items():
            if isinstance(value, dict):
                lines += [" " * at + f"{name}:", *render(value, at + step)]
            else:
                lines.append(" " * at + f"{name}: {value}")
        return lines
    return nl + 1, "".join(line + "\n" for line in render(tree, indent))

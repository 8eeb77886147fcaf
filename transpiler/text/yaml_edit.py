"""Targeted edits of YAML files: ruamel.yaml finds where a key or scalar is, the text is edited there.

Dumping a round-trip document back can still reflow long lines, re-indent sequences and requote
strings, so nothing is dumped: rules replace the exact span of one scalar token, and every other
byte (comments, key order, quoting, blank lines) stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Optional

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from npu_port.transpiler.core.files import yaml_alias_bomb, yaml_too_deep
from npu_port.transpiler.core.python_source import SourceError
from npu_port.transpiler.text import yaml_c_load
from npu_port.transpiler.text.go_template import is_go_template, mask
from npu_port.transpiler.text.text_edits import Edit, ParsedTexts, SpanEditRule, line_starts


class YamlDocument:
    """The documents of one YAML text, with offsets of keys and values."""

    def __init__(self, text: str):
        self.text = text
        # Refused before ruamel composes anything: its pure-Python parser takes seconds to find a
        # nesting it cannot take, and walking a document whose aliases multiply it never ends.
        bomb = yaml_alias_bomb(text)
        if bomb is not None:
            raise SourceError(bomb)
        if yaml_too_deep(text):
            raise SourceError("YAML nested too deeply to convert (more than 1000 levels)")
        try:
            self.documents: list[Any] = _load_all(text)
        except YAMLError as exc:
            # A Helm template parses once its `{{ ... }}` actions are masked (same offsets: the rules'
            # spans are the template's); the error is the template's own when even that fails.
            masked = mask(text) if is_go_template(text) else None
            documents = _load_or_none(masked) if masked is not None else None
            if masked is None or documents is None:
                mark = getattr(exc, "problem_mark", None)
                where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
                problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                raise SourceError(f"YAML error{where}: {problem}") from None
            self.documents, self.text = documents, masked
        self.line_starts = line_starts(text)

    def offset(self, line: int, col: int) -> int:
        """0-based (line, col) as ruamel reports them -> offset in the text."""
        return self.line_starts[line] + col

    def key_span(self, mapping: CommentedMap, key: Any) -> tuple[int, int]:
        start = self.offset(*mapping.lc.key(key))
        return start, scalar_end(self.text, start, in_key=True)

    def value_span(self, mapping: CommentedMap, key: Any) -> tuple[int, int]:
        start = self.offset(*mapping.lc.value(key))
        return start, scalar_end(self.text, start, in_key=False)

    def mappings(self) -> Iterator[tuple[tuple[str, ...], CommentedMap]]:
        """Every mapping with the path of keys that leads to it (sequence items add no key)."""
        for doc in self.documents:
            yield from _walk(doc, ())


def _load_all(text: str) -> list[Any]:
    # The same documents from libyaml's events where it can promise them (text/yaml_c_load.py): a
    # fraction of ruamel's own parse.
    documents = yaml_c_load.load_all(text)
    if documents is not None:
        return documents
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True
    return list(yaml.load_all(text))


def _load_or_none(text: str) -> Optional[list[Any]]:
    try:
        return _load_all(text)
    except YAMLError:
        return None


def _walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], CommentedMap]]:
    if isinstance(node, CommentedMap):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, path + (str(key),))
    elif isinstance(node, CommentedSeq):
        for item in node:
            yield from _walk(item, path)


def scalar_end(text: str, start: int, *, in_key: bool) -> int:
    """The end of the scalar token that starts at `start` (quoted or plain, block or flow context)."""
    if start >= len(text):
        return start
    q = text[start]
    if q == '"':
        i = start + 1
        while i < len(text) and text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        return min(i + 1, len(text))
    if q == "'":
        i = start + 1
        while i < len(text):
            if text[i] == "'":
                if text.startswith("''", i):
                    i += 2
                    continue
                return i + 1
            i += 1
        return len(text)
    i = start
    while i < len(text) and text[i] != "\n":
        if text[i] in ",]}" or text.startswith(" #", i) or (in_key and text[i] == ":" and
                                                            text[i + 1:i + 2] in (" ", "\n", "")):
            break
        i += 1
    while i > start and text[i - 1] in " \t":
        i -= 1
    return i


def unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] == "'":
        return token[1:-1].replace("''", "'")
    if len(token) >= 2 and token[0] == token[-1] == '"':
        return token[1:-1]
    return token


parse_yaml = ParsedTexts(YamlDocument)  # (ctx, text) -> (YamlDocument, Positions), one parse per text


class YamlRule(SpanEditRule):
    """A rule over YAML files: `check(doc)` finds keys and values and calls `replace` / `report`."""

    LANGUAGE = "yaml"
    PARSE = parse_yaml

    def check(self, doc: YamlDocument) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def replace(self, span: tuple[int, int], expected: str, new: str, message: str, *,
                portable: Optional[Callable[[], Optional[str]]] = None) -> bool:
        """Replace the token at `span` when it reads `expected`, keeping its quotes; with --keep-cuda by
        `portable()` instead (SpanEditRule.portable_text)."""
        start, end = span
        token = self.parsed.text[start:end]
        if unquote(token) != expected or self.positions.is_silenced(self.ID, start):
            return False
        form = self.portable_text(start, new, message, portable)
        if form is None:
            return False
        new = form
        if token[:1] in "'\"" and len(token) >= 2:
            new_token = token[0] + new + token[-1]
        else:
            new_token = new
        self.edits.append(Edit(start, end, new_token))
        line, col = self.positions.line_col(start)
        self.ctx.add(self.ID, line, col, message, kind="change")
        return True

    def add_entry(self, insertion: tuple[int, str], at: int, message: str, *, new: str = "") -> bool:
        """--keep-cuda: insert the text of a new mapping entry (entry_copy); `at` is the offset of the entry
        it sits beside, for the ignore comments and the change's line. Without --keep-cuda it does nothing."""
        offset, text = insertion
        if not self.ctx.options.keep_cuda or self.positions.is_silenced(self.ID, at):
            return False
        self.edits.append(Edit(offset, offset, text))
        line, col = self.positions.line_col(at)
        self.ctx.add(self.ID, line, col, message, kind="change")
        return True


def entry_copy(doc: YamlDocument, mapping: CommentedMap, key: Any, new_key: str) -> Optional[tuple[int, str]]:
    """Where and what to insert so that `mapping` also has `new_key` with the value text of `key`, written as
    the mapping is: `, NEW: value` after the value in a flow mapping, a line of its own below the entry
    (same indentation, after its comment) in a block one. None where the value is not one scalar on the
    key's line (a nested mapping, a multi-line string)."""
    value = mapping[key]
    if isinstance(value, (CommentedMap, CommentedSeq)):
        return None
    key_start, _ = doc.key_span(mapping, key)
    start, end = doc.value_span(mapping, key)
    text = doc.text
    token = text[start:end]
    if not token or "\n" in text[key_start:end] or token[:1] in "|>&*!":
        return None
    entry = f"{new_key}: {token}"
    if mapping.fa.flow_style():
        return end, f", {entry}"
    indent = key_start - (text.rfind("\n", 0, key_start) + 1)
    if text[key_start - indent:key_start].strip(" "):
        return None  # the key shares its line with something else (`- KEY: v` in a sequence)
    nl = text.find("\n", end)
    if nl < 0:
        return len(text), "\n" + " " * indent + entry
    return nl + 1, " " * indent + entry + "\n"

"""ruamel's round-trip documents, built from libyaml's parse events instead of ruamel's own parser.

The YAML rules read ruamel's round-trip objects (CommentedMap / CommentedSeq with the line and column
of every key, value and item, flow style, anchors and merges), and ruamel's pure-Python scanner and
parser were most of the cost of a YAML file. libyaml (PyYAML's C parser) gives the same events for the
same text about ten times faster; ruamel's own resolver (YAML 1.2) tags the scalars and its own
round-trip constructor builds the objects, so the values and their types are ruamel's.

What the two parsers do not agree on is not attempted (`load_all` returns None and the caller loads
with ruamel as before): tabs and NEL / LS / PS (line breaks in YAML 1.1, which libyaml reads, not in
1.2), directives, explicit tags, a reused or undefined anchor, empty values in flow mappings or before
a comment (ruamel places those at its comment tokens), and every text libyaml refuses or that fails to
construct (ruamel then reports its own error). Comments are not read: no rule asks for them.
benchmarks/README.md ("YAML from libyaml's events") has the comparison on five real trees.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any, Optional

from ruamel.yaml import YAML
from ruamel.yaml.error import StreamMark
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

try:
    import yaml as _pyyaml

    # Only its parser is used. None: PyYAML built without libyaml, where nothing would be gained.
    _LOADER: Any = getattr(_pyyaml, "CBaseLoader", None)
    _EVENTS = _pyyaml.events
except ImportError:  # pragma: no cover - PyYAML is a dependency
    _LOADER = None

# Characters whose reading differs between YAML 1.1 (libyaml) and 1.2 (ruamel).
_DISAGREE = ("\t", "\x85", "\u2028", "\u2029")
_MAX_DEPTH = 200  # deeper documents go to ruamel (this builder recurses)
# The tag ruamel's resolver gives a scalar, by (value, plain): a function of these alone here (YAML 1.2,
# no directives, no path resolvers), and its versioned lookup was a third of building the nodes. Tags
# are shared as ruamel shares its default one; bounded, so a worker's memory stays flat.
_TAGS: dict[tuple[str, bool], Any] = {}
_MAX_TAGS = 8192


class _Unsure(Exception):
    """The text uses something the two parsers may read differently: ruamel loads it."""


def load_all(text: str) -> Optional[list[Any]]:
    """The documents `YAML(typ="rt")` with duplicate keys allowed loads from `text`, or None when this
    builder cannot promise the same result (the caller loads with ruamel then)."""
    if _LOADER is None or any(c in text for c in _DISAGREE):
        return None
    try:
        return _Builder(text).documents()
    except Exception:  # _Unsure, a libyaml error, a construction error: ruamel decides, and reports
        return None


def _next_token(text: str, i: int) -> Optional[int]:
    """Where the token after offset `i` starts (None at the end of the text)."""
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in " \r\n\ufeff":
            i += 1
        elif ch == "#":
            raise _Unsure("a comment between an empty value and the next token")
        else:
            return i
    return None


class _Builder:
    def __init__(self, text: str):
        self.text = text
        self.yaml = YAML(typ="rt")
        self.yaml.allow_duplicate_keys = True
        self.resolver = self.yaml.resolver
        self.constructor = self.yaml.constructor
        self.events: Iterator[Any] = iter(_pyyaml.parse(text, Loader=_LOADER))
        self.pushed: list[Any] = []
        self.anchors: dict[str, Node] = {}
        self._starts: Optional[list[int]] = None

    def _next(self) -> Any:
        return self.pushed.pop() if self.pushed else next(self.events)

    def documents(self) -> list[Any]:
        docs = []
        for event in self.events:
            kind = type(event)
            if kind is _EVENTS.DocumentStartEvent:
                if event.version is not None or event.tags:
                    raise _Unsure("a directive")
                self.anchors.clear()
                root = self._node(self._next(), None, 0)
                self._next()  # the document's end
                docs.append(self.constructor.construct_document(root))
        return docs

    def _mark(self, mark: Any) -> StreamMark:
        return StreamMark(None, mark.index, mark.line, mark.column)

    def _mark_at(self, index: int) -> StreamMark:
        if self._starts is None:
            starts, text, i = [0], self.text, 0
            while i < len(text):  # line breaks as both parsers count them: \n, \r\n, a lone \r
                ch = text[i]
                if ch == "\r" and text.startswith("\r\n", i):
                    i += 1
                if ch in "\r\n":
                    starts.append(i + 1)
                i += 1
            self._starts = starts
        line = bisect.bisect_right(self._starts, index) - 1
        return StreamMark(None, index, line, index - self._starts[line])

    def _node(self, event: Any, context: Optional[str], depth: int) -> Node:
        """The node `event` starts; `context` is "block" / "flow" for a mapping's value, else None."""
        kind = type(event)
        if kind is _EVENTS.AliasEvent:
            if event.anchor not in self.anchors:
                raise _Unsure("an undefined alias")
            return self.anchors[event.anchor]
        if depth > _MAX_DEPTH:
            raise _Unsure("deep")
        anchor = event.anchor
        if anchor is not None and anchor in self.anchors:
            raise _Unsure("a reused anchor")  # ruamel warns
        if getattr(event, "tag", None) is not None:
            raise _Unsure("an explicit tag")
        if kind is _EVENTS.ScalarEvent:
            node: Node = self._scalar(event, context, anchor)
            if anchor is not None:
                self.anchors[anchor] = node
        elif kind is _EVENTS.SequenceStartEvent:
            node = SequenceNode(self.resolver.resolve(SequenceNode, None, (True, False)), [],
                                self._mark(event.start_mark), None, flow_style=event.flow_style, anchor=anchor)
            if anchor is not None:  # before its items, as ruamel's composer does: an alias inside may name it
                self.anchors[anchor] = node
            while True:
                item = self._next()
                if type(item) is _EVENTS.SequenceEndEvent:
                    node.end_mark = self._mark(item.end_mark)
                    break
                node.value.append(self._node(item, None, depth + 1))
        elif kind is _EVENTS.MappingStartEvent:
            node = MappingNode(self.resolver.resolve(MappingNode, None, (True, False)), [],
                               self._mark(event.start_mark), None, flow_style=event.flow_style, anchor=anchor)
            if anchor is not None:
                self.anchors[anchor] = node
            values = "flow" if event.flow_style else "block"
            while True:
                item = self._next()
                if type(item) is _EVENTS.MappingEndEvent:
                    node.end_mark = self._mark(item.end_mark)
                    break
                key = self._node(item, None, depth + 1)
                node.value.append((key, self._node(self._next(), values, depth + 1)))
        else:
            raise _Unsure(f"an unexpected {kind.__name__}")
        return node

    def _scalar(self, event: Any, context: Optional[str], anchor: Optional[str]) -> ScalarNode:
        style = event.style or None
        key = (event.value, style is None)
        tag = _TAGS.get(key)
        if tag is None:
            if len(_TAGS) >= _MAX_TAGS:
                _TAGS.clear()
            tag = _TAGS[key] = self.resolver.resolve(ScalarNode, event.value, (style is None, style is not None))
        start, end = event.start_mark, event.end_mark
        if context is not None and style is None and event.value == "" and start.index == end.index:
            # An empty value: libyaml places it where the value would be, ruamel where the next token
            # starts (for a mapping's value; an empty item of a sequence is placed alike).
            if context == "flow":
                raise _Unsure("an empty value in a flow mapping")
            at = _next_token(self.text, start.index)
            if at is None:  # the end of the text: where libyaml's next event (the end) starts
                following = self._next()
                self.pushed.append(following)
                mark = self._mark(following.start_mark)
            else:
                mark = self._mark_at(at)
            return ScalarNode(tag, event.value, mark, mark, style=style, anchor=anchor)
        return ScalarNode(tag, event.value, self._mark(start), self._mark(end), style=style, anchor=anchor)

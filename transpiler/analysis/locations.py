"""Node positions (LibCST's syntactic `PositionProvider` ranges) at a fraction of its cost.

LibCST's provider splits every emitted token with a regular expression to keep a line and column
current and builds two position objects per node; with a changed file that costs as much as the
rest of its conversion. Here code generation only sums token lengths, records character offsets,
and turns the offsets of the nodes actually asked about into lines and columns afterwards. The
ranges are the same as PositionProvider's (tests compare them node by node).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from contextlib import contextmanager
from typing import Iterator, Optional

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst._position import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")


class _OffsetState(CodegenState):
    """Generates the module's code and records each node's (start, end) character offsets."""

    def __init__(self, module: cst.Module):
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.spans: dict[int, tuple[int, int]] = {}  # id(node) -> offsets
        self._stack: list[int] = []
        self.popped = ""

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        # The module drops its last newline from the code; positions were computed with it.
        self.popped = self.tokens[-1] if self.tokens else ""
        super().pop_trailing_newline()

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        self.spans.setdefault(id(node), (start, self.offset))  # a syntactic range recorded inside wins

    @contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None,
                                  end_node: Optional[cst.CSTNode] = None) -> Iterator[None]:
        start = self.offset
        try:
            yield
        finally:
            end = self.offset
            if start_node is not None:
                start = self.spans[id(start_node)][0]
            if end_node is not None:
                end = self.spans[id(end_node)][1]
            self.spans[id(node)] = (start, end)


class NodeLocations:
    """Positions of the nodes of one module, computed in one code generation pass on first use."""

    def __init__(self, module: cst.Module):
        state = _OffsetState(module)
        module._codegen(state)
        self._spans = state.spans
        self._nodes_alive = module  # ids stay valid only while the tree lives
        code = "".join(state.tokens) + state.popped
        self._line_starts = [0] + [m.end() for m in _NEWLINE.finditer(code)]

    def _position(self, offset: int) -> CodePosition:
        line = bisect_right(self._line_starts, offset)
        return CodePosition(line, offset - self._line_starts[line - 1])

    def get(self, node: cst.CSTNode) -> Optional[CodeRange]:
        span = self._spans.get(id(node))
        if span is None:
            return None
        return CodeRange(self._position(span[0]), self._position(span[1]))

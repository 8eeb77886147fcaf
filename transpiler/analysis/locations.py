"""Node positions (LibCST's syntactic `PositionProvider` ranges) at a fraction of its cost.

LibCST's provider splits every emitted token with a regular expression to keep a line and column
current and builds two position objects per node; with a changed file that costs as much as the
rest of its conversion. Here code generation only records token indices, and the nodes actually
asked about get lines and columns afterwards. The
ranges are the same as PositionProvider's (tests compare them node by node).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate
from typing import Optional

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst._position import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")


class _OffsetState(CodegenState):
    """Generates the module's code and records each node's (start, end) as token indices; they become
    character offsets once, at the end (adding up token lengths as they are emitted cost more)."""

    def __init__(self, module: cst.Module):
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.spans: dict[int, tuple[int, int]] = {}  # id(node) -> token indices
        self._stack: list[int] = []

    def pop_trailing_newline(self) -> None:
        """Kept: a module without a final newline drops it from its code, but its positions count it."""

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        self.spans.setdefault(id(node), (start, len(self.tokens)))  # a syntactic range recorded inside wins

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None,
                                  end_node: Optional[cst.CSTNode] = None) -> _SyntacticSpan:
        return _SyntacticSpan(self, node, start_node, end_node)


class _SyntacticSpan:
    """The context manager LibCST's code generation wraps each node's own tokens in (about one call per
    node, so a plain class: a @contextmanager generator cost more than the rest of the bookkeeping)."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: _OffsetState, node, start_node, end_node):
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = len(self.state.tokens)

    def __exit__(self, *exc) -> None:
        spans = self.state.spans
        start = spans[id(self.start_node)][0] if self.start_node is not None else self.start
        end = spans[id(self.end_node)][1] if self.end_node is not None else len(self.state.tokens)
        spans[id(self.node)] = (start, end)


class NodeLocations:
    """Positions of the nodes of one module, computed in one code generation pass on first use."""

    def __init__(self, module: cst.Module):
        state = _OffsetState(module)
        module._codegen(state)
        self._spans = state.spans
        self._nodes_alive = module  # ids stay valid only while the tree lives
        self._offsets = [0, *accumulate(map(len, state.tokens))]  # token index -> character offset
        code = "".join(state.tokens)
        self._line_starts = [0] + [m.end() for m in _NEWLINE.finditer(code)]

    def _position(self, offset: int) -> CodePosition:
        line = bisect_right(self._line_starts, offset)
        return CodePosition(line, offset - self._line_starts[line - 1])

    def get(self, node: cst.CSTNode) -> Optional[CodeRange]:
        span = self._spans.get(id(node))
        if span is None:
            return None
        return CodeRange(self._position(self._offsets[span[0]]), self._position(self._offsets[span[1]]))

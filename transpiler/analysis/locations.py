"""Node positions (LibCST's syntactic `PositionProvider` ranges) at a fraction of its cost.

LibCST's provider splits every emitted token with a regular expression to keep a line and column
current and builds two position objects per node; with a changed file that costs as much as the
rest of its conversion. Here code generation only records token indices, and the nodes actually
asked about get lines and columns afterwards. The
ranges are the same as PositionProvider's (tests compare them node by node).

Most files with a finding need the positions of a few nodes in a few statements, so
`StatementLocations` generates only the top-level statements that hold a node asked about, each
placed where the source has it (see there); `NodeLocations` generates the whole module.
"""

from __future__ import annotations

import ast
import re
import warnings
from bisect import bisect_right
from collections.abc import Mapping, Sequence
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

    # LibCST declares a @contextmanager generator here; a plain class serves (_SyntacticSpan's docstring).
    def record_syntactic_position(self, node: cst.CSTNode, *,  # type: ignore[override]
                                  start_node: Optional[cst.CSTNode] = None,
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


def _generate(node: cst.CSTNode, module: cst.Module, indents: tuple[str, ...] = ()) -> _OffsetState:
    """The code generation positions come from: `node`'s tokens with every node's token span, its
    lines indented by `indents` as its enclosing blocks would indent them."""
    state = _OffsetState(module)
    state.indent_tokens.extend(indents)
    node._codegen(state)
    return state


class NodeLocations:
    """Positions of the nodes of one module, computed in one code generation pass on first use."""

    def __init__(self, module: cst.Module):
        state = _generate(module, module)
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


class StatementLocations:
    """The positions NodeLocations gives, from the code of one statement at a time.

    `statement_of` maps the id of every node the engine's walk met to the statement it lies in: a
    top-level one or one in the body of such a class, whose indentation `indents` gives (the
    tokens its lines start with, as the enclosing blocks' code generation would add them). A
    statement's code starts at the first line of its leading blank and comment lines (LibCST's
    `leading_lines`), which is its first line in CPython's `ast` (a decorated definition's first
    decorator) less that many lines; the statement is used only where its generated code is exactly
    the source text there, so the offsets are the ones the whole module's code would give. A node no
    statement places (the module itself, its header and footer lines, a statement this cannot place:
    a file without a final newline, a BOM, syntax CPython's parser refuses) gets NodeLocations'
    position, generated once for the whole module as before."""

    def __init__(self, module: cst.Module, text: str, statement_of: Mapping[int, cst.CSTNode],
                 indents: Optional[Mapping[int, tuple[str, ...]]] = None, tree: Optional[ast.Module] = None):
        """`tree`: the text's `ast` where the caller has it (only its statements' lines are read)."""
        self._module = module
        self._text = text
        self._tree = tree
        self._top_of = statement_of
        self._indents = indents or {}
        self._starts: Optional[dict[int, int]] = None  # id(statement) -> offset of its code in the text
        self._placed: dict[int, Optional[tuple[dict[int, tuple[int, int]], list[int]]]] = {}
        self._line_starts: list[int] = []
        self._whole: Optional[NodeLocations] = None

    def get(self, node: cst.CSTNode) -> Optional[CodeRange]:
        top = self._top_of.get(id(node))
        placed = self._place(top) if top is not None else None
        span = placed[0].get(id(node)) if placed is not None else None
        if span is None or placed is None:
            if self._whole is None:
                self._whole = NodeLocations(self._module)
            return self._whole.get(node)
        offsets = placed[1]
        return CodeRange(self._position(offsets[span[0]]), self._position(offsets[span[1]]))

    def _position(self, offset: int) -> CodePosition:
        line = bisect_right(self._line_starts, offset)
        return CodePosition(line, offset - self._line_starts[line - 1])

    def _place(self, statement: cst.CSTNode):
        key = id(statement)
        if key in self._placed:
            return self._placed[key]
        if self._starts is None:
            self._line_starts = [0] + [m.end() for m in _NEWLINE.finditer(self._text)]
            self._starts = _statement_starts(self._module, self._text, self._line_starts, self._tree)
        start = self._starts.get(key)
        placed = None
        if start is not None:
            state = _generate(statement, self._module, self._indents.get(key, ()))
            code = "".join(state.tokens)
            if code and self._text.startswith(code, start):
                placed = (state.spans, list(accumulate(map(len, state.tokens), initial=start)))
        self._placed[key] = placed
        return placed


def _statement_starts(module: cst.Module, text: str, line_starts: list[int],
                      tree: Optional[ast.Module] = None) -> dict[int, int]:
    """id(top-level statement) -> where its code (leading lines included) starts in `text`, from the
    first line CPython's `ast` gives it (`tree`, else parsed here); {} where that parser refuses the
    text. A line of `a; b` is one LibCST statement and two `ast` ones."""
    if tree is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: nothing to say here
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
                return {}
    body = tree.body
    starts: dict[int, int] = {}
    _pair(module.body, body, line_starts, starts)
    return starts


def _pair(statements: Sequence[cst.BaseStatement], body: Sequence[ast.stmt], line_starts: list[int],
          starts: dict[int, int]) -> None:
    """Where each of `statements` starts, from the `ast` statements of the same block; into the
    bodies of classes too."""
    i = 0
    for statement in statements:
        if i >= len(body):
            break
        first = body[i]
        i += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        line = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", ()))])
        leading = statement.leading_lines if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) else ()
        index = line - 1 - len(leading)
        if 0 <= index < len(line_starts):
            starts[id(statement)] = line_starts[index]
        if isinstance(statement, cst.ClassDef) and isinstance(first, ast.ClassDef) \
                and isinstance(statement.body, cst.IndentedBlock):
            _pair(statement.body.body, first.body, line_starts, starts)

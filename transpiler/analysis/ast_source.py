"""Python's `ast` read the way the LibCST side of the engine reads a file: positions, source text, scopes.

The report-only pass (core/ast_pass) answers what a LibCST rule would answer from a tree that is ten
times cheaper to build. Where `ast` cannot tell what LibCST sees (the parentheses around an expression,
comments beside it, one string literal or several glued together), the helpers here raise `Decline`
and the file takes the LibCST path: an answer is given only where it is exact.
"""

from __future__ import annotations

import ast
import io
import tokenize
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from npu_port.transpiler.analysis.imports import Binding, ImportTable


class Decline(Exception):
    """This file's answer may differ from LibCST's: convert it with LibCST."""


class FStringDepth:
    """For a twin: how many f-strings the walk is inside (`_fstrings`). Python 3.11 places the nodes
    inside an f-string otherwise than LibCST does, so a twin declines to report there."""

    _fstrings = 0

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._fstrings += 1

    def leave_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._fstrings -= 1


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SIMPLE = (ast.Import, ast.ImportFrom)


class Source:
    """The text of one parsed file, addressed the way `ast` addresses it (1-based lines, UTF-8 byte
    columns) and answered the way LibCST would (columns in characters)."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.split("\n")
        starts = [0]
        for line in self.lines[:-1]:
            starts.append(starts[-1] + len(line) + 1)
        self._starts = starts
        self._ascii = text.isascii()
        self._stmt_starts: Optional[list[int]] = None
        self.tree: Optional[ast.Module] = None  # the tree the text was parsed into (next_statement_start)

    def column(self, line: int, byte_col: int) -> int:
        """The 0-based character column of `ast`'s byte offset `byte_col` on `line`."""
        if self._ascii:
            return byte_col
        return len(self.lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def offset(self, line: int, byte_col: int) -> int:
        """The offset into the text of a position `ast` gives."""
        return self._starts[line - 1] + self.column(line, byte_col)

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        return self.text[self.start(node):self.end(node)]

    def starts_line(self, stmt: ast.stmt) -> bool:
        """Whether `stmt` opens its line (an indented block's statement), not one after a colon (`if x: y`)."""
        at = self.start(stmt)
        return self.text[self._starts[stmt.lineno - 1]:at].strip() == ""

    def next_statement_start(self, after: int) -> int:
        """The offset where the first statement starting after offset `after` begins (the end of the text if none)."""
        if self._stmt_starts is None:  # asked for a few function bodies only: found when first needed
            starts: list[int] = []
            stack = [self.tree]
            while stack:
                node = stack.pop()
                for value in vars(node).values():
                    if isinstance(value, list) and value and isinstance(value[0], (ast.stmt, ast.excepthandler,
                                                                                   ast.match_case)):
                        for child in value:
                            if isinstance(child, ast.stmt):
                                starts.append(self.start(child))
                            stack.append(child)
            self._stmt_starts = sorted(starts)
        i = bisect_right(self._stmt_starts, after)
        return self._stmt_starts[i] if i < len(self._stmt_starts) else len(self.text)

    def search_code(self, pattern, node: ast.expr) -> bool:
        """`pattern.search(code)` for LibCST's rendering of `node`: its text and its own parentheses, which
        `ast` leaves out. A match in the text is one in the rendering (parentheses and blanks are no word
        characters); beyond it the rendering can add only parentheses, blanks and comments, so without a
        comment next to the node the answer is the text's."""
        return self.search_span(pattern, self.start(node), self.end(node))

    def search_span(self, pattern, start: int, end: int) -> bool:
        """search_code for the text[start:end] of one or more expressions (LibCST's node around them)."""
        if pattern.search(self.text, start, end) is not None:
            return True
        if self.comment_beside(start, end):
            raise Decline("a comment next to an expression")
        return False

    def comment_beside(self, start: int, end: int) -> bool:
        """Whether a comment may lie between text[start:end] and a parenthesis around it (inside what
        LibCST renders as the node): a comment line between an opening parenthesis and the text, or a
        comment after the text that a closing parenthesis follows. A comment that ends the line of an
        expression no parenthesis closes after is outside it."""
        text = self.text
        i, comment = start, False
        while i:
            c = text[i - 1]
            if c in " \t\f\\\r":
                i -= 1
            elif c == "(":
                if comment:
                    return True
                i -= 1
            elif c == "\n":
                line_start = self._line_start(i - 1)
                code, hash_, _ = text[line_start:i - 1].partition("#")  # a '#' in a string counts too: declines more
                comment = comment or bool(hash_)
                i = line_start + len(code)
            else:
                break
        j, comment = end, False
        while j < len(text):
            c = text[j]
            if c in " \t\f\\\r\n":
                j += 1
            elif c == "#":
                comment = True
                j = text.find("\n", j)
                if j == -1:
                    break
            elif c == ")":
                if comment:
                    return True
                j += 1
            else:
                break
        return False

    def bare(self, node: ast.expr) -> bool:
        """No parenthesis or comment next to `node`: LibCST's rendering of it is its text."""
        text, i, j = self.text, self.start(node), self.end(node)
        while i and text[i - 1] in " \t\f\\\n":
            i -= 1
        while j < len(text) and text[j] in " \t\f\\\n":
            j += 1
        return not (i and text[i - 1] == "(") and not (j < len(text) and text[j] in ")#") \
            and not self.comment_beside(self.start(node), self.end(node))

    def _line_start(self, offset: int) -> int:
        return self.text.rfind("\n", 0, offset) + 1

    def string_token(self, node: ast.expr) -> Optional[str]:
        """The literal's text when `node` is one string or bytes literal as LibCST's SimpleString is (not
        several glued together, not an f-string), else None."""
        if not isinstance(node, ast.Constant) or not isinstance(node.value, (str, bytes)):
            return None
        text = self.segment(node)
        if not single_string_token(text):
            return None
        return text


def call_arguments(call: ast.Call) -> list[Any]:
    """A call's arguments in source order, as LibCST's `Call.args` holds them: the positional ones (a
    Starred for `*x`) and the keywords (one whose `arg` is None for `**x`)."""
    if not call.keywords or not call.args:
        return [*call.args, *call.keywords]
    return sorted([*call.args, *call.keywords], key=lambda a: (a.lineno, a.col_offset))


def argument_value(arg: Any) -> Any:
    """What LibCST's Arg or sequence element holds as its value: a keyword's or a starred item's expression."""
    return arg.value if isinstance(arg, (ast.keyword, ast.Starred)) else arg


def plain_string(source: Source, node: Optional[ast.AST]) -> Optional[str]:
    """literals.string_value on `ast`: the value of one plain string literal (LibCST's SimpleString: not
    glued to another, not bytes, not an f-string), else None."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        return None
    return node.value if source.string_token(node) is not None else None


def single_string_token(text: str) -> bool:
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT,
                                    tokenize.DEDENT)]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    return len(tokens) == 1 and tokens[0].type == tokenize.STRING


def raw_value(token: str) -> str:
    """A string literal's text without its prefix and quotes (LibCST's SimpleString.raw_value)."""
    body = token.lstrip("rRbBuUfF")
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    return body[len(quote):-len(quote)]


Position = tuple[int, int]  # ast's (line, byte column), where a twin reports (AstContext.note_at)


def position(node: ast.AST) -> Position:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def dotted(node: ast.AST) -> Optional[str]:
    """`a.b.c` for a Name/Attribute chain, else None (imports.dotted_name on the LibCST side)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def leftmost(node: ast.AST) -> Optional[ast.Name]:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def is_elif(source: Source, node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and source.text.startswith("elif", source.start(node))


def blocks_of(source: Source, stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists of a compound statement as imports._blocks_of yields LibCST's: the body (an
    indented block or a one-line suite), then only indented blocks: else / elif bodies, finally, handlers,
    match cases."""
    body = getattr(stmt, "body", None)
    if isinstance(body, list) and body:
        yield body

    def indented(block) -> bool:
        return bool(block) and source.starts_line(block[0])

    orelse = getattr(stmt, "orelse", None)
    if isinstance(stmt, ast.If):
        while orelse:
            if len(orelse) == 1 and is_elif(source, orelse[0]):
                elif_ = orelse[0]
                if indented(elif_.body):  # type: ignore[attr-defined]
                    yield elif_.body  # type: ignore[attr-defined]
                orelse = elif_.orelse  # type: ignore[attr-defined]
                continue
            if indented(orelse):
                yield orelse
            break
    elif isinstance(orelse, list) and indented(orelse):
        yield orelse
    final = getattr(stmt, "finalbody", None)
    if isinstance(final, list) and indented(final):
        yield final
    for handler in getattr(stmt, "handlers", ()) or ():
        if indented(handler.body):
            yield handler.body
    for case in getattr(stmt, "cases", ()) or ():
        if indented(case.body):
            yield case.body


def scope_statements(source: Source, body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The simple statements of one scope, entering compound statements but not defs or classes
    (imports.iter_scope_statements)."""
    for stmt in body:
        if isinstance(stmt, _SCOPES):
            continue
        if isinstance(stmt, COMPOUND):
            for block in blocks_of(source, stmt):
                yield from scope_statements(source, block)
        else:
            yield stmt


COMPOUND = tuple(getattr(ast, name) for name in ("If", "For", "AsyncFor", "While", "With", "AsyncWith", "Try",
                                                  "TryStar", "Match") if hasattr(ast, name))


def bindings_of(stmt: ast.stmt) -> list[tuple[str, Binding]]:
    """(local name, binding) pairs an import statement binds (imports.bindings_of)."""
    out: list[tuple[str, Binding]] = []
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname is not None:
                out.append((alias.asname, Binding(alias.name, "import", True)))
            else:
                top = alias.name.split(".", 1)[0]
                out.append((top, Binding(top, "import", False)))
    elif isinstance(stmt, ast.ImportFrom):
        if stmt.level or stmt.module is None or stmt.names[0].name == "*":
            return out
        for alias in stmt.names:
            aliased = alias.asname is not None
            out.append((alias.asname if aliased else alias.name,  # type: ignore[arg-type]
                        Binding(f"{stmt.module}.{alias.name}", "from", aliased)))
    return out


class AstImports(ImportTable):
    """imports.ImportTable's stack of per-scope import tables, filled from `ast` statements."""

    def __init__(self, source: Source):
        super().__init__()
        self._source = source
        self._scopes: list[tuple[Any, dict[str, Binding]]] = []  # type: ignore[assignment]  # ast nodes

    def enter(self, node) -> None:
        if isinstance(node, ast.Module):
            self._scopes.append((node, self._scan(node.body)))
        elif isinstance(node, _SCOPES) and node.body and self._source.starts_line(node.body[0]):
            self._scopes.append((node, self._scan(node.body)))

    def _scan(self, body: Sequence[ast.stmt]) -> dict[str, Binding]:
        table: dict[str, Binding] = {}
        for small in scope_statements(self._source, body):
            if isinstance(small, _SIMPLE):
                for local, target in bindings_of(small):
                    table.setdefault(local, target)
        return table

    def resolve(self, node) -> Optional[str]:
        return self.resolve_dotted(dotted(node))

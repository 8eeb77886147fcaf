"""What one cheap lexical pass learns about a Python file, for the rules' scouts.

The prefilter's triggers are searched in the raw bytes, so a `cuda` in a comment, a docstring or a log
message sends a file to LibCST like real CUDA code does. This pass splits the source into code and
string literals (comments dropped) about thirty times faster than a LibCST parse; each rule's
`scout(facts, options)` then says whether it could change or report anything in the file at all.

It only has to over-approximate: extra words or strings cost a parse, a missing one would lose a rewrite.
So f-string bodies count as code as well as strings (their `{...}` parts are code), escaped strings are
listed both as written and as evaluated, and anything the lexer does not understand (a quote left over,
as in a file with an unterminated string) makes `SourceFacts.unsure` true, which every scout reads as yes.

Where the lexer cannot tell what a string is for (a docstring from a literal in code), a scout may ask
for the file's `ast` (`SourceFacts.tree`, parsed on first use: CPython's parser is about ten times
cheaper than LibCST's, and most files are never asked). The file's path is there too, for rules that
leave files alone by where they lie.
"""

from __future__ import annotations

import ast
import functools
import keyword
import re
import warnings
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

# A comment or a whole string literal (unrolled loops: a run of ordinary characters at a time). The
# pattern starts at `#` or a quote, which lets the regex engine skip ahead; the prefix (`rb`, `f`...) is
# read from the letters before the quote. Valid code never has a letter right before a quote except a
# prefix or a keyword (`if"x"`), so taking a keyword's last letters for a prefix only makes a plain
# string count as an f-string (code too): still an over-approximation. A backslash escapes the next
# character in raw strings too, as far as where the literal ends is concerned; a single-quoted literal
# ends at a newline. A quote that starts no complete literal stays in the code: the facts are unsure.
_LEXEME = re.compile(rb"""
    \#[^\r\n]*
  | '''(?P<t1>[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*)'''
  | \"\"\"(?P<t2>[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*)\"\"\"
  | '(?P<s1>[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*)'
  | "(?P<s2>[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*)"
    """, re.S | re.X)
_PREFIX_LETTERS = frozenset(b"rRbBuUfF")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_DIGITS = frozenset("0123456789")
# Every byte that cannot be part of a word becomes a space: splitting then yields the words (and numbers).
_WORD_BYTES_ONLY = bytes(c if c in _WORD_CHARS else 0x20 for c in range(256))


@dataclass(frozen=True)
class LiteralContext:
    """A string literal of the code with the code tokens around it (`SourceFacts.literals`)."""

    texts: tuple[str, ...]  # as `SourceFacts.strings` lists them: as written, evaluated, an f-string's head
    before: str  # the code token before it, opening parentheses skipped: "==", ",", "else", ... ("" at the start)
    after: str  # the code token after it, closing parentheses skipped: "if", ",", ")", ... ("" at the end)
    glued: bool  # only blanks, comments and parentheses part it from the literal before (`"np" "u"`)


@dataclass(frozen=True)
class SourceFacts:
    source: str  # the whole file, decoded as latin-1 (ASCII stays ASCII whatever the real encoding)
    words: frozenset[str]  # identifier-like words of the code: no comments, no plain string contents
    strings: tuple[str, ...]  # every literal's text as written, and evaluated where it has escapes; an
    # f-string also as its text before the first `{` (the part LibCST rules read as its head)
    unsure: bool = False  # the lexer met something it does not understand: assume anything may happen
    imported_roots: frozenset[str] = frozenset()  # see _imported_roots
    path: str = ""  # the path the file is converted under (what the rules' context is given)
    code: str = ""  # the code without comments, each literal a space, f-string bodies after it (latin-1)
    short_strings: tuple[str, ...] = ()  # the entries of `strings` from literals in single quotes

    @cached_property
    def tree(self) -> Optional[ast.Module]:
        """The file's `ast`, or None where CPython's parser refuses it (newer syntax than this Python
        reads, a bad encoding): a scout reads None as yes. Parsed once, when a scout first asks."""
        if self.unsure:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: LibCST's parse reports nothing either
            try:
                return ast.parse(self.source.encode("latin-1"))
            except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
                return None

    @cached_property
    def nodes(self) -> Optional[tuple[ast.AST, ...]]:
        """Every node of the file's `ast`, parents before children; None where it has none (`tree`)."""
        tree = self.tree
        return None if tree is None else tuple(ast.walk(tree))

    def any_node(self, predicate: Callable[[ast.AST], object]) -> bool:
        """Whether some node of the file's `ast` satisfies `predicate` (yes where it has no `ast`)."""
        nodes = self.nodes
        return nodes is None or any(predicate(n) for n in nodes)

    @cached_property
    def import_bindings(self) -> Optional[tuple[tuple[str, str], ...]]:
        """(local name, what it names) for every import statement of the file's `ast`, in any scope, as
        the rules' import table reads them (`import a.b` binds a to a, `import a.b as c` c to a.b, `from a
        import b` b to a.b; relative and star imports bind nothing). None where it has no `ast`."""
        nodes = self.nodes
        if nodes is None:
            return None
        out: list[tuple[str, str]] = []
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".", 1)[0]
                    out.append((alias.asname, alias.name) if alias.asname else (top, top))
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                out.extend((a.asname or a.name, f"{node.module}.{a.name}") for a in node.names if a.name != "*")
        return tuple(out)

    def names_bound_toward(self, qualified: Iterable[str]) -> Optional[frozenset[str]]:
        """The local names an import binds to one of these names or to a module they lie under (for
        vllm.LLM: `import vllm`, `from vllm import LLM as L`), so that an expression starting with one may
        resolve to it; None where the file has no `ast`."""
        bindings = self.import_bindings
        if bindings is None:
            return None
        wanted = tuple(qualified)
        return frozenset(local for local, target in bindings
                         if any(q == target or q.startswith(target + ".") for q in wanted))

    @cached_property
    def code_strings(self) -> Optional[tuple[str, ...]]:
        """The values of the string and bytes literals (bytes as latin-1) that are not a statement of
        their own: docstrings and strings written as comments left out, as nothing reads them. None
        where the file has no `ast` (see `tree`)."""
        nodes = self.nodes
        if nodes is None:
            return None
        bare: set[int] = set()
        out: list[str] = []
        for node in nodes:  # parents before children: a statement before its string
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                bare.add(id(node.value))
            elif isinstance(node, ast.Constant) and id(node) not in bare:
                value = node.value
                if isinstance(value, str):
                    out.append(value)
                elif isinstance(value, bytes):
                    out.append(value.decode("latin-1"))
        return tuple(out)

    @cached_property
    def code_imports(self) -> Optional[tuple[ast.stmt, ...]]:
        """The file's import statements, each parsed from its own text as the lexer finds it in the code
        (`_import_statements`, which `imported_roots` rests on too): a superset of the `ast`'s Import and ImportFrom
        nodes, at a fraction of a parse of the whole file. None where the lexer cannot vouch for that:
        facts unsure, non-ASCII code (identifiers the byte patterns do not read), or a found statement
        that does not parse alone."""
        code = self._ascii_code
        if code is None:
            return None
        statements = [m.group(0).strip() for m in _import_statements(code)]
        if not statements:
            return ()
        try:
            return tuple(ast.parse(b"\n".join(statements)).body)
        except (SyntaxError, ValueError):
            return None

    def dotted_chains(self, prefixes: frozenset[str]) -> Optional[tuple[str, ...]]:
        """The name chains `a.b.c` of the code that start with one of `prefixes` (dotted, whole names:
        `torch.npu` takes `torch.npu.x`, not `torch.npu_x`), whitespace left out, each taken whole (`x.a.b`
        once, not its parts; none that follows a dot, as `f(x).a` does): every outermost Name/Attribute
        chain of the `ast` with such a start is among them, a parenthesised head too (`(a).b` is `a.b`).
        None where `code_imports` is."""
        code = self._unwrapped_code
        if code is None:
            return None
        found: dict[int, re.Match[bytes]] = {}
        for prefix in sorted(prefixes):  # at one start the first prefix in this order, as one alternation chose
            for m in _chain_pattern(prefix).finditer(code):
                found.setdefault(m.start(), m)
        chains, end = [], 0
        for start in sorted(found):  # left to right, none inside another: one scan's matches
            if start >= end:
                m = found[start]
                end = m.end()
                chains.append(_SPACE.sub(b"", m.group(0)).decode("ascii"))
        return tuple(chains)

    @cached_property
    def _unwrapped_code(self) -> Optional[bytes]:
        """`_ascii_code` with each chain in grouping parentheses that an attribute follows unwrapped."""
        code = self._ascii_code
        for _ in range(_MAX_GROUPING_DEPTH):  # `((a)).b`: the inner parentheses first, a level a pass
            if code is None or b"(" not in code:
                return code
            unwrapped = _PARENTHESISED_CHAIN.sub(_unwrap_grouping, code)
            if unwrapped == code:
                return code
            code = unwrapped
        return None  # deeper than code is written: a bound, not a pass for each level of a hostile file

    @cached_property
    def _ascii_code(self) -> Optional[bytes]:
        """The code (`code`) with line continuations joined, where the lexer vouches for it."""
        if self.unsure or not self.code.isascii():
            return None
        code = self.code.encode("ascii")
        return _CONTINUATION.sub(b" ", code) if b"\\" in code else code

    @cached_property
    def literals(self) -> Optional[tuple[LiteralContext, ...]]:
        """Every string literal with the code tokens beside it, for a scout that asks where an NPU value
        stands (after `==`, before `if`, between commas) without an `ast`. A second pass of the lexer
        (`scan` keeps no positions): asked of few files. None where the facts are unsure."""
        if self.unsure:
            return None
        data = self.source.encode("latin-1")
        texts: list[list[str]] = []
        gaps: list[bytes] = []  # the code before each literal (its prefix left out), then after the last
        pieces: list[bytes] = []
        pos = 0
        for m in _LEXEME.finditer(data):
            pieces.append(data[pos:m.start()])
            pos = m.end()
            if m.lastgroup is None:  # a comment: no code
                continue
            found, prefix, _ = _literal(data, m)
            gap = b"".join(pieces)
            gaps.append(gap[:len(gap) - len(prefix)])
            texts.append(found)
            pieces = []
        pieces.append(data[pos:])
        gaps.append(b"".join(pieces))
        out = []
        for i, found in enumerate(texts):
            before = gaps[i].rstrip(_BLANKS + b"(")
            after = gaps[i + 1].lstrip(_BLANKS + b")")
            out.append(LiteralContext(tuple(found), _last_token(before), _first_token(after),
                                      i > 0 and not before.strip(_BLANKS + b"()")))
        return tuple(out)

    def any_code_string(self, predicate: Callable[[str], object]) -> bool:
        """`any_string`, over the literals that are not a statement of their own (`code_strings`).
        The `ast` is asked only where a literal in triple quotes alone satisfies `predicate`: one in
        single quotes is taken for code (a docstring seldom is one), and none means no."""
        if any(predicate(s) for s in self.short_strings):
            return True
        if not self.any_string(predicate):
            return False
        strings = self.code_strings
        if strings is None:
            return self.any_string(predicate)
        return any(predicate(s) for s in strings)

    def has_word(self, *names: str) -> bool:
        return self.unsure or any(n in self.words for n in names)

    def has_all_words(self, *names: str) -> bool:
        return self.unsure or all(n in self.words for n in names)

    def may_name(self, dotted: str) -> bool:
        """Whether code could refer to `dotted` (e.g. `vllm.LLM`). Resolving an expression through the
        imports spells every part of the resolved name somewhere in the code (in the import statement or
        the attribute chain), whatever aliases are used."""
        return self.has_all_words(*dotted.split("."))

    def imports_root(self, *roots: str) -> bool:
        """Whether an import statement may name a module under one of these top-level packages."""
        return self.unsure or any(r in self.imported_roots for r in roots)

    def any_string(self, predicate: Callable[[str], object]) -> bool:
        return self.unsure or any(predicate(s) for s in self.strings)

    def search_code(self, pattern: re.Pattern) -> bool:
        """A search over the code alone (`code`: no comments, no string contents, f-string bodies
        included), where a pattern can say which tokens follow each other at a lexical cost."""
        return self.unsure or pattern.search(self.code) is not None

    def search(self, pattern: re.Pattern) -> bool:
        """A search over the whole decoded file, comments and strings included."""
        return self.unsure or pattern.search(self.source) is not None


def _evaluated(body: bytes) -> Optional[str]:
    """The text of a non-raw literal with escapes. Exact for ASCII, which is all the rules look for."""
    try:
        return body.decode("unicode_escape")
    except UnicodeDecodeError:
        return None


def _literal(data: bytes, m: re.Match) -> tuple[list[str], bytes, bool]:
    """(its texts as `SourceFacts.strings` lists them, its prefix in lower case, whether the lexer is
    unsure of it) for the string literal `_LEXEME` matched at `m`."""
    body = m.group(m.lastgroup)  # type: ignore[arg-type]
    text = body.decode("latin-1")
    texts = [text]
    start = m.start()
    prefix = data[max(start - 2, 0):start].lower()
    if not (prefix and prefix[-1] in _PREFIX_LETTERS):
        prefix = b""
    elif prefix[0] not in _PREFIX_LETTERS:
        prefix = prefix[1:]
    if b"f" in prefix:
        head = text.split("{", 1)[0]
        if head != text:
            texts.append(head)
        # Python 3.12 lets an f-string's `{...}` hold its own quote (`f"{d["k"]}"`), which splits it
        # here: what looks like code may be a nested literal.
        return texts, prefix, body.count(b"{") != body.count(b"}")
    if b"\\" in body and b"r" not in prefix:
        value = _evaluated(body)
        if value is None:
            return texts, prefix, True
        if value != text:
            texts.append(value)
    return texts, prefix, False


def scan(data: bytes, path: str = "") -> SourceFacts:
    code: list[bytes] = []  # what lies outside comments and literals
    fstring_code: list[bytes] = []
    strings: list[str] = []
    short: list[str] = []  # the entries of `strings` that come from literals in single quotes
    pos, unsure = 0, False
    for m in _LEXEME.finditer(data):
        start = m.start()
        code.append(data[pos:start])
        pos = m.end()
        group = m.lastgroup
        if group is None:  # a comment
            continue
        body = m.group(group)
        if (start and data[start - 1] in _PREFIX_LETTERS) or b"\\" in body:
            texts, prefix, odd = _literal(data, m)
            strings += texts
            unsure = unsure or odd
            if b"f" in prefix:
                fstring_code.append(body)
            if group[0] == "s":
                short += texts
        else:  # most literals: no prefix, no escape, one text (what _literal gives them, for less)
            text = body.decode("latin-1")
            strings.append(text)
            if group[0] == "s":
                short.append(text)
        code.append(b" ")
    code.append(data[pos:])
    joined = b"".join(code)
    if b"'" in joined or b'"' in joined:
        unsure = True
    roots = _imported_roots(joined)
    if fstring_code:  # after a space: a file's last word must not run into the first f-string's
        joined += b" " + b" ".join(fstring_code)
    # Every byte that is no word character became a space, so the text is ASCII: split as str at once.
    words = set(joined.translate(_WORD_BYTES_ONLY).decode("ascii").split())
    for token in [w for w in words if w[0] in _DIGITS]:  # `1if` holds the word `if`: what follows a number
        words.update(_WORD.findall(token))
    return SourceFacts(data.decode("latin-1"), frozenset(words), tuple(strings), unsure, roots, path,
                       joined.decode("latin-1"), tuple(short))


_BLANKS = b" \t\r\n\x0c\\"  # what may part two tokens of one statement (a backslash: a line continuation)
_LAST_WORD = re.compile(rb"[A-Za-z0-9_]+\Z")
_FIRST_WORD = re.compile(rb"[A-Za-z0-9_]+")


def _last_token(code: bytes) -> str:
    if code.endswith(b"=="):
        return "=="
    word = _LAST_WORD.search(code[-64:])  # a longer word is no keyword either
    return (word.group(0) if word else code[-1:]).decode("latin-1")


def _first_token(code: bytes) -> str:
    word = _FIRST_WORD.match(code)
    return (word.group(0) if word else code[:1]).decode("latin-1")


def _imported_roots(code: bytes) -> frozenset[str]:
    """The first part of every module an import statement names (`import a.b as c, d` -> a, d;
    `from a.b import c` -> a; relative imports name none), found anywhere in the code, line
    continuations included. Anything odd only adds names: no import escapes it."""
    if b"import" not in code:
        return frozenset()
    if b"\\" in code:
        code = _CONTINUATION.sub(b" ", code)
    roots = set()
    for m in _import_statements(code):
        if m.re is _PLAIN_IMPORT:
            roots.update(_LEADING_NAME.findall(m.group("names")))
        elif m.group("module") and b"." not in m.group("dots"):
            roots.add(m.group("module"))
    return frozenset(r.decode("ascii") for r in roots)


def _import_statements(code: bytes) -> list[re.Match[bytes]]:
    """The import statements of `code` (continuations joined), in order: each from-import, and each
    plain import that is not a from-import's `import`. Two patterns, each beginning with its keyword's
    letters, which the regex engine finds with a fast literal search (one alternation of both would be
    tried at every position: a third of the lexer's cost)."""
    froms = list(_FROM_IMPORT.finditer(code))
    starts = [m.start() for m in froms]
    found = list(froms)
    for m in _PLAIN_IMPORT.finditer(code):
        i = bisect_right(starts, m.start()) - 1
        if i < 0 or froms[i].end() <= m.start():
            found.append(m)
    if len(found) > len(froms):
        found.sort(key=lambda m: m.start())
    return found


_CONTINUATION = re.compile(rb"\\\r?\n")

# The longest parenthesised name list a from-import is read with (six real trees: 1,309 characters at
# most); a longer one is read to the end of its line, and the statement cut there parses as nothing (the
# scouts then ask the ast). It bounds what an unclosed `(` costs: a file of them, a scan of this each.
_MAX_IMPORT_LIST = 4096
# `from x import ...` (one line once continuations are joined: `raise A from B` followed by `import x`
# must not read as one statement; what it imports are names, not modules) or `import a, b.c as d`
# (_import_statements reads them together; a form feed is blank space there, as a space is). Each pattern
# is linear in the text: what lies between `from` and `import` is a dotted name, which a word that is not
# followed by `import` ends at once (a lazy "anything up to import" made a long line of `from` words cost its
# square: 11 s for 20 KB).
_FROM_IMPORT = re.compile(rb"""
    from(?<![A-Za-z0-9_]from)(?P<dots>[ \t\x0c.]*)
        (?:(?P<module>[A-Za-z_][A-Za-z0-9_]*)(?:[ \t\x0c]*\.[ \t\x0c]*[A-Za-z_][A-Za-z0-9_]*)*[ \t\x0c]*)?
        (?<![A-Za-z0-9_])import[ \t\x0c]*(?:\([^)]{0,%d}\)|[^;\r\n]*)""" % _MAX_IMPORT_LIST, re.X)
_PLAIN_IMPORT = re.compile(rb"import(?<![A-Za-z0-9_]import)\s+(?P<names>[^;\r\n]*)")
_LEADING_NAME = re.compile(rb"(?:^|,)[\s(]*([A-Za-z_][A-Za-z0-9_]*)")


@functools.lru_cache(maxsize=64)
def _chain_pattern(prefix: str) -> re.Pattern[bytes]:
    """A chain of names and dots (one dot at least) from `prefix`, that no word character or dot comes
    before; inside brackets its parts may stand on separate lines. The prefix's first name leads, so the
    regex engine searches for it as a literal (a pattern that opens with the lookbehind, or with an
    alternation of prefixes, is tried at every position: eight times the cost on a port's files)."""
    dot, name = rb"\s*\.\s*", rb"[A-Za-z_][A-Za-z0-9_]*"
    parts = [re.escape(part.encode("ascii")) for part in prefix.split(".")]
    rest = b"+" if len(parts) == 1 else b"*"
    return re.compile(parts[0] + rb"(?<![A-Za-z0-9_.]" + parts[0] + b")" + b"".join(dot + p for p in parts[1:])
                      + rb"(?![A-Za-z0-9_])(?:" + dot + name + b")" + rest)


# A chain in parentheses that an attribute follows: `(torch_npu).x` is the chain `torch_npu.x` where the
# parentheses group (the `ast` has no node for them), not where they call (`str(a.b).x`: `a.b` stays a
# chain of its own). Only a bare chain inside: `(x or a.b).c` keeps `a.b`.
_PARENTHESISED_CHAIN = re.compile(
    rb"\(\s*([A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*\)(?=[\s)]*\.)")
# Soft keywords too: `match (a).b:` groups (a call of a function named `match` is then unwrapped: one
# more chain, never one fewer).
_MAX_GROUPING_DEPTH = 16
_KEYWORDS = frozenset(k.encode("ascii") for k in (*keyword.kwlist, *keyword.softkwlist))


def _unwrap_grouping(m: re.Match[bytes]) -> bytes:
    """The chain after a space (lest it run into a word before it) where the parentheses group; the
    match as it is where they call: after a name that is no keyword, a `)` or a `]`."""
    code, i = m.string, m.start()
    while i and code[i - 1] in b" \t\r\n\x0c":
        i -= 1
    if i and code[i - 1] in _WORD_CHARS:
        j = i
        while j and code[j - 1] in _WORD_CHARS:
            j -= 1
        if code[j:i] not in _KEYWORDS:
            return m.group(0)
    elif i and code[i - 1] in b")]":
        return m.group(0)
    return b" " + m.group(1)


_SPACE = re.compile(rb"\s+")


def dotted(node: ast.AST) -> Optional[str]:
    """`a.b.c` for a Name/Attribute chain of `ast` nodes, else None (imports.dotted_name on the LibCST side)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))

"""What one cheap lexical pass learns about a Python file, for the rules' scouts.

The prefilter's triggers are searched in the raw bytes, so a `cuda` in a comment, a docstring or a log
message sends a file to LibCST like real CUDA code does. This pass splits the source into code and
string literals (comments dropped) about thirty times faster than a LibCST parse; each rule's
`scout(facts, options)` then says whether it could change or report anything in the file at all.

It only has to over-approximate: extra words or strings cost a parse, a missing one would lose a rewrite.
So f-string bodies count as code as well as strings (their `{...}` parts are code), escaped strings are
listed both as written and as evaluated, and anything the lexer does not understand (a quote left over,
as in a file with an unterminated string) makes `SourceFacts.unsure` true, which every scout reads as yes.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable, Optional

# A comment, or the opening quote of a string literal with its prefix. Valid code never has a letter
# right before a quote except a prefix or a keyword (`if"x"`), so over-reading a keyword's last letters
# as a prefix only makes a plain string count as an f-string (code too): still an over-approximation.
_OPENING = re.compile(rb"#[^\r\n]*|(?P<prefix>[rRbBuUfF]{0,2})(?P<quote>'''|\"\"\"|'|\")")
# The rest of a literal after its opening quote. A backslash escapes the next character in raw strings
# too (as far as where the literal ends is concerned), and a single-quoted literal ends at a newline.
_REST = {
    b"'''": re.compile(rb"(?:[^'\\]|\\.|'(?!''))*'''", re.S),
    b'"""': re.compile(rb'(?:[^"\\]|\\.|"(?!""))*"""', re.S),
    b"'": re.compile(rb"(?:[^'\\\r\n]|\\.)*'", re.S),
    b'"': re.compile(rb'(?:[^"\\\r\n]|\\.)*"', re.S),
}
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SourceFacts:
    source: str  # the whole file, decoded as latin-1 (ASCII stays ASCII whatever the real encoding)
    words: frozenset[str]  # identifier-like words of the code: no comments, no plain string contents
    strings: tuple[str, ...]  # every literal's text as written, and evaluated where it has escapes; an
    # f-string also as its text before the first `{` (the part LibCST rules read as its head)
    unsure: bool = False  # the lexer met something it does not understand: assume anything may happen

    def has_word(self, *names: str) -> bool:
        return self.unsure or any(n in self.words for n in names)

    def has_all_words(self, *names: str) -> bool:
        return self.unsure or all(n in self.words for n in names)

    def may_name(self, dotted: str) -> bool:
        """Whether code could refer to `dotted` (e.g. `vllm.LLM`). Resolving an expression through the
        imports spells every part of the resolved name somewhere in the code (in the import statement or
        the attribute chain), whatever aliases are used."""
        return self.has_all_words(*dotted.split("."))

    def any_string(self, predicate: Callable[[str], object]) -> bool:
        return self.unsure or any(predicate(s) for s in self.strings)

    def search(self, pattern: re.Pattern) -> bool:
        """A search over the whole decoded file, comments and strings included."""
        return self.unsure or pattern.search(self.source) is not None


def _evaluated(prefix: bytes, quote: bytes, body: bytes) -> Optional[str]:
    try:
        value = ast.literal_eval((prefix + quote + body + quote).decode("latin-1"))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value if isinstance(value, str) else None


def scan(data: bytes) -> SourceFacts:
    code: list[bytes] = []
    strings: list[str] = []
    pos, unsure = 0, False
    while True:
        m = _OPENING.search(data, pos)
        if m is None:
            code.append(data[pos:])
            break
        code.append(data[pos:m.start()])
        quote = m.group("quote")
        if quote is None:  # a comment
            pos = m.end()
            continue
        rest = _REST[quote].match(data, m.end())
        if rest is None:  # unterminated: not a file a rule could read
            unsure = True
            code.append(data[m.start():])
            break
        prefix = m.group("prefix").lower()
        body = data[m.end():rest.end() - len(quote)]
        text = body.decode("latin-1")
        strings.append(text)
        if b"f" in prefix:
            code.append(body)
            head = text.split("{", 1)[0]
            if head != text:
                strings.append(head)
        elif b"\\" in body and b"r" not in prefix:
            value = _evaluated(prefix, quote, body)
            if value is None:
                unsure = True
            elif value != text:
                strings.append(value)
        code.append(b" ")
        pos = rest.end()
    words = frozenset(w.decode("ascii") for w in set(_WORD.findall(b"".join(code))))
    return SourceFacts(data.decode("latin-1"), words, tuple(strings), unsure)

"""Span edits on plain text, and pointing findings back at the original file.

Shell and YAML rules never re-emit a file: they replace exact character spans, so everything they do
not touch (comments, quoting, layout) stays byte for byte. Rules run one after another on the text the
previous rule produced, and a rule that inserts lines shifts the lines below it; `OriginalLines`
maps a position in the current text back to the line of the input the report must name.
"""

from __future__ import annotations

import bisect
import difflib
import re
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Optional, TypeVar

from npu_port.transpiler.core.report import Severity
from npu_port.transpiler.core.rules import KEPT_FOR_CUDA_HINT, FileContext, TextRule, kept_for_cuda, silenced

T = TypeVar("T")


@dataclass(frozen=True, order=True)
class Edit:
    start: int
    end: int
    text: str


class EditConflict(ValueError):
    pass


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits; two insertions at one offset keep the order they were made in."""
    ordered = sorted(enumerate(edits), key=lambda p: (p[1].start, p[1].end, p[0]))
    out: list[str] = []
    pos = 0
    for _, e in ordered:
        if e.start < pos:
            raise EditConflict(f"overlapping edits at offset {e.start}")
        out.append(text[pos:e.start])
        out.append(e.text)
        pos = e.end
    out.append(text[pos:])
    return "".join(out)


class LineIndex:
    """Offset -> (line, col), both 1-based. The line starts are found at the first question: most files
    a text rule reads get no finding and need none."""

    def __init__(self, text: str):
        self._text = text
        self._starts: Optional[list[int]] = None

    def line_col(self, offset: int) -> tuple[int, int]:
        starts = self._starts
        if starts is None:
            starts = self._starts = line_starts(self._text)
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1


def line_starts(text: str) -> list[int]:
    """The offset of each line's first character (lines end at "\\n" alone, as shell and YAML read them)."""
    return [0, *(m.end() for m in _NEWLINE.finditer(text))]


_NEWLINE = re.compile("\n")


class OriginalLines:
    """Maps a line of the current text to the line of the original input it came from.

    Lines a previous rule inserted map to the original line they were inserted before.
    """

    def __init__(self, original: str, current: str):
        self.identity = original == current
        self.map: list[int] = []
        if self.identity:
            return
        a, b = original.splitlines(), current.splitlines()
        self.map = [0] * (len(b) + 1)
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            for k in range(j1, j2):
                if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                    self.map[k] = i1 + (k - j1) + 1
                else:
                    self.map[k] = min(i1 + 1, max(len(a), 1))
        self.map[len(b)] = max(len(a), 1)

    def __call__(self, line: int) -> int:
        if self.identity:
            return line
        return self.map[min(line - 1, len(self.map) - 1)]


class Positions:
    """Per text: offset -> position in the original input, and the ignore-comment check.

    It keeps what it needs of the file's context (its ignore comments), never the context itself:
    ParsedTexts holds it as a value keyed weakly by that context, and a value that referred to its key
    would keep every file's context, text and parse alive for the worker's lifetime."""

    def __init__(self, ctx: FileContext, text: str):
        self.ignores = ctx.ignores
        self.index = LineIndex(text)
        self.original = OriginalLines(ctx.text, text)

    def line_col(self, offset: int) -> tuple[int, int]:
        """Where `offset` of the current text was in the original input (column kept as is)."""
        line, col = self.index.line_col(offset)
        return self.original(line), col

    def is_silenced(self, rule: str, start: int, end: Optional[int] = None) -> bool:
        if not self.ignores:
            return False
        first = self.line_col(start)[0]
        last = self.line_col(end if end is not None else start)[0]
        return silenced(self.ignores, min(first, last), max(first, last), rule)


class ParsedTexts(Generic[T]):
    """One parse per text and file: the rules of a file that run on the same text share the parse and
    its positions (a rule that changed the text makes the next one parse again). Entries go with
    their file's context: nothing in a value refers back to it (tests/test_text_edits_memory.py)."""

    def __init__(self, parse: Callable[[str], T]):
        self._parse = parse
        self._cache: weakref.WeakKeyDictionary[FileContext, tuple[str, T, Positions]] = weakref.WeakKeyDictionary()

    def __call__(self, ctx: FileContext, text: str) -> tuple[T, Positions]:
        hit = self._cache.get(ctx)
        if hit is not None and hit[0] is text:
            return hit[1], hit[2]
        parsed, positions = self._parse(text), Positions(ctx, text)
        self._cache[ctx] = (text, parsed, positions)
        return parsed, positions


class SpanEditRule(TextRule):
    """A text rule that edits exact spans of the text (ShellRule, YamlRule): `apply` parses the text once
    for all the file's rules of its kind (`PARSE`), lets `check(parsed)` record span edits in
    `self.edits` and findings with `report`, then applies the edits."""

    PARSE: ClassVar[ParsedTexts[Any]]

    def apply(self, text: str) -> str:
        # The engine runs all of a language's rules once any one's trigger occurs; a rule whose own
        # triggers are absent from the text it gets can do nothing there (tests/test_property_prefilter.py),
        # so it neither parses nor checks. Not for rules that follow others' changes, nor with `--rules`
        # tables (rules act on the names those map, which are not in their TRIGGERS).
        if (self.TRIGGERS or self.TRIGGER_PATTERNS) and not self.FOLLOWS_CHANGES \
                and not self.ctx.options.rules_files and not self.matches(text):
            return text
        self.parsed, self.positions = self.PARSE(self.ctx, text)
        self.edits: list[Edit] = []
        self.check(self.parsed)
        return apply_edits(text, self.edits) if self.edits else text

    def check(self, parsed: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def report(self, offset: int, message: str, *, severity: Severity = "warning", hint: str = "") -> None:
        line, col = self.positions.line_col(offset)
        self.ctx.add(self.ID, line, col, message, severity=severity, hint=hint)

    def portable_text(self, offset: int, new: str, message: str,
                      portable: Optional[Callable[[], Optional[str]]]) -> Optional[str]:
        """The text a change writes: `new`, or with --keep-cuda its device-agnostic form `portable()`;
        None (said with a warning) where the change has none. Rules call it just before they edit."""
        if not self.ctx.options.keep_cuda:
            return new
        form = portable() if portable is not None else None
        if form is None:
            self.report(offset, kept_for_cuda(message), hint=KEPT_FOR_CUDA_HINT)
        return form

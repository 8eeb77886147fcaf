"""Messages for people, in rich's console markup, with rich imported only where it changes the output.

Importing rich's Console costs a one-file run about as much as converting the file (30 ms of CPU,
benchmarks/bench_startup.py). Where the output is not a terminal (a pipe, a file, CI logs, pre-commit)
rich writes a message as its plain text: the markup's tags dropped, `\\[` unescaped, nothing wrapped
(`soft_wrap`). `Console.print` writes that text itself when it can say for certain that rich would
write exactly it, and hands the message to a real rich Console otherwise: on a terminal (colours, a
progress bar), under FORCE_COLOR or TTY_COMPATIBLE=1, in Jupyter, for a message with a tab or a
control character, an emoji code rich knows (`:warning:`), a markup error or anything but markup text
and `Styled` pieces (a table). tests/test_console_output.py compares the two on generated messages.

`escape` is rich.markup.escape's contract (a `[` that would open a tag gets a backslash) without
importing rich.markup.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
from typing import IO, TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import rich.console

# What rich's markup reads as a tag: `[` then a letter, `#`, `/` or `@`, up to the first `]` with no
# `[` in between; a run of backslashes before it escapes it when odd.
_TAG = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")
_ESCAPABLE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")
# An emoji code as rich replaces it in markup text (`:name:` or `:name-emoji:`); a known name only.
_EMOJI = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")
# Characters rich writes as they are on a non-terminal: none of C0 but the newline (a tab is expanded,
# some codes dropped), no DEL, no C1.
_UNSAFE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


# What no message of the tool means to send a terminal: control characters but the newline and tab,
# which can only come from a file name or other input text (an escape sequence that sets the window
# title or clears the screen). Printed escaped, as Python writes them, whichever way a message goes.
_TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with every control character but newline and tab escaped (\\x1b)."""
    if not _TERMINAL_CONTROL.search(text):
        return text
    return _TERMINAL_CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def escape(text: str) -> str:
    """`text` as markup that shows it literally (what rich.markup.escape returns)."""
    text = _ESCAPABLE.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", text)
    if text.endswith("\\") and not text.endswith("\\\\"):
        return text + "\\"
    return text


class Styled:
    """Text in pieces, each plain or (text, style): rich's `Text.assemble`, not read as markup."""

    def __init__(self, *pieces: str | tuple[str, str]):
        self.pieces = pieces

    def plain(self) -> str:
        return "".join(p if isinstance(p, str) else p[0] for p in self.pieces)

    def rich_text(self) -> Any:
        from rich.text import Text

        return Text.assemble(*self.pieces)


class Console:
    """The part of rich.console.Console the commands use, writing plain text itself where rich would.

    Takes rich's arguments (`stderr`, `file`, `quiet`, `highlight`, `soft_wrap`); like rich, a console
    without `file` writes to whatever sys.stdout or sys.stderr is at the time of each print.
    """

    def __init__(self, *, stderr: bool = False, file: Optional[IO[str]] = None, quiet: bool = False,
                 highlight: bool = True, soft_wrap: bool = False):
        self.stderr = stderr
        self.quiet = quiet
        self.highlight = highlight
        self.soft_wrap = soft_wrap
        self._file = file
        self._rich: Optional[rich.console.Console] = None

    @property
    def file(self) -> Optional[IO[str]]:
        return self._file or (sys.stderr if self.stderr else sys.stdout)  # None without a stream

    @property
    def rich(self) -> rich.console.Console:
        """The rich Console this one stands for (imports rich), for what only it can draw."""
        if self._rich is None:
            from rich.console import Console as RichConsole

            self._rich = RichConsole(stderr=self.stderr, file=self._file, quiet=self.quiet, highlight=self.highlight,
                                     soft_wrap=self.soft_wrap)
        return self._rich

    @property
    def is_terminal(self) -> bool:
        if self._rich is not None or _maybe_jupyter():
            return self.rich.is_terminal
        return _is_terminal(self.file)

    def print(self, *objects: Any, highlight: Optional[bool] = None, soft_wrap: Optional[bool] = None,
              markup: Optional[bool] = None, end: str = "\n", **options: Any) -> None:
        if self.quiet:
            return
        objects = tuple(terminal_safe(o) if isinstance(o, str)
                        else Styled(*(terminal_safe(p) if isinstance(p, str) else (terminal_safe(p[0]), p[1])
                                      for p in o.pieces)) if isinstance(o, Styled) else o for o in objects)
        text = None
        wraps = not (self.soft_wrap if soft_wrap is None else soft_wrap)
        if not options and len(objects) <= 1 and not wraps and not self.is_terminal:
            text = _plain(objects[0], markup is not False) if objects else ""
        if text is None:
            objects = tuple(o.rich_text() if isinstance(o, Styled) else o for o in objects)
            self.rich.print(*objects, highlight=highlight, soft_wrap=soft_wrap, markup=markup, end=end, **options)
            return
        file = self.file
        if file is None:  # no stderr at all (pythonw): rich writes to a null file
            return
        file.write(text + end)
        file.flush()


def _maybe_jupyter() -> bool:
    return hasattr(builtins, "get_ipython")  # IPython's; rich then asks it which front end this is


def _is_terminal(file: Optional[IO[str]]) -> bool:
    """rich's Console.is_terminal for a console that was not told (TTY_COMPATIBLE, FORCE_COLOR, isatty)."""
    if hasattr(file, "rich_proxied_file"):  # rich's own redirection: let rich say
        return True
    tty_compatible = os.environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "1"
    force_color = os.environ.get("FORCE_COLOR")
    if force_color is not None:
        return force_color != ""
    isatty = getattr(file, "isatty", None)
    try:
        return False if isatty is None else bool(isatty())
    except ValueError:  # a closed file
        return False


def _plain(obj: Any, markup: bool = True) -> Optional[str]:
    """What rich writes for `obj` on a non-terminal with soft wrap, or None where only rich can tell."""
    if isinstance(obj, Styled):
        text = obj.plain()
        return None if _UNSAFE.search(text) else text
    if not isinstance(obj, str):
        return None
    pieces = _markup_text(obj) if markup else [obj]
    if pieces is None:
        return None
    for piece in pieces:
        if _UNSAFE.search(piece) or (":" in piece and _has_emoji(piece)):
            return None
    return "".join(pieces)


def _markup_text(markup: str) -> Optional[list[str]]:
    """The text pieces of `markup` with its tags dropped, as rich renders them; None on what rich could
    refuse or read otherwise (an explicit or unmatched closing tag, a `[@handler]`)."""
    pieces: list[str] = []
    depth = 0
    position = 0
    for match in _TAG.finditer(markup):
        full, escapes, tag = match.groups()
        start, end = match.span()
        if start > position:
            pieces.append(markup[position:start])
        position = end
        backslashes, escaped = divmod(len(escapes), 2)
        if backslashes:
            pieces.append("\\" * backslashes)
        if escaped:
            pieces.append(full[len(escapes):])
            continue
        if tag.startswith("@"):
            return None
        if tag.startswith("/"):
            if tag[1:].strip() or not depth:
                return None
            depth -= 1
        else:
            depth += 1
    if position < len(markup):
        pieces.append(markup[position:])
    return [p.replace("\\[", "[") for p in pieces]


def _has_emoji(text: str) -> bool:
    names = [m.group(2).lower() for m in _EMOJI.finditer(text)]
    if not names:
        return False
    from rich._emoji_codes import EMOJI  # only a text with a `:word:` in it pays for the table

    return any(name in EMOJI for name in names)

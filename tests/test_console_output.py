"""output/console.Console writes what rich's Console writes, byte for byte: the plain text it writes itself
on a non-terminal, and whatever it hands to rich (a terminal, a table, what only rich can tell). Both
for the message with its control characters (but newline and tab) escaped first: those come from file
names and never reach a terminal raw."""

from __future__ import annotations

import io

import pytest
import rich.console
import rich.markup
import rich.text
from hypothesis import example, given, settings
from hypothesis import strategies as st

from npu_port.transpiler.output import console as plain_console
from npu_port.transpiler.output.console import Console, Styled, escape, terminal_safe

_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS")


@pytest.fixture(autouse=True)
def _no_terminal_env(monkeypatch):
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


def _rich_out(obj, **options) -> str:
    buffer = io.StringIO()
    rich.console.Console(file=buffer, highlight=False, soft_wrap=True, **options).print(obj)
    return buffer.getvalue()


def _ours_out(obj, **options) -> str:
    buffer = io.StringIO()
    Console(file=buffer, highlight=False, soft_wrap=True, **options).print(obj)
    return buffer.getvalue()


def _same(markup) -> None:
    try:
        expected = _rich_out(terminal_safe(markup))
    except rich.markup.MarkupError:
        with pytest.raises(rich.markup.MarkupError):
            _ours_out(markup)
        return
    assert _ours_out(markup) == expected


_CHARS = st.sampled_from(list("ab z:_-=#@/\\[]]\n\t\r\x1b.é中\u0301\u200d😄") + ["smile", "100", "text"])
_TEXT = st.lists(_CHARS, max_size=20).map("".join)
_TAGS = st.sampled_from(["[bold]", "[bold red]", "[/]", "[dim]", "[/bold]", "[@click]", "[link=x]", "[]", "[a[b]"])
_MARKUP = st.lists(st.one_of(_TEXT, _TEXT.map(escape), _TAGS), max_size=8).map("".join)

# The messages the commands print, in their shapes (output/render.py, output/formats.py, commands/).
_MESSAGES = [
    "[bold red]error[/]: a/b.py: cannot read: Permission denied",
    "a/b.py:3:5: [bold red]error[/] [bold]tensor-cuda-method[/] `.cuda()` -> `.npu()` [dim](hint: see x)[/]",
    "[bold]2[/] files: 1 converted, 1 unchanged, 0 skipped by prefilter, 0 copied, [green]0 failed[/]; 1 changes, "
    "0 findings need a human; 0.05s",
    "changes per rule: tensor-cuda-method 1, torch-npu-import 1",
    "[bold underline]run\\[1].py[/]",
    "  1:1  [bold red]error[/]  [bold]torch-npu-import[/]  CUDA left over: added `import torch_npu`",
    "[bold green]passed[/]: 0 errors, 0 warnings, 0 notes; 1 files checked",
    "x.py:1:1: warning uses :cuda: and :100: and :smile: here",
    "",
]


@pytest.mark.parametrize("markup", _MESSAGES)
def test_the_commands_messages_print_as_rich_prints_them(markup):
    _same(markup)


def test_a_narrow_terminal_width_changes_nothing_when_soft_wrapping(monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    for markup in _MESSAGES:
        _same(markup)


def test_plain_messages_do_not_need_rich():
    plain = [m for m in _MESSAGES if plain_console._plain(m) is not None]
    assert len(plain) == len(_MESSAGES) - 1  # all but the one with a real emoji code
    assert plain_console._plain(":smile:") is None


@settings(max_examples=300, deadline=None)
@given(_MARKUP)
@example("a\\[b]")
@example("a\\[1]")
@example("C:\\[x]\\")
@example("[bold]x[/][/]")
@example("[dim]:smile-emoji:[/]")
def test_any_markup_prints_as_rich_prints_it(markup):
    _same(markup)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
@example("x\\")
@example("\\[bold]")
def test_escape_is_richs(text):
    assert escape(text) == rich.markup.escape(text)


@settings(max_examples=100, deadline=None)
@given(_TEXT, _TEXT)
def test_styled_pieces_print_as_text_assemble(a, b):
    pieces = ("    ", (a, "dim"), ": ", b)
    safe = ("    ", (terminal_safe(a), "dim"), ": ", terminal_safe(b))
    assert _ours_out(Styled(*pieces)) == _rich_out(rich.text.Text.assemble(*safe))


def test_no_control_character_of_a_message_reaches_the_stream_raw():
    for tty in (False, True):
        buffer = _Tty() if tty else io.StringIO()
        Console(file=buffer, highlight=False, soft_wrap=True).print("a/\x1b]0;title\x07b\x9b2J.py: [bold]x[/]")
        Console(file=buffer, highlight=False, soft_wrap=True).print(Styled(("e\x1b[2J", "dim"), "\r"))
        shown = buffer.getvalue().replace("\x1b[1m", "").replace("\x1b[2m", "").replace("\x1b[0m", "")
        assert not any(c in shown for c in "\x1b\x07\x9b\r"), repr(shown)
        assert "a/\\x1b]0;title\\x07b\\x9b2J.py" in shown


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("force_color", [None, "", "1"])
@pytest.mark.parametrize("tty_compatible", [None, "0", "1", "2"])
@pytest.mark.parametrize("tty", [False, True])
def test_is_terminal_as_rich_says(monkeypatch, force_color, tty_compatible, tty):
    for name, value in (("FORCE_COLOR", force_color), ("TTY_COMPATIBLE", tty_compatible)):
        if value is not None:
            monkeypatch.setenv(name, value)
    file = _Tty() if tty else io.StringIO()
    ours = Console(file=file, soft_wrap=True)
    assert ours.is_terminal == rich.console.Console(file=file, soft_wrap=True).is_terminal
    ours.print("[bold]x[/] y")
    rich.console.Console(file=file, soft_wrap=True).print("[bold]x[/] y")
    first, second = file.getvalue()[: len(file.getvalue()) // 2], file.getvalue()[len(file.getvalue()) // 2:]
    assert first == second  # colour codes on a terminal, plain text elsewhere, alike


@pytest.mark.parametrize("end", ["\n", "", "X"])
def test_an_empty_print_is_richs(end):
    ours, theirs = io.StringIO(), io.StringIO()
    Console(file=ours, soft_wrap=True).print(end=end)
    rich.console.Console(file=theirs, soft_wrap=True).print(end=end)
    assert ours.getvalue() == theirs.getvalue()


def test_a_table_and_options_go_to_rich():
    from rich.table import Table

    table = Table()
    table.add_column("a")
    table.add_row("1")
    assert _ours_out(table) == _rich_out(table)
    for markup in (False, None):
        for text in ("[bold]x[/] :smile:", "[bold]x[/] :1:"):
            buffer, expected = io.StringIO(), io.StringIO()
            Console(file=buffer, soft_wrap=True).print(text, markup=markup)
            rich.console.Console(file=expected, soft_wrap=True).print(text, markup=markup)
            assert buffer.getvalue() == expected.getvalue()


def test_quiet_prints_nothing_and_stderr_follows_sys_stderr(monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setattr("sys.stderr", buffer)
    Console(stderr=True, quiet=True, soft_wrap=True).print("x")
    Console(stderr=True, soft_wrap=True).print("[bold]y[/]")
    assert buffer.getvalue() == "y\n"
    monkeypatch.setattr("sys.stderr", None)  # pythonw: nothing to write to, as with rich
    Console(stderr=True, soft_wrap=True).print("z")
    rich.console.Console(stderr=True, soft_wrap=True).print("z")


def test_a_wrapping_console_wraps_as_rich_does():
    long = "word " * 30
    buffer = io.StringIO()
    Console(file=buffer, highlight=False).print(long)
    expected = io.StringIO()
    rich.console.Console(file=expected, highlight=False).print(long)
    assert buffer.getvalue() == expected.getvalue() and "\n" in buffer.getvalue().strip()

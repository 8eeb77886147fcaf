"""A token-aware view of a bash script: the words of every simple command with exact source spans.

This is not a bash parser. It is a lexer that knows enough of the grammar to find command words
safely: comments, '...', "...", $'...', `$(...)`, `$((...))`, backticks, `${...}`, line
continuations, arrays `a=(...)`, redirections, `case` patterns and here-documents. Rules edit the
script by replacing spans, so everything they do not touch stays byte for byte.

What is looked into, and what is not:
- command substitutions `$(...)` and backticks: their commands are listed (context "substitution");
- `bash -c '...'` / `sh -c "..."` strings: their commands are listed (context "bash-c"); edits in a
  double-quoted string are escaped for it;
- here-documents whose body is shell code: fed to a shell (`bash <<EOF`, `ssh host bash -s <<EOF`) or
  written to a `*.sh`/`*.bash` file (`cat > run.sh <<'EOF'`). Their commands are listed (context
  "heredoc"). Every other here-document body (a YAML or Python file being written, a message) is
  left alone, except that `$NAME` references in an unquoted-delimiter body are listed as parameters,
  because the shell expands them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NoReturn, Optional, cast

from npu_port.transpiler.core.python_source import SourceError
from npu_port.transpiler.text.text_edits import Edit, ParsedTexts, SpanEditRule

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGNMENT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?\+?=")
_FD_REDIRECT_RE = re.compile(r"\d+(?=[<>])")
_REDIRECTIONS = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">|", ">&", "&>", "<", ">")
_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", "&", "|", ";")
_CASE_END = (";;", ";&", ";;&")
_META = " \t\n;&|<>()"
_PLAIN_RUN = re.compile(r"[^ \t\n;&|<>()\\'\"$`]+")  # characters that mean only themselves in a word
# Reserved words that may start a compound command; the simple command begins after them.
_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!",
                       "time", "function", "esac"})
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
# Commands whose arguments are only text to print: a `trainer.device=cuda` there is a message.
TEXT_COMMANDS = frozenset({"echo", "printf", "logger", ":"})
# Commands that run the rest of their arguments as another command.
_WRAPPERS = {"nohup": 0, "exec": 0, "time": 0, "setsid": 0,
             "sudo": 0, "nice": 0, "numactl": 0, "taskset": 1, "timeout": 1, "stdbuf": 0, "env": 0,
             "srun": 0, "apptainer": 2, "singularity": 2}
_CONTAINER_RUNNERS = frozenset({"apptainer", "singularity"})  # wrappers only as `exec IMAGE COMMAND`
CONTAINER_VALUE_OPTS = {"-B", "--bind", "--env", "--env-file", "-H", "--home", "--pwd", "-o", "--overlay", "-W",
                         "--workdir", "--mount", "-S", "--scratch", "--security", "--network", "--network-args",
                         "--app", "--fusemount"}
_WRAPPER_VALUE_OPTS = {"nice": {"-n"}, "sudo": {"-u", "-g"}, "timeout": {"-s", "-k", "--signal", "--kill-after"},
                       "env": {"-u", "--unset", "-C", "--chdir"}, "numactl": {"-C", "-m", "-N", "-p"},
                       "srun": {"-N", "-n", "-c", "-p", "-t", "-J", "-o", "-e", "-w", "-x", "-A", "-q", "-G",
                                "--nodes", "--ntasks", "--cpus-per-task", "--partition", "--time", "--job-name",
                                "--output", "--error", "--nodelist", "--exclude", "--account", "--qos", "--gpus",
                                "--gres", "--mem", "--ntasks-per-node", "--gpus-per-node", "--export", "--mpi"},
                       "apptainer": CONTAINER_VALUE_OPTS, "singularity": CONTAINER_VALUE_OPTS}
# Slurm's job step launcher runs its command; so does a container's `exec IMAGE COMMAND` (the subcommand and
# the image are its two positionals). An option whose value is its own word and is not listed here ends the
# wrapper early: the command is then not recognised, and nothing is changed in it.


class ShellSyntaxError(SourceError):
    pass


# Files with a shell suffix that bash itself rejects are mostly templates (`<PLACEHOLDER>` tokens, jinja):
# the error says how to leave one out instead of leaving the user to guess.
NOT_A_SCRIPT_HINT = 'a template, not a script? leave it out with --exclude PATH or exclude = ["PATH"] in [tool.npu-port]'


@dataclass
class Param:
    """A parameter expansion `$NAME` / `${NAME...}`: the span is that of NAME only."""

    name: str
    start: int
    end: int
    quote: Optional[str] = None


@dataclass
class Word:
    text: str  # as the shell that runs it sees it (for `bash -c "..."` strings: unescaped)
    start: int  # span in the file
    end: int
    value: Optional[str]  # the word after quote removal when it has no expansion, else None
    array_items: list[Word] = field(default_factory=list)  # for `name=(a b c)`
    local: tuple[int, int] = field(default=(0, 0), repr=False, compare=False)  # span in the lexed text

    @property
    def is_literal(self) -> bool:
        return self.value is not None


@dataclass
class Command:
    """One simple command: `NAME=v ... word word ... [redirections]`."""

    assignments: list[Word] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[tuple[str, Word]] = field(default_factory=list)
    sep_before: str = ""  # the operator before it ("|" when its input is piped)
    sep_after: str = ""  # the operator after it ("|" when its output is piped)
    context: str = "top"  # "top" | "substitution" | "bash-c" | "heredoc"
    # The quotes the command text sits in, outermost first: None at the top, "'" in `bash -c '...'`,
    # "\"'" in `ssh h "bash -c '...'"`. Edits are escaped for each level (see `embed`).
    quote: Optional[str] = None
    start: int = 0
    end: int = 0

    def _extend(self, start: int, end: int) -> None:
        if not (self.words or self.assignments or self.redirects):
            self.start = start
        self.end = end

    @property
    def empty(self) -> bool:
        return not (self.words or self.assignments or self.redirects)

    def argv(self) -> tuple[int, list[Word]]:
        """(index of the program word, assignments given through wrappers such as `env A=1`).

        `nohup env A=1 numactl -C 0 python x.py` -> the index of `python`.
        """
        words, i = self.words, 0
        env: list[Word] = []
        while i < len(words):
            name = basename(words[i].value or "")
            if name not in _WRAPPERS or (name in _CONTAINER_RUNNERS and (
                    i + 1 >= len(words) or words[i + 1].value != "exec")):
                return i, env
            skip_values = _WRAPPER_VALUE_OPTS.get(name, set())
            positional = _WRAPPERS[name]
            i += 1
            while i < len(words):
                v = words[i].value or ""
                if name == "env" and ASSIGNMENT_RE.match(v):
                    env.append(words[i])
                elif v in skip_values:
                    i += 1
                elif v.startswith("-") and v != "-":
                    pass
                elif positional:
                    positional -= 1
                else:
                    break
                i += 1
        return i, env

    def program(self) -> str:
        i, _ = self.argv()
        return basename(self.words[i].value or "") if i < len(self.words) else ""

    def args(self) -> list[Word]:
        i, _ = self.argv()
        return self.words[i + 1:]

    @property
    def output_consumed(self) -> bool:
        """Its standard output feeds a pipe or a command substitution."""
        if self.sep_after in ("|", "|&"):
            return True
        return self.context == "substitution" and not self.stdout_discarded

    @property
    def stdout_discarded(self) -> bool:
        return any(op in (">", "&>", ">>", "&>>", ">|") and target.value == "/dev/null"
                   for op, target in self.redirects)


@dataclass
class Heredoc:
    command: Command
    body_start: int
    body_end: int
    quoted: bool  # delimiter quoted: the body is taken literally
    is_shell: bool = False
    lexer: Optional[_Lexer] = field(default=None, repr=False, compare=False)


def basename(value: str) -> str:
    return value.rsplit("/", 1)[-1]


def is_assignment(word: Word) -> bool:
    return bool(ASSIGNMENT_RE.match(word.text))


class Script:
    """The parsed view of one script text. Positions are offsets into `text`."""

    def __init__(self, text: str):
        self.text = text
        self.commands: list[Command] = []
        self.params: list[Param] = []
        self.heredocs: list[Heredoc] = []
        _Lexer(self, text).lex_all()

    @cached_property
    def probe_spans(self) -> tuple[tuple[int, int], ...]:
        """Where the probe lines --keep-cuda adds are in the text. Found once per script: a rule asks
        for every command word, and searching the text each time made a 68 KB script cost seconds."""
        return tuple(span for name in PROBE_LINES if (span := _probe_line_span(self.text, name)))

    def assigned_names(self) -> set[str]:
        """Every variable the script assigns or exports anywhere."""
        names: set[str] = set()
        for cmd in self.commands:
            words = list(cmd.assignments) + cmd.argv()[1]
            if cmd.program() in ("export", "declare", "typeset", "readonly", "local"):
                words += cmd.args()
            for w in words:
                m = ASSIGNMENT_RE.match(w.text) or NAME_RE.fullmatch(w.text)
                if m:
                    names.add(m.group(1) if m.groups() else m.group(0))
        return names


# --------------------------------------------------------------------------------------------
class _Lexer:
    def __init__(self, script: Script, text: str, omap: Optional[Sequence[int]] = None,
                 quote: Optional[str] = None, context: str = "top"):
        self.script = script
        self.text = text
        self.omap = omap  # position in `text` -> position in the file (for unescaped strings)
        self.quote = quote
        self.context = context
        self.pending: list[tuple[Command, str, bool, bool]] = []

    def o(self, i: int) -> int:
        return self.omap[i] if self.omap is not None else i

    def error(self, message: str, i: int) -> NoReturn:
        line = self.script.text.count("\n", 0, self.o(min(i, len(self.text)))) + 1
        raise ShellSyntaxError(f"not valid bash: line {line}: {message} ({NOT_A_SCRIPT_HINT})")

    # -- command lists -------------------------------------------------------------------------
    def lex_all(self) -> None:
        self.lex_list(0, len(self.text), self.context)
        k = 0
        while k < len(self.script.heredocs):  # bodies may hold here-documents of their own
            heredoc = self.script.heredocs[k]
            cast(_Lexer, heredoc.lexer)._heredoc_body(heredoc)  # set for every heredoc a lexer read
            k += 1

    def lex_list(self, i: int, end: int, context: str, stop_paren: bool = False) -> int:
        opened = i - 2
        """Lex commands from i; returns the end (or the index of the closing `)` when stop_paren)."""
        text = self.text
        cmd = Command(context=context, quote=self.quote)
        depth = 0
        sep = ""
        pattern_mode = False  # reading `case` patterns (up to `)`)
        case_subject = False  # between `case` and `in`
        skip_words = False  # the word list of `for x in ...` / `select`
        commands = self.script.commands

        def flush(op: str):
            nonlocal cmd, sep, skip_words
            if not cmd.empty:
                cmd.sep_before, cmd.sep_after = sep, op
                commands.append(cmd)
                self._nested_code(cmd)
            sep = op
            skip_words = False
            cmd = Command(context=context, quote=self.quote)

        while i < end:
            c = text[i]
            if c in " \t":
                i += 1
            elif c == "\\" and text.startswith("\\\n", i):
                i += 2
            elif c == "\n":
                flush("\n")
                i = self._read_heredocs(i + 1, end)
            elif c == "#":
                j = text.find("\n", i, end)
                i = end if j < 0 else j
            elif c == ")":
                if pattern_mode:
                    pattern_mode = False
                    i += 1
                elif depth == 0 and stop_paren:
                    flush(")")
                    return i
                else:
                    depth -= 1
                    flush(")")
                    i += 1
            elif c == "(" and pattern_mode:
                i += 1  # the optional `(` before a case pattern
            elif c == "(":
                if text.startswith("((", i) and cmd.empty:
                    j = self._match_parens(i, end)
                    self._scan_params(i, j)
                    i = j
                else:
                    depth += 1
                    flush("(")
                    i += 1
            elif (op := next((op for op in _OPERATORS if text.startswith(op, i)), None)) and \
                    not text.startswith("&>", i):
                flush(op)
                i += len(op)
                if op in _CASE_END:
                    pattern_mode = True
            elif (m := _FD_REDIRECT_RE.match(text, i)) or c in "<>" or text.startswith("&>", i):
                j = m.end() if m else i
                if text.startswith(("<(", ">("), j):
                    word, i = self.read_word(i, end)
                    cmd._extend(word.start, word.end)
                    cmd.words.append(word)
                    continue
                op = next(op for op in _REDIRECTIONS if text.startswith(op, j))
                k = j + len(op)
                while k < end and text[k] in " \t":
                    k += 1
                # `done < <(cmd)`: a process substitution is a redirection's target like any word
                if k >= end or (text[k] in "\n;|&()<>" and not text.startswith(("<(", ">("), k)):
                    self.error(f"redirection {op!r} without a target", i)
                target, k = self.read_word(k, end)
                if op in ("<<", "<<-"):
                    delim = target.value if target.value is not None else target.text
                    quoted = any(q in target.text for q in "'\"\\")
                    self.pending.append((cmd, delim, op == "<<-", quoted))
                cmd._extend(self.o(i), target.end)
                cmd.redirects.append((op, target))
                i = k
            else:
                word, i = self.read_word(i, end)
                if pattern_mode:
                    if word.text == "esac":
                        pattern_mode = False
                        flush(";")
                    continue
                if case_subject:
                    if word.text == "in":
                        case_subject, pattern_mode = False, True
                    continue
                if skip_words:
                    continue
                if cmd.empty and word.text in _RESERVED:
                    continue
                if cmd.empty and word.text == "case":
                    case_subject = True
                    continue
                if cmd.empty and word.text in ("for", "select"):
                    skip_words = True
                    continue
                cmd._extend(word.start, word.end)
                if not cmd.words and is_assignment(word):
                    cmd.assignments.append(word)
                else:
                    cmd.words.append(word)
        flush("")
        if stop_paren:
            self.error("unterminated $( ... )", opened)
        return i

    def _read_heredocs(self, i: int, end: int) -> int:
        text = self.text
        while self.pending:
            cmd, delim, strip_tabs, quoted = self.pending.pop(0)
            body_start = i
            while True:
                if i >= end:
                    body_end = end
                    break
                j = text.find("\n", i, end)
                line_end = end if j < 0 else j
                line = text[i:line_end]
                if (line.lstrip("\t") if strip_tabs else line) == delim:
                    body_end = i
                    i = line_end + 1 if j >= 0 else end
                    break
                i = line_end + 1 if j >= 0 else end
            self.script.heredocs.append(Heredoc(cmd, self.o(body_start), self.o(body_end), quoted, lexer=self))
        return i

    # -- words ---------------------------------------------------------------------------------
    def read_word(self, i: int, end: int) -> tuple[Word, int]:
        text = self.text
        start = i
        literal: list[str] = []
        is_literal = True
        items: list[Word] = []
        while i < end:
            c = text[i]
            if c in "<>" and i == start and text.startswith("(", i + 1):  # process substitution
                i = self.lex_list(i + 2, end, "substitution", stop_paren=True) + 1
                is_literal = False
            elif c == "(" and ASSIGNMENT_RE.fullmatch(text, start, i):
                items, i = self._read_array(i + 1, end)
                is_literal = False
            elif c in _META:
                break
            elif c == "\\":
                if text.startswith("\\\n", i):
                    i += 2
                else:
                    literal.append(text[i + 1:i + 2])
                    i += 2
            elif c == "'":
                j = text.find("'", i + 1, end)
                if j < 0:
                    self.error("unterminated single quote", i)
                literal.append(text[i + 1:j])
                i = j + 1
            elif c == '"':
                i, ok = self._read_dquote(i + 1, end, literal)
                is_literal = is_literal and ok
            elif c == "$":
                i, lit = self._read_dollar(i, end, None)
                if lit is None:
                    is_literal = False
                else:
                    literal.append(lit)
            elif c == "`":
                i = self._read_backtick(i, end)
                is_literal = False
            else:
                m = cast(re.Match[str], _PLAIN_RUN.match(text, i, end))  # any other character starts a run
                literal.append(m.group())
                i = m.end()
        if i == start:
            self.error(f"unexpected {text[i:i + 1]!r}", i)
        word = Word(text[start:i], self.o(start), self.o(i), "".join(literal) if is_literal else None, items,
                    (start, i))
        return word, i

    def _read_array(self, i: int, end: int) -> tuple[list[Word], int]:
        items: list[Word] = []
        opened = i - 1
        while i < end:
            c = self.text[i]
            if c in " \t\n":
                i += 1
            elif self.text.startswith("\\\n", i):
                i += 2
            elif c == "#":
                j = self.text.find("\n", i, end)
                i = end if j < 0 else j
            elif c == ")":
                return items, i + 1
            else:
                word, i = self.read_word(i, end)
                items.append(word)
        self.error("unterminated array ( ... )", opened)

    def _read_dquote(self, i: int, end: int, literal: list[str]) -> tuple[int, bool]:
        text = self.text
        opened = i - 1
        ok = True
        while i < end:
            c = text[i]
            if c == '"':
                return i + 1, ok
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt == "\n":
                    i += 2
                    continue
                literal.append(nxt if nxt in '$`"\\' else "\\" + nxt)
                i += 2
            elif c == "$":
                i, lit = self._read_dollar(i, end, '"')
                if lit is None:
                    ok = False
                else:
                    literal.append(lit)
            elif c == "`":
                i = self._read_backtick(i, end)
                ok = False
            else:
                literal.append(c)
                i += 1
        self.error("unterminated double quote", opened)

    def _read_dollar(self, i: int, end: int, quote: Optional[str]) -> tuple[int, Optional[str]]:
        """At a `$`: returns (index after the expansion, None) or (i+1, "$") for a lone dollar."""
        text = self.text
        nxt = text[i + 1:i + 2]
        if text.startswith("$((", i):
            j = self._match_parens(i + 1, end)
            self._scan_params(i + 3, j)
            return j, None
        if nxt == "(":
            return self.lex_list(i + 2, end, "substitution", stop_paren=True) + 1, None
        if nxt == "{":
            m = re.compile(r"[#!]?([A-Za-z_][A-Za-z0-9_]*)").match(text, i + 2)
            if m:
                self.script.params.append(Param(m.group(1), self.o(m.start(1)), self.o(m.end(1)), quote))
            return self._match_brace(i + 2, end, quote), None
        if nxt == "'" and quote is None:
            j = i + 2
            while j < end and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            if j >= end:
                self.error("unterminated $'...' string", i)
            return j + 1, text[i + 2:j]
        if nxt == '"' and quote is None:
            lit: list[str] = []
            j, ok = self._read_dquote(i + 2, end, lit)
            return j, "".join(lit) if ok else None
        m = NAME_RE.match(text, i + 1)
        if m:
            self.script.params.append(Param(m.group(0), self.o(m.start()), self.o(m.end()), quote))
            return m.end(), None
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            return i + 2, None
        return i + 1, "$"

    def _match_brace(self, i: int, end: int, quote: Optional[str]) -> int:
        """From inside `${`, the index after its closing `}`; nested expansions are lexed too."""
        text = self.text
        opened = i - 2
        depth = 0
        while i < end:
            c = text[i]
            if c == "\\":
                i += 2
            elif c == "}":
                if depth == 0:
                    return i + 1
                depth -= 1
                i += 1
            elif c == "{":
                depth += 1
                i += 1
            elif c == "$":
                i, _ = self._read_dollar(i, end, quote)
            elif c == "'" and quote is None:
                j = text.find("'", i + 1, end)
                if j < 0:
                    self.error("unterminated single quote", i)
                i = j + 1
            elif c == '"':
                i, _ = self._read_dquote(i + 1, end, [])
            elif c == "`":
                i = self._read_backtick(i, end)
            else:
                i += 1
        self.error("unterminated ${ ... }", opened)

    def _match_parens(self, i: int, end: int) -> int:
        """From an opening `(`, the index after its matching `)` (arithmetic: no quoting rules needed)."""
        depth = 0
        for j in range(i, end):
            c = self.text[j]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return j + 1
        self.error("unterminated (( ... ))", i)

    def _scan_params(self, i: int, j: int) -> None:
        for m in re.finditer(r"\$\{?[#!]?([A-Za-z_][A-Za-z0-9_]*)", self.text[i:j]):
            s = i + m.start(1)
            self.script.params.append(Param(m.group(1), self.o(s), self.o(s + len(m.group(1)))))

    def _read_backtick(self, i: int, end: int) -> int:
        j = i + 1
        while j < end and self.text[j] != "`":
            j += 2 if self.text[j] == "\\" else 1
        if j >= end:
            self.error("unterminated backquote", i)
        self.lex_list(i + 1, j, "substitution")
        return j + 1

    # -- nested shell code -----------------------------------------------------------------------
    def _heredoc_body(self, heredoc: Heredoc) -> None:
        cmd = heredoc.command
        name = cmd.program()
        targets = [w.value or "" for op, w in cmd.redirects if op in (">", ">>", ">|")]
        if name == "tee":
            targets += [w.value or "" for w in cmd.args()]
        heredoc.is_shell = name in SHELLS or (name == "ssh" and any(w.value in SHELLS for w in cmd.args())) \
            or (name in ("cat", "tee") and any(t.endswith((".sh", ".bash")) for t in targets))
        if self.omap is not None:
            return  # a here-document inside a `bash -c "..."` string: left alone
        if heredoc.is_shell:
            sub = _Lexer(self.script, self.text, quote=self.quote)
            sub.lex_list(heredoc.body_start, heredoc.body_end, "heredoc")
        elif not heredoc.quoted:
            self._scan_params(heredoc.body_start, heredoc.body_end)

    def _nested_code(self, cmd: Command) -> None:
        """Lex a string that is shell code as commands of its own: `bash -c 'code'`, `sh -lc "code"`,
        `ssh host bash -c '...'`, `ssh host "code"`. The commands get context "bash-c"."""
        code = _code_word(cmd)
        if code is None:
            return
        start, end = code.local
        raw = self.text[start:end]
        if len(raw) < 2 or raw[0] not in "'\"" or raw[-1] != raw[0]:
            return
        quote = (self.quote or "") + raw[0]
        if raw[0] == "'":
            if "'" in raw[1:-1]:
                return
            sub = _Lexer(self.script, self.text, self.omap, quote=quote, context="bash-c")
            sub.lex_list(start + 1, end - 1, "bash-c")
        else:
            unescaped, local_map = _unescape_dquoted(self.text, start + 1, end - 1)
            if unescaped is None:
                return
            sub = _Lexer(self.script, unescaped, [self.o(j) for j in local_map], quote=quote, context="bash-c")
            sub.lex_list(0, len(unescaped), "bash-c")


_SSH_VALUE_OPTS = frozenset("-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w".split())


def _code_word(cmd: Command) -> Optional[Word]:
    """The word of `cmd` that another shell runs as code, if any."""
    words = cmd.words
    at = next((k for k, w in enumerate(words) if basename(w.value or "") in SHELLS), None)
    if at is not None:
        args = words[at + 1:]
        for k, w in enumerate(args):
            v = w.value or ""
            if not v.startswith("-"):
                return None  # a script file: what follows are its arguments
            if "c" in v and not v.startswith("--"):
                return args[k + 1] if k + 1 < len(args) else None
        return None
    if cmd.program() == "ssh":
        args = cmd.args()
        k = 0
        while k < len(args) and (args[k].value or "").startswith("-"):
            k += 2 if args[k].value in _SSH_VALUE_OPTS else 1
        rest = args[k + 1:]
        return rest[0] if len(rest) == 1 else None
    return None


def nested_code_word(cmd: Command) -> Optional[Word]:
    """The word of `cmd` that another shell runs as code (`bash -c 'code'`, `ssh host "code"`), if any:
    the lexer lists its commands as commands of their own (context "bash-c")."""
    return _code_word(cmd)


def _unescape_dquoted(text: str, start: int, end: int) -> tuple[Optional[str], list[int]]:
    """The text of a "..." string as the inner shell sees it, and where each character came from.

    Gives up (None) on a string that is not one plain double-quoted unit.
    """
    out: list[str] = []
    omap: list[int] = []
    i = start
    while i < end:
        c = text[i]
        if c == "\\" and i + 1 < end and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                out.append(text[i + 1])
                omap.append(i + 1)
            i += 2
        elif c == '"':
            return None, []
        else:
            out.append(c)
            omap.append(i)
            i += 1
    omap.append(end)
    return "".join(out), omap


# --------------------------------------------------------------------------------------------
parse_script = ParsedTexts(Script)  # (ctx, text) -> (Script, Positions), one parse per text


def embed(text: str, quote: Optional[str]) -> str:
    """`text` written so that it reads as itself inside the given quotes (outermost first)."""
    for q in reversed(quote or ""):
        if q == "'":
            text = text.replace("'", "'\\''")
        else:
            text = re.sub(r'([\\"$`])', r"\\\1", text)
    return text


# --keep-cuda: what a launcher runs only on an Ascend host (the driver's npu-smi is on its PATH there).
NPU_PROBE = "if command -v npu-smi >/dev/null 2>&1; then  # Ascend NPU host (npu-port --keep-cuda)"


class ShellRule(SpanEditRule):
    """A rule over shell scripts: `check(script)` looks at commands and calls `change` / `report`."""

    LANGUAGE = "shell"
    PARSE = parse_script

    def check(self, script: Script) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def change(self, start: int, end: int, new: str, message: str, *, quote: Optional[str] = None,
               scope: Optional[tuple[int, int]] = None, portable: Optional[Callable[[], Optional[str]]] = None) -> bool:
        """Replace [start, end) by `new` (escaped for `quote`), unless an ignore comment covers it; with
        --keep-cuda by `portable()` instead (SpanEditRule.portable_text)."""
        lo, hi = scope or (start, end)
        if self.positions.is_silenced(self.ID, lo, hi):
            return False
        if any(e.start < end and start < e.end for e in self.edits):
            return False
        form = self.portable_text(start, new, message, portable)
        if form is None:
            return False
        new = form
        self.edits.append(Edit(start, end, embed(new, quote)))
        line, col = self.positions.line_col(start)
        self.ctx.add(self.ID, line, col, message, kind="change")
        return True

    def insert_lines(self, offset: int, lines: Sequence[str], message: str) -> bool:
        """Insert whole lines before the line that starts at `offset`. With --keep-cuda they are NPU
        settings that must not reach a GPU host: they go inside a device probe (npu-smi on the PATH)."""
        if self.positions.is_silenced(self.ID, offset):
            return False
        if self.ctx.options.keep_cuda:
            lines = [NPU_PROBE, *("    " + line if line else line for line in lines), "fi"]
        text = self.parsed.text
        lead = "\n" if offset == len(text) and text and not text.endswith("\n") else ""
        self.edits.append(Edit(offset, offset, lead + "".join(line + "\n" for line in lines)))
        line, _ = self.positions.line_col(offset)
        self.ctx.add(self.ID, line, 1, message, kind="change")
        return True


# -- helpers the rules share ---------------------------------------------------------------------
_PYTHON_RE = re.compile(r"python(\d+(\.\d+)?)?$")
_PYTHON_VALUE_OPTS = {"-W", "-X", "-Q"}
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


@dataclass
class PythonLaunch:
    """What a command runs in Python: a script file or a module, and the arguments it gets."""

    target: str  # "train.py" or the module name
    is_module: bool
    target_word: Word
    args: list[Word]
    launcher: str  # python | torchrun | accelerate | deepspeed


def python_launch(cmd: Command) -> Optional[PythonLaunch]:
    """`python [-u] x.py ARGS`, `python -m pkg.mod ARGS`, `torchrun [opts] x.py ARGS`,
    `python -m torch.distributed.run [opts] x.py ARGS`, `accelerate launch [opts] x.py ARGS`,
    `deepspeed [opts] x.py ARGS`; None for anything else."""
    i, _ = cmd.argv()
    words = cmd.words
    if i >= len(words):
        return None
    prog = basename(words[i].value or "")
    rest = words[i + 1:]
    if _PYTHON_RE.match(prog):
        k = 0
        while k < len(rest):
            v = rest[k].value or ""
            if v == "-m" and k + 1 < len(rest):
                module = rest[k + 1].value or ""
                if module in _LAUNCHER_MODULES:
                    return _first_script(rest[k + 2:], "torchrun")
                return PythonLaunch(module, True, rest[k + 1], rest[k + 2:], "python")
            if v in ("-c", "-"):
                return None
            if v in _PYTHON_VALUE_OPTS:
                k += 2
                continue
            if v.startswith("-"):
                k += 1
                continue
            return PythonLaunch(v, False, rest[k], rest[k + 1:], "python")
        return None
    if prog == "torchrun":
        return _first_script(rest, "torchrun")
    if prog == "accelerate" and rest and rest[0].value == "launch":
        return _first_script(rest[1:], "accelerate")
    if prog == "deepspeed":
        return _first_script(rest, "deepspeed")
    return None


def _first_script(words: list[Word], launcher: str) -> Optional[PythonLaunch]:
    """Launcher options take values in either form, so the script is the first `*.py` word (or `-m mod`)."""
    for k, w in enumerate(words):
        v = w.value or ""
        if v in ("-m", "--module") and k + 1 < len(words):
            return PythonLaunch(words[k + 1].value or "", True, words[k + 1], words[k + 2:], launcher)
        if v.endswith(".py") and not v.startswith("-"):
            return PythonLaunch(v, False, w, words[k + 1:], launcher)
    return None


def option_values(words: list[Word], names) -> list[tuple[Word, Optional[Word], int, int]]:
    """Every `--name VALUE` / `--name=VALUE` among `words`: (option word, separate value word or None,
    start and end of the value text within the file)."""
    found: list[tuple[Word, Optional[Word], int, int]] = []
    for k, w in enumerate(words):
        v = w.value or w.text
        for name in names:
            if v == name and k + 1 < len(words):
                nxt = words[k + 1]
                found.append((w, nxt, nxt.start, nxt.end))
            elif v.startswith(name + "="):
                found.append((w, None, w.start + w.text.index("=") + 1, w.end))
    return found


def option_value(opt: Word, value_word: Optional[Word]) -> Optional[str]:
    """The literal value of an option_values entry: the separate word's, else what follows `=`
    (None where the separate word is not literal)."""
    return value_word.value if value_word else (opt.value or "").partition("=")[2]


def token_span(script: Script, start: int, end: int, token: str) -> Optional[tuple[int, int]]:
    """The span of the last `token` in the file text [start, end)."""
    at = script.text.rfind(token, start, end)
    return (at, at + len(token)) if at >= 0 else None


def line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def next_line_start(text: str, offset: int) -> int:
    at = text.find("\n", offset)
    return len(text) if at < 0 else at + 1


def preamble_end(script: Script, keep=("set",), sources=("set_env.sh",)) -> int:
    """Where additions to a launcher's top go: after the shebang, the leading comments, `set -e` style
    lines and `source .../set_env.sh` lines; at the start of the first other line."""
    first = None
    for cmd in script.commands:
        if cmd.context not in ("top", "substitution"):
            continue
        prog = cmd.program()
        if prog in keep and not cmd.assignments:
            continue
        if prog in ("source", ".") and any((w.value or w.text).endswith(sources) for w in cmd.args()):
            continue
        if first is None or cmd.start < first:
            first = cmd.start
    return len(script.text) if first is None else line_start(script.text, first)


def indentation(text: str, offset: int) -> str:
    start = line_start(text, offset)
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


# -- --keep-cuda: one device probe per launcher ---------------------------------------------------
# A launcher that must run on both kinds of host asks once which accelerator it has, near the top, and
# every value that names the device (`--device`, `trainer.device=`, the collective backend) reads the
# answer: `$DEVICE` is `npu` where the Ascend driver's npu-smi is on the PATH, else `cuda`. It is exported:
# a VERL config converted with --keep-cuda reads it too (`device: ${oc.env:DEVICE,cuda}`).
PROBE_LINES = {
    "DEVICE": "export DEVICE=$(command -v npu-smi >/dev/null 2>&1 && echo npu || echo cuda)"
              "  # this host's accelerator (npu-port --keep-cuda)",
    "DIST_BACKEND": 'DIST_BACKEND=$([ "$DEVICE" = npu ] && echo hccl || echo nccl)'
                    "  # its collective backend (npu-port --keep-cuda)",
    "SMI": 'SMI=$([ "$DEVICE" = npu ] && echo npu-smi || echo nvidia-smi)'
           "  # its driver's device tool (npu-port --keep-cuda)",
    "device_smi": 'device_smi() { if [ "$DEVICE" = npu ]; then npu-smi info; else nvidia-smi; fi; }'
                  "  # its status view (npu-port --keep-cuda)",
}
_PROBE_NEEDS = {"DIST_BACKEND": ("DEVICE",), "SMI": ("DEVICE",), "device_smi": ("DEVICE",)}
_PROBE_FUNCTIONS = frozenset({"device_smi"})  # read as a command name, not as `$NAME`
_PROBE_LINE_RE = {name: re.compile(r"^" + re.escape(line.partition("  #")[0]) + r"[ \t]*(#.*)?$", re.M)
                  for name, line in PROBE_LINES.items()}


def _probe_line_span(text: str, name: str) -> Optional[tuple[int, int]]:
    m = _PROBE_LINE_RE[name].search(text)
    return (m.start(), m.end()) if m else None


def _probe_offset(script: Script) -> int:
    """Where probe lines go: after the last probe line already there, else at the end of the launcher's
    preamble (preamble_end), so that the probe runs before anything that reads it."""
    text = script.text
    ends = [span[1] for name in PROBE_LINES if (span := _probe_line_span(text, name))]
    if ends:
        return next_line_start(text, max(ends))
    return preamble_end(script)


def probe_reference(rule: ShellRule, cmd: Command, name: str = "DEVICE") -> Optional[str]:
    """`$NAME` of the launcher's device probe variable (PROBE_LINES), with the probe line added near the top
    of the script where it has none yet (once, however many values read it); None where the value at
    `cmd` cannot read it: a command another shell runs (`bash -c '...'`, ssh, a here-document) does not
    see the launcher's variables, and a script that sets a variable of that name itself means something
    else by it."""
    if cmd.context not in ("top", "substitution") or cmd.quote is not None:
        return None
    script: Script = rule.parsed
    text = script.text
    wanted = [*_PROBE_NEEDS.get(name, ()), name]
    own = {n for n in wanted if _probe_line_span(text, n) is None}
    assigned = script.assigned_names()
    if any(n in own and (n in assigned or any(p.name == n for p in script.params)
                         or (n in _PROBE_FUNCTIONS and re.search(rf"\b{n}\b", text))) for n in wanted):
        return None  # the script's own variable of that name (or one it reads from its environment)
    if any(n not in own for n in wanted) and any(
            n in assigned and _assigned_elsewhere(script, n) for n in wanted if n not in own):
        return None
    queued = getattr(rule, "_probes_queued", None)
    if queued is None or queued[0] is not rule.edits:
        queued = (rule.edits, set())
        rule._probes_queued = queued  # type: ignore[attr-defined]
    offset = _probe_offset(script)
    for n in wanted:
        if n in own and n not in queued[1]:
            rule.edits.append(Edit(offset, offset, PROBE_LINES[n] + "\n"))
            queued[1].add(n)
    return name if name in _PROBE_FUNCTIONS else "$" + name


def in_probe_line(script: Script, offset: int) -> bool:
    """`offset` is on one of the probe lines that --keep-cuda added (their `nvidia-smi` is the GPU branch)."""
    return any(start <= offset < end for start, end in script.probe_spans)


def _assigned_elsewhere(script: Script, name: str) -> bool:
    """`name` is set by a command other than its probe line."""
    span = _probe_line_span(script.text, name)
    for cmd in script.commands:
        words = list(cmd.assignments) + cmd.argv()[1]
        if cmd.program() in ("export", "declare", "typeset", "readonly", "local"):
            words += cmd.args()
        if any((w.text.startswith(name + "=") or w.text.startswith(name + "+=")) and not (
                span and span[0] <= w.start < span[1]) for w in words):
            return True
    return False


def quote_at(word: Word, offset: int) -> Optional[str]:
    """The quote (`'` or `"`) that the file offset `offset` inside `word` sits in, or None."""
    state: Optional[str] = None
    i, text = 0, word.text
    stop = offset - word.start
    while i < min(stop, len(text)):
        c = text[i]
        if state is None and c == "\\":
            i += 2
            continue
        if state == '"' and c == "\\":
            i += 2
            continue
        if c in "'\"" and state in (None, c):
            state = None if state == c else c
        i += 1
    return state


def probed_value(rule: ShellRule, cmd: Command, word: Word, offset: int, name: str = "DEVICE",
                 *, quoted: bool = True) -> Optional[str]:
    """The text that reads probe variable `name` at `offset` of `word`: `"$DEVICE"` in an unquoted value
    (`quoted`), `$DEVICE` where the value already sits in double quotes or `quoted` is false; None in single
    quotes (no expansion there) or where probe_reference has none."""
    state = quote_at(word, offset)
    if state == "'":
        return None
    ref = probe_reference(rule, cmd, name)
    if ref is None:
        return None
    return f'"{ref}"' if quoted and state is None else ref

"""`nvidia-smi` run as a presence check becomes `npu-smi info`; code that reads its output is reported."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache
from typing import Optional, cast

import libcst as cst

from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table

# How each callable treats its command. "run": output goes to the terminal or nowhere, only the exit
# status can be read; "read": the caller gets the output; "which": looks the program up on PATH.
_RUNS = {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.Popen"}
_SHELL_RUNS = {"os.system"}
_READS = {"subprocess.check_output", "subprocess.getoutput", "subprocess.getstatusoutput", "os.popen"}
_WHICH = {"shutil.which", "distutils.spawn.find_executable"}
_OUTPUT_DISCARDED = {"subprocess.DEVNULL"}


@dataclass(frozen=True)
class SmiTable:
    cuda_program: str
    npu_command: tuple[str, ...]
    discard_words: frozenset[str]
    parse_hint: str

    @property
    def npu_program(self) -> str:
        return self.npu_command[0]


@cache
def smi_table(target: str) -> SmiTable:
    raw = load_table(target, "smi")
    return SmiTable(raw["cuda_program"], tuple(raw["npu_command"]), frozenset(raw["discard_words"]),
                    raw["parse_hint"])


def _string_like(node: cst.BaseExpression, value: str) -> cst.SimpleString:
    """A string literal with `value`, quoted like `node` (a string literal: the callers checked it)."""
    quoted = cast(cst.SimpleString, node)
    return cst.SimpleString(f"{quoted.prefix}{quoted.quote}{value}{quoted.quote}")


def _plain_value(node: cst.BaseExpression) -> Optional[str]:
    """The text of a string literal without escapes or byte prefix, else None."""
    if not isinstance(node, cst.SimpleString) or "\\" in node.raw_value or "b" in node.prefix.lower():
        return None
    return node.raw_value


def _presence_calls(expr: cst.BaseExpression) -> list[cst.Call]:
    """Calls whose result `expr` only tests for truth or None (`if which(x)`, `which(x) is None`, ...)."""
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Name) and expr.func.value == "bool" and len(expr.args) == 1:
            return _presence_calls(expr.args[0].value)
        return [expr]
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return _presence_calls(expr.expression)
    if isinstance(expr, cst.BooleanOperation):
        return _presence_calls(expr.left) + _presence_calls(expr.right)
    if isinstance(expr, cst.Comparison) and all(
            isinstance(c.operator, (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual))
            and isinstance(c.comparator, cst.Name) and c.comparator.value == "None"
            for c in expr.comparisons):
        return _presence_calls(expr.left)
    return []


class NvidiaSmiToNpuSmi(PythonRule):
    """`nvidia-smi` run only for its exit status becomes `npu-smi info`; parsing its output is reported.

    What it does:
        Rewrites a bare presence check: `subprocess.run(["nvidia-smi"])` (also call, check_call,
        Popen) -> `subprocess.run(["npu-smi", "info"])`, `os.system("nvidia-smi")` and
        `subprocess.run("nvidia-smi", shell=True)` -> `"npu-smi info"` (output redirected to
        /dev/null stays redirected), and `shutil.which("nvidia-smi")` tested for truth or None ->
        `shutil.which("npu-smi")`. Code that reads the output (check_output, capture_output=True,
        stdout=PIPE, os.popen, --query-gpu and other arguments, pipes) stays and is reported, as are
        nvidia-smi command lists and strings built elsewhere in the file.

    Why:
        Ascend's device tool is `npu-smi`; `npu-smi info` lists the NPUs and fails where the driver
        sees none, which is what a presence check asks. Its output is another table, so a parser of
        nvidia-smi output cannot be converted mechanically.

    Example:
        if shutil.which("nvidia-smi"):             ->  if shutil.which("npu-smi"):
            subprocess.run(["nvidia-smi"])          ->      subprocess.run(["npu-smi", "info"])
        subprocess.check_output(["nvidia-smi", "--query-gpu=memory.used", "--format=csv"])  -> reported

    With --keep-cuda:
        if shutil.which("nvidia-smi"):  ->  if (shutil.which("npu-smi") or shutil.which("nvidia-smi")):
        subprocess.run(["nvidia-smi"])
        ->  subprocess.run(["npu-smi", "info"] if shutil.which("npu-smi") else ["nvidia-smi"])
        (the host's own tool; output that is parsed stays reported, as without --keep-cuda)

    Fix safety:
        Safe: only calls whose output nobody reads are rewritten. The table is
        codemods/data/<target>/smi.yaml.
    """

    ID = "nvidia-smi"
    SAFETY = "safe"
    TRIGGERS = ("nvidia-smi",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        program = smi_table(options.target).cuda_program
        return facts.any_string(lambda s: program in s)  # the program is always named by a literal

    def __init__(self, ctx):
        super().__init__(ctx)
        self.table = smi_table(ctx.target)
        self._presence: set[int] = set()  # ids of which()-calls whose result is only tested
        self._handled: set[int] = set()  # ids of string/list literals a call already dealt with
        self._candidates: list[cst.CSTNode] = []  # command literals seen anywhere
        self._skip: set[int] = set()  # ids of the GPU branches of --keep-cuda forms

    # -- where a which() result is only tested -------------------------------------------------
    def _mark(self, expr: Optional[cst.BaseExpression]) -> None:
        if expr is not None:
            self._presence.update(id(c) for c in _presence_calls(expr))

    def visit_If(self, node: cst.If) -> None:
        self._mark(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._mark(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._mark(node.test)
        if self._is_npu_which(node.test):  # --keep-cuda's choice of command: its else is the GPU's
            self._handled.update(id(n) for n in self._literals_of(node.orelse))
            self._skip.update(id(n) for n in self._literals_of(node.orelse))

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        # `which("npu-smi") or which("nvidia-smi")`: --keep-cuda's presence check, left alone in either mode.
        if isinstance(node.operator, cst.Or) and self._is_npu_which(node.left) and isinstance(node.right, cst.Call):
            self._skip.add(id(node.right))
            self._handled.update(id(a.value) for a in node.right.args)

    def _is_npu_which(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and self.ctx.resolve(node.func) in _WHICH and len(node.args) == 1 \
            and _plain_value(node.args[0].value) == self.table.npu_program

    def visit_Assert(self, node: cst.Assert) -> None:
        self._mark(node.test)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._mark(node)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        self._mark(node)

    # -- command literals ---------------------------------------------------------------------
    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = _plain_value(node)
        if value is not None and self._is_command_text(value):
            self._candidates.append(node)

    def _is_command_text(self, value: str) -> bool:
        """`nvidia-smi` alone, or followed by a flag, pipe or redirect: a command, not prose."""
        return re.match(rf"\s*{re.escape(self.table.cuda_program)}(\s*$|\s+-|\s*[|>&;])", value) is not None

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        callee = self.ctx.resolve(original.func)
        if callee is None or not (callee in _RUNS or callee in _SHELL_RUNS or callee in _READS or callee in _WHICH):
            return updated
        index = self._command_index(original)
        if index is None or id(original) in self._skip:
            return updated
        command = original.args[index].value
        if not self._names_program(command) or id(command) in self._skip:
            return updated
        self._handled.update(id(n) for n in self._literals_of(command))
        if callee in _WHICH:
            return self._which(original, updated, index, callee)
        if callee in _READS or self._output_read(original):
            self.report(original, f"{callee} reads {self.table.cuda_program} output; left as is",
                        hint=self.table.parse_hint)
            return updated
        shell = callee in _SHELL_RUNS or self._keyword_true(original, "shell")
        new_command = self._presence_command(command, shell)
        if new_command is None:
            self.report(original, f"{self.table.cuda_program} is run with arguments or in a pipeline; left as is",
                        hint=self.table.parse_hint)
            return updated
        new_args = list(updated.args)
        new_args[index] = new_args[index].with_changes(value=new_command)
        # --keep-cuda: the NPU's command where its tool is installed, else the command as it was.
        either = list(updated.args)
        either[index] = either[index].with_changes(value=cst.IfExp(
            test=self._which_npu(), body=new_command, orelse=updated.args[index].value))
        return self.rewrite(original, updated, updated.with_changes(args=new_args),
                            f"{self.table.cuda_program} -> {' '.join(self.table.npu_command)}",
                            portable=lambda: updated.with_changes(args=either))

    def _which_npu(self) -> cst.Call:
        """`shutil.which("npu-smi")`, with shutil imported where the file lacks it."""
        found = self.ctx.imports.local_for("shutil.which")
        if found is not None and found[1] == "shutil.which":
            func: cst.BaseExpression = cst.Name(found[0])
        elif found is not None and found[1] == "shutil":
            func = cst.Attribute(cst.Name(found[0]), cst.Name("which"))
        else:
            self.ctx.require_import("shutil")
            func = cst.Attribute(cst.Name("shutil"), cst.Name("which"))
        return cst.Call(func, [cst.Arg(cst.SimpleString(f'"{self.table.npu_program}"'))])

    def _command_index(self, call: cst.Call) -> Optional[int]:
        for i, arg in enumerate(call.args):
            if arg.keyword is not None and arg.keyword.value in ("args", "cmd", "command"):
                return i
        if call.args and call.args[0].keyword is None and not call.args[0].star:
            return 0
        return None

    def _literals_of(self, command: cst.BaseExpression) -> list[cst.CSTNode]:
        if isinstance(command, (cst.List, cst.Tuple)):
            return [e.value for e in command.elements]
        return [command]

    def _names_program(self, command: cst.BaseExpression) -> bool:
        if isinstance(command, (cst.List, cst.Tuple)):
            first = command.elements[0].value if command.elements else None
            return first is not None and _plain_value(first) == self.table.cuda_program
        if isinstance(command, cst.FormattedString) and command.parts \
                and isinstance(command.parts[0], cst.FormattedStringText):
            return command.parts[0].value.lstrip().startswith(self.table.cuda_program)
        value = _plain_value(command)
        return value is not None and self._is_command_text(value)

    def _output_read(self, call: cst.Call) -> bool:
        for arg in call.args:
            if arg.keyword is None:
                continue
            name = arg.keyword.value
            if name == "capture_output" and not (isinstance(arg.value, cst.Name) and arg.value.value == "False"):
                return True
            if name == "stdout" and not (isinstance(arg.value, cst.Name) and arg.value.value == "None") \
                    and self.ctx.resolve(arg.value) not in _OUTPUT_DISCARDED:
                return True
        return False

    @staticmethod
    def _keyword_true(call: cst.Call, keyword: str) -> bool:
        return any(a.keyword is not None and a.keyword.value == keyword
                   and not (isinstance(a.value, cst.Name) and a.value.value in ("False", "None"))
                   for a in call.args)

    def _presence_command(self, command: cst.BaseExpression, shell: bool) -> Optional[cst.BaseExpression]:
        """`command` running the NPU tool instead, when it runs nvidia-smi bare; None otherwise."""
        program, npu = self.table.cuda_program, self.table.npu_command
        if isinstance(command, (cst.List, cst.Tuple)):
            if len(command.elements) != 1:
                return None
            first = command.elements[0]
            elements = [cst.Element(_string_like(first.value, word),
                                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                        for word in npu[:-1]]
            elements.append(cst.Element(_string_like(first.value, npu[-1]), comma=first.comma))
            return command.with_changes(elements=elements)
        value = _plain_value(command)
        if value is None or not isinstance(command, cst.SimpleString):
            return None  # an f-string: its arguments are only known at run time
        if not shell:
            if value.strip() != program:
                return None
            return cst.List([cst.Element(_string_like(command, word),
                                         comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                             for word in npu[:-1]] + [cst.Element(_string_like(command, npu[-1]))])
        try:
            words = shlex.split(value)
        except ValueError:
            return None
        if not words or words[0] != program or not all(w in self.table.discard_words for w in words[1:]):
            return None
        start = value.index(program)
        return _string_like(command, value[:start] + " ".join(npu) + value[start + len(program):])

    def _which(self, original: cst.Call, updated: cst.Call, index: int, callee: str):
        command = original.args[index].value
        if id(original) not in self._presence or _plain_value(command) != self.table.cuda_program:
            self.report(original, f"the path {callee} finds for {self.table.cuda_program} is used beyond a "
                                  f"presence check; left as is", hint=self.table.parse_hint)
            return updated
        new_args = list(updated.args)
        new_args[index] = new_args[index].with_changes(value=_string_like(command, self.table.npu_program))
        npu_call = updated.with_changes(args=new_args, lpar=[], rpar=[])
        return self.rewrite(original, updated, updated.with_changes(args=new_args),
                            f"{callee}({self.table.cuda_program!r}) -> {callee}({self.table.npu_program!r})",
                            portable=lambda: cst.BooleanOperation(  # either tool: the host's driver
                                npu_call, cst.Or(), updated.with_changes(lpar=[], rpar=[]),
                                lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        for node in self._candidates:
            if id(node) not in self._handled:
                self.report(node, f"a {self.table.cuda_program} command built here; it is not converted",
                            hint=self.table.parse_hint)
        return updated

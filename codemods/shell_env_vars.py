"""shell-env-vars: CUDA/NCCL environment variable names in shell launchers."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Optional, cast

from npu_port.codemods._env_table import EnvVarRow, EnvVarTable, env_triggers
from npu_port.transpiler.text.shell import ASSIGNMENT_RE, NAME_RE, Command, Param, Script, ShellRule, Word

Span = tuple[int, int, str]  # (start, end, text): a device-agnostic form (--keep-cuda) of a change


def env_lookup(options, name: str, value: Optional[str] = None) -> Optional[EnvVarRow]:
    return EnvVarTable.for_options(options, with_shell=True).lookup(name, value)


_DECLARERS = ("export", "declare", "typeset", "readonly", "local", "unset")
_CONTAINER_ENGINES = ("docker", "podman", "nerdctl")


def assignment_words(cmd: Command) -> list[Word]:
    """The words of `cmd` that set (or unset) a variable: `A=1 cmd`, `env A=1 cmd`, `export A=1 B`."""
    return [w for w, _ in assignment_words_with_option(cmd)]


def assignment_words_with_option(cmd: Command) -> list[tuple[Word, Optional[Word]]]:
    """assignment_words, each with the option word that passes it (`-e` of `docker run -e A=1`) or None."""
    words: list[tuple[Word, Optional[Word]]] = [(w, None) for w in list(cmd.assignments) + cmd.argv()[1]]
    if cmd.program() in _DECLARERS:
        words += [(w, None) for w in cmd.args() if ASSIGNMENT_RE.match(w.text) or NAME_RE.fullmatch(w.text)]
    elif cmd.program() in _CONTAINER_ENGINES:  # `docker run -e A=1 --env B ...`: the workload's environment
        args = cmd.args()
        words += [(args[k + 1], w) for k, w in enumerate(args[:-1]) if w.value in ("-e", "--env")
                  and (ASSIGNMENT_RE.match(args[k + 1].text) or NAME_RE.fullmatch(args[k + 1].text))]
    return words


def name_value(word: Word) -> tuple[str, Optional[str]]:
    """The name an assignment word (`A=1`, `export A`) sets and its value (None: no `=`)."""
    m = cast(re.Match[str], ASSIGNMENT_RE.match(word.text) or NAME_RE.match(word.text))  # such words
    name = m.group(1) if m.groups() else m.group(0)
    value = word.text[m.end():] if m.groups() else None
    if word.value is not None and m.groups():
        value = word.value[word.value.index("=") + 1:]
    return name, value


def _word_name(word: Word) -> str:
    m = ASSIGNMENT_RE.match(word.text) or NAME_RE.match(word.text)
    return (m.group(1) if m.groups() else m.group(0)) if m else ""


# vLLM's sleep mode asked for by a launcher (ms-swift's `--sleep_level 1`, vLLM's `--enable-sleep-mode`, an
# `enable_sleep_mode=True` override): on Ascend it runs on vllm-ascend's CaMemAllocator, which asserts that
# PYTORCH_NPU_ALLOC_CONF does not hold `expandable_segments:True` (vllm_ascend/device_allocator/camem.py; its
# platform leaves the setting out in sleep mode). The CUDA allocator has no such limit.
SLEEP_MODE = re.compile(r"""--sleep[_-]level[= \t]+["']?[1-9]|\benable_sleep_mode[= \t:"']+(?:True|true|1)\b"""
                         r"|--enable-sleep-mode\b")
EXPANDABLE_SEGMENTS = "expandable_segments:True"


class ShellEnvVars(ShellRule):
    """Renames CUDA/NCCL environment variables in shell launchers to the names Ascend reads.

    What it does:
        In assignments (`export A=...`, `A=... cmd`, `env A=... cmd`, `unset A`, `docker run -e A=...`) and in references
        (`$A`, `${A:-x}`, also inside double quotes, `$(...)`, `bash -c` strings and here-documents
        whose shell expands them), renames `CUDA_VISIBLE_DEVICES` -> `ASCEND_RT_VISIBLE_DEVICES`,
        `PYTORCH_CUDA_ALLOC_CONF` -> `PYTORCH_NPU_ALLOC_CONF`, `NCCL_SOCKET_IFNAME` ->
        `HCCL_SOCKET_IFNAME`, from the target's env_vars table; a variable the table renames for some
        values only (`NCCL_ASYNC_ERROR_HANDLING=1` -> `HCCL_ASYNC_ERROR_HANDLING=1`, not `=3`) is renamed,
        with its reads, where every setting of it in the script has such a value. Variables without an Ascend
        counterpart (`NCCL_IB_*`, `NCCL_P2P_DISABLE`, `VLLM_ATTENTION_BACKEND=FLASH_ATTN`) are reported
        where they are set and left in place. A script written for both platforms keeps its CUDA names: one
        set where the script sets the Ascend name too, one read where it reads the Ascend name too (info).
        `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` in a launcher that turns vLLM's sleep mode on
        (`--sleep_level 1`, `--enable-sleep-mode`, `enable_sleep_mode=True`) is left, with a warning:
        vllm-ascend's sleep-mode allocator refuses that setting under the NPU's name.

    Why:
        torch_npu, HCCL and Ray read the Ascend names; a launcher that sets only the CUDA names
        silently runs on every NPU or with default allocator and network settings.
        `NCCL_DEBUG` stays (VERL and MindSpeed-RL still set it on NPU).

    Example:
        export CUDA_VISIBLE_DEVICES=0,1,2,3     ->  export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3
        echo "$CUDA_VISIBLE_DEVICES"            ->  echo "$ASCEND_RT_VISIBLE_DEVICES"

    With --keep-cuda:
        export CUDA_VISIBLE_DEVICES=0,1   ->  export CUDA_VISIBLE_DEVICES=0,1 ASCEND_RT_VISIBLE_DEVICES=0,1
        CUDA_VISIBLE_DEVICES=0 python x.py  ->  CUDA_VISIBLE_DEVICES=0 ASCEND_RT_VISIBLE_DEVICES=0 python x.py
        unset CUDA_VISIBLE_DEVICES        ->  unset CUDA_VISIBLE_DEVICES ASCEND_RT_VISIBLE_DEVICES
        echo "$CUDA_VISIBLE_DEVICES"      ->  echo "${ASCEND_RT_VISIBLE_DEVICES:-$CUDA_VISIBLE_DEVICES}"
        ${CUDA_VISIBLE_DEVICES:-0,1}      ->  ${ASCEND_RT_VISIBLE_DEVICES:-${CUDA_VISIBLE_DEVICES:-0,1}}
        (every setting sets both names, with the same value text, and a read takes the Ascend name where it
        is set. Kept for CUDA, with a warning: a value with a command substitution (it would run twice),
        `+=`, and a read with an operator of its own (`${#...}`, `${CUDA_VISIBLE_DEVICES/,/ }`) or one that
        another shell expands (`bash -c '...'`, a here-document). A command that sets both names already
        is left alone in either mode.)

    Fix safety:
        Safe: a rename of names only; values, quoting and comments are kept.
    """

    ID = "shell-env-vars"
    SAFETY = "safe"
    TRIGGERS = env_triggers(with_shell=True)
    _settled: dict[str, Optional[EnvVarRow]] = {}  # _value_renames of the script being read

    def check(self, script: Script) -> None:
        self._settled = self._value_renames(script)
        # Names the script sets, and names it reads: one written for both platforms sets (or reports) the
        # Ascend name beside the CUDA one, which then stays.
        self._set_names = {_word_name(w) for cmd in script.commands for w, _ in assignment_words_with_option(cmd)}
        self._read_names = {p.name for p in script.params}
        for cmd in script.commands:
            words = assignment_words_with_option(cmd)
            names = {_word_name(w) for w, _ in words}
            for word, option in words:
                name, value = name_value(word)
                row = self._row(name, value)
                if row is not None and row.status == "rename" and row.npu in names:
                    continue  # sets both names: the device-agnostic form (--keep-cuda) of this setting
                self._name(cmd, name, word.start, value, assignment=True,
                           portable=partial(_both, word, option))
        for param in script.params:
            self._name(None, param.name, param.start, None, assignment=False,
                       portable=partial(self._either, script, param))

    def _value_renames(self, script: Script) -> dict[str, Optional[EnvVarRow]]:
        """Each variable the table renames for some values only (NCCL_ASYNC_ERROR_HANDLING=0|1), set in this
        script: the rename row when every setting of it here takes one, else None. One decision a script,
        so that its reads (`$NCCL_ASYNC_ERROR_HANDLING`) follow its settings."""
        table = EnvVarTable.for_options(self.ctx.options, with_shell=True)
        rows: dict[str, set[Optional[EnvVarRow]]] = {}
        for cmd in script.commands:
            for word, _ in assignment_words_with_option(cmd):
                name, value = name_value(word)
                if table.renamed_for_values(name):
                    rows.setdefault(name, set()).add(table.lookup(name, value))
        settled: dict[str, Optional[EnvVarRow]] = {}
        for name, found in rows.items():
            row = next(iter(found)) if len(found) == 1 else None
            settled[name] = row if row is not None and row.status == "rename" else None
        return settled

    def _row(self, name: str, value: Optional[str]) -> Optional[EnvVarRow]:
        if name in self._settled:  # renamed here for its values, reads included, or not at all
            return self._settled[name] or env_lookup(self.ctx.options, name, None)
        return env_lookup(self.ctx.options, name, value)

    def _name(self, cmd: Optional[Command], name: str, start: int, value: Optional[str], *, assignment: bool,
              portable: Callable[[str], Optional[Span]]) -> None:
        row = self._row(name, value)
        if row is None or row.status == "keep":
            return
        if row.status == "rename" and row.npu:
            if not assignment and self.parsed.text.endswith(("${" + row.npu + ":-$", "${" + row.npu + ":-${"), 0, start):
                return  # the default of a read of the Ascend name: the --keep-cuda form of this read
            npu = row.npu
            if assignment and value and EXPANDABLE_SEGMENTS in value and npu == "PYTORCH_NPU_ALLOC_CONF" \
                    and SLEEP_MODE.search(self.parsed.text):
                self.report(start, f"{name}={value} left as is: this launcher turns vLLM's sleep mode on, and on "
                                   f"Ascend that mode's allocator refuses {EXPANDABLE_SEGMENTS} in {npu} (vllm-ascend "
                                   "asserts it); the CUDA name is ignored there", severity="warning",
                            hint=f"set {npu} without expandable_segments, or drop the setting, for sleep-mode runs")
                return
            if npu in (self._set_names if assignment else self._read_names):
                self.report(start, f"{name} left as is: the script {'sets' if assignment else 'reads'} {npu} too "
                                   "(written for both platforms)", severity="info")
                return
            scope = (cmd.start, cmd.end) if cmd else None
            end = start + len(name)
            if self.ctx.options.keep_cuda and (form := portable(npu)) is not None:
                start, end, text = form
                self.change(start, end, text, f"{name} -> {npu}", quote=cmd.quote if cmd else None, scope=scope,
                            portable=lambda: text)
                return
            self.change(start, end, npu, f"{name} -> {npu}", quote=cmd.quote if cmd else None, scope=scope,
                        portable=lambda: None)
        elif assignment:
            shown = f"{name}={value}" if row.values and value else name
            self.report(start, row.left(shown), hint=row.hint)

    def _either(self, script: Script, param: Param, npu: str) -> Optional[Span]:
        """`$CUDA_X` / `${CUDA_X}` -> `${NPU_X:-$CUDA_X}`: (start, end, text), or None."""
        text = script.text
        if text.startswith("${", param.start - 2) and text.startswith("}", param.end):
            start, end = param.start - 2, param.end + 1
        elif text.startswith("$", param.start - 1) and not text.startswith("${", param.start - 1):
            start, end = param.start - 1, param.end
        elif text.startswith("${", param.start - 2) and text.startswith((":-", "-"), param.end) \
                and (close := _default_end(text, param.end)) is not None:
            start, end = param.start - 2, close  # `${CUDA_X:-0,1}` -> `${NPU_X:-${CUDA_X:-0,1}}`
        else:
            return None  # `${#CUDA_X}`, `${CUDA_X/,/ }`, `$((CUDA_X))`: an operator of its own
        cmd = _innermost(script, param.start)
        if cmd is None or cmd.context not in ("top", "substitution") or cmd.quote is not None:
            return None
        inner = text[start:end] if end - start > len(param.name) + 3 else "$" + param.name
        return start, end, "${" + npu + ":-" + inner + "}"


def _both(word: Word, option: Optional[Word], npu: str) -> Optional[Span]:
    """`CUDA_X=v` -> `CUDA_X=v NPU_X=v` (with `-e` again for a container engine's option): (start, end, text),
    or None where the value would not read the same twice."""
    name = _word_name(word)
    rest = word.text[len(name):]
    if rest.startswith("+=") or word.array_items or "$(" in rest or "`" in rest:
        return None
    again = npu + rest
    if option is not None:
        again = f"{option.text} {again}"
    return word.start, word.end, f"{word.text} {again}"


def _innermost(script: Script, offset: int) -> Optional[Command]:
    """The command whose text holds `offset` (the innermost, for a substitution inside a command)."""
    holding = [c for c in script.commands if c.start <= offset < c.end]
    return min(holding, key=lambda c: c.end - c.start) if holding else None


def _default_end(text: str, at: int) -> Optional[int]:
    """The end of `${NAME:-word}` whose operator starts at `at`; None where the word has quotes, command
    substitutions or nested braces (read by hand)."""
    close = text.find("}", at)
    if close < 0:
        return None
    word = text[at:close]
    if any(c in word for c in "'\"`{\\\n") or "$(" in word:
        return None
    return close + 1

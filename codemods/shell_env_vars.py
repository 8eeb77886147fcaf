"""shell-env-vars: CUDA/NCCL environment variable names in shell launchers."""

from __future__ import annotations

from typing import Optional

from npu_port.codemods._env_table import EnvVarRow, EnvVarTable, env_triggers
from npu_port.transpiler.text.shell import ASSIGNMENT_RE, NAME_RE, Command, Script, ShellRule, Word


def env_lookup(options, name: str, value: Optional[str] = None) -> Optional[EnvVarRow]:
    return EnvVarTable.for_options(options, with_shell=True).lookup(name, value)


_DECLARERS = ("export", "declare", "typeset", "readonly", "local", "unset")
_CONTAINER_ENGINES = ("docker", "podman", "nerdctl")


def assignment_words(cmd: Command) -> list[Word]:
    """The words of `cmd` that set (or unset) a variable: `A=1 cmd`, `env A=1 cmd`, `export A=1 B`."""
    words = list(cmd.assignments) + cmd.argv()[1]
    if cmd.program() in _DECLARERS:
        words += [w for w in cmd.args() if ASSIGNMENT_RE.match(w.text) or NAME_RE.fullmatch(w.text)]
    elif cmd.program() in _CONTAINER_ENGINES:  # `docker run -e A=1 --env B ...`: the workload's environment
        args = cmd.args()
        words += [args[k + 1] for k, w in enumerate(args[:-1]) if w.value in ("-e", "--env")
                  and (ASSIGNMENT_RE.match(args[k + 1].text) or NAME_RE.fullmatch(args[k + 1].text))]
    return words


class ShellEnvVars(ShellRule):
    """Renames CUDA/NCCL environment variables in shell launchers to the names Ascend reads.

    What it does:
        In assignments (`export A=...`, `A=... cmd`, `env A=... cmd`, `unset A`, `docker run -e A=...`) and in references
        (`$A`, `${A:-x}`, also inside double quotes, `$(...)`, `bash -c` strings and here-documents
        whose shell expands them), renames `CUDA_VISIBLE_DEVICES` -> `ASCEND_RT_VISIBLE_DEVICES`,
        `PYTORCH_CUDA_ALLOC_CONF` -> `PYTORCH_NPU_ALLOC_CONF`, `NCCL_SOCKET_IFNAME` ->
        `HCCL_SOCKET_IFNAME`, from the target's env_vars table. Variables without an Ascend
        counterpart (`NCCL_IB_*`, `NCCL_P2P_DISABLE`, `VLLM_ATTENTION_BACKEND=FLASH_ATTN`) are reported
        where they are set and left in place.

    Why:
        torch_npu, HCCL and Ray read the Ascend names; a launcher that sets only the CUDA names
        silently runs on every NPU or with default allocator and network settings.
        `NCCL_DEBUG` stays (VERL and MindSpeed-RL still set it on NPU).

    Example:
        export CUDA_VISIBLE_DEVICES=0,1,2,3     ->  export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3
        echo "$CUDA_VISIBLE_DEVICES"            ->  echo "$ASCEND_RT_VISIBLE_DEVICES"

    Fix safety:
        Safe: a rename of names only; values, quoting and comments are kept.
    """

    ID = "shell-env-vars"
    SAFETY = "safe"
    TRIGGERS = env_triggers(with_shell=True)

    def check(self, script: Script) -> None:
        for cmd in script.commands:
            for word in assignment_words(cmd):
                m = ASSIGNMENT_RE.match(word.text) or NAME_RE.match(word.text)
                name = m.group(1) if m.groups() else m.group(0)
                value = word.text[m.end():] if m.groups() else None
                if word.value is not None and m.groups():
                    value = word.value[word.value.index("=") + 1:]
                self._name(cmd, name, word.start, value, assignment=True)
        for param in script.params:
            self._name(None, param.name, param.start, None, assignment=False, quote=param.quote)

    def _name(self, cmd: Optional[Command], name: str, start: int, value: Optional[str], *, assignment: bool,
              quote: Optional[str] = None) -> None:
        row = env_lookup(self.ctx.options, name, value)
        if row is None or row.status == "keep":
            return
        if row.status == "rename" and row.npu:
            scope = (cmd.start, cmd.end) if cmd else None
            self.change(start, start + len(name), row.npu, f"{name} -> {row.npu}",
                        quote=cmd.quote if cmd else None, scope=scope)
        elif assignment:
            shown = f"{name}={value}" if row.values and value else name
            self.report(start, f"{shown} has no Ascend equivalent; left as is", hint=row.hint)

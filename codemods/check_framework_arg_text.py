"""`unknown-framework-arg-sh` / `-yaml`: invented framework names in launchers and configs."""

from __future__ import annotations

from npu_port.transpiler.core.rules import TextRule
from npu_port.transpiler.tables.framework_facts import INVENTED_NAMES, code_part, invented_names_in
from npu_port.transpiler.text.shell import TEXT_COMMANDS, Script, ShellRule, nested_code_word


class _InventedNames(TextRule):
    """Line by line, outside comments: YAML, where every value is data a framework reads."""

    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu_memory_utilization", "npu-memory-utilization", "n_npus_per_node", "n-npus-per-node")

    def apply(self, text: str) -> str:
        if not self.matches(text):  # the file got here by another rule's trigger: none of its names is there
            return text
        for lineno, line in enumerate(text.splitlines(), start=1):
            for offset, name in invented_names_in(code_part(line)):
                real = INVENTED_NAMES[name][0]
                self.ctx.add(self.ID, lineno, offset + 1, _message(name), severity="error", hint=f"use `{real}`",
                             fix=f"use `{real}`")
        return text


def _message(name: str) -> str:
    return f"`{name}` does not exist: {INVENTED_NAMES[name][1]}"


class UnknownFrameworkArgShell(ShellRule):
    """Reports invented NPU framework flags and overrides in shell launchers.

    What it does:
        Flags `npu_memory_utilization` / `--npu-memory-utilization` and `n_npus_per_node` in
        shell scripts (Hydra overrides such as `trainer.n_npus_per_node=8`, `vllm serve` flags,
        variables and bash arrays of arguments). It reads the script with the shell lexer the
        convert rules use: the commands inside `bash -c '...'`, `ssh host "..."` and here-documents
        fed to a shell are checked; comments, `echo` / `printf` text and here-documents that are
        only text (`cat <<EOF` to the terminal or to a file) are not.

    Why:
        vLLM and VERL keep `gpu_memory_utilization` and `n_gpus_per_node` on Ascend; an invented
        override makes Hydra stop with "Could not override" or vLLM with "unrecognized arguments".

    Example:
            vllm serve $MODEL --npu-memory-utilization 0.9     # error
        should read:
            vllm serve $MODEL --gpu-memory-utilization 0.9

    Fix safety:
        Report-only; the finding names the real flag.
    """

    ID = "unknown-framework-arg-sh"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = _InventedNames.TRIGGERS

    def check(self, script: Script) -> None:
        seen: set[int] = set()
        for cmd in script.commands:
            # The string another shell runs (`bash -c '...'`, `ssh host "..."`) is looked at as the commands
            # the lexer found in it, so that an `echo` in there stays text.
            nested = nested_code_word(cmd)
            if nested is not None and not any(c.context == "bash-c" and nested.start <= c.start < nested.end
                                              for c in script.commands):
                nested = None  # a string the lexer could not read as code: looked at as a word
            words = [] if cmd.program() in TEXT_COMMANDS else [w for w in cmd.words if w is not nested]
            words += [w for a in cmd.assignments for w in (a.array_items or [a])]
            for word in words:
                for offset, name in invented_names_in(script.text[word.start:word.end]):
                    at = word.start + offset
                    if at in seen:
                        continue
                    seen.add(at)
                    real = INVENTED_NAMES[name][0]
                    line, col = self.positions.line_col(at)
                    self.ctx.add(self.ID, line, col, _message(name), severity="error", hint=f"use `{real}`",
                                 fix=f"use `{real}`")


class UnknownFrameworkArgYaml(_InventedNames):
    """Reports invented NPU framework keys in YAML configs.

    What it does:
        Flags `npu_memory_utilization` and `n_npus_per_node` keys or values in YAML files, outside
        comments.

    Why:
        VERL's and MindSpeed-RL's config schemas keep `gpu_memory_utilization` and `n_gpus_per_node`
        on Ascend; an invented key is rejected by Hydra's struct mode or silently ignored.

    Example:
            trainer:
              n_npus_per_node: 8       # error
        should read:
            trainer:
              n_gpus_per_node: 8

    Fix safety:
        Report-only; the finding names the real key.
    """

    ID = "unknown-framework-arg-yaml"
    LANGUAGE = "yaml"

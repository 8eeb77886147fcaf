"""`unknown-framework-arg-sh` / `-yaml`: invented framework names in launchers and configs."""

from __future__ import annotations

from npu_port.transpiler.core.rules import TextRule
from npu_port.transpiler.tables.framework_facts import INVENTED_NAMES, code_part, invented_names_in


class _InventedNames(TextRule):
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu_memory_utilization", "npu-memory-utilization", "n_npus_per_node", "n-npus-per-node")

    # Lines that only print text (shell `echo`/`printf`): a message may name the wrong key on purpose.
    MESSAGE_COMMANDS: tuple[str, ...] = ()

    def apply(self, text: str) -> str:
        for lineno, line in enumerate(text.splitlines(), start=1):
            code = code_part(line)
            if self.MESSAGE_COMMANDS and code.lstrip().split(" ", 1)[0] in self.MESSAGE_COMMANDS:
                continue
            for offset, name in invented_names_in(code):
                real, why = INVENTED_NAMES[name]
                self.ctx.add(self.ID, lineno, offset + 1, f"`{name}` does not exist: {why}", severity="error",
                             hint=f"use `{real}`", fix=f"use `{real}`")
        return text


class UnknownFrameworkArgShell(_InventedNames):
    """Reports invented NPU framework flags and overrides in shell launchers.

    What it does:
        Flags `npu_memory_utilization` / `--npu-memory-utilization` and `n_npus_per_node` in
        shell scripts (Hydra overrides such as `trainer.n_npus_per_node=8`, `vllm serve` flags),
        outside comments and `echo` / `printf` messages.

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
    LANGUAGE = "shell"
    MESSAGE_COMMANDS = ("echo", "printf")


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

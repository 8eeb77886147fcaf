"""shell-hydra-device: `trainer.device=cuda` Hydra overrides in launchers."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Optional

from npu_port.transpiler.core.rules import CUDA_WORD
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import TEXT_COMMANDS, Command, Script, ShellRule, Word, probed_value, token_span


class ShellHydraDevice(ShellRule):
    """Rewrites the Hydra override `trainer.device=cuda` to `trainer.device=npu`.

    What it does:
        In any command's arguments except `echo`/`printf` text (and in bash arrays of arguments), an override of a device key
        from the target's shell table (`trainer.device`, also `+trainer.device`, `++trainer.device`,
        quoted or not) whose value is `cuda` gets the value `npu`. The other VERL keys that name
        GPUs keep their names on NPU and are not touched: `trainer.n_gpus_per_node`, `*_per_gpu`,
        `rollout.gpu_memory_utilization`, `rollout.name=vllm`, and `VLLM_USE_V1`.

    Why:
        VERL's `trainer.device` selects the torch device of its workers. Since late 2025 VERL sets
        it to `npu` itself when torch_npu is importable, but explicit `cuda` in a launcher still
        wins on older releases and reads wrong on Ascend.

    Example:
        python3 -m verl.trainer.main_ppo trainer.device=cuda trainer.n_gpus_per_node=8
        ->  python3 -m verl.trainer.main_ppo trainer.device=npu trainer.n_gpus_per_node=8

    With --keep-cuda:
        python3 -m verl.trainer.main_ppo trainer.device=cuda
        ->  export DEVICE=$(command -v npu-smi >/dev/null 2>&1 && echo npu || echo cuda)  (once, near the top)
            python3 -m verl.trainer.main_ppo trainer.device=$DEVICE
        (the launcher's device probe; a YAML config converted with --keep-cuda reads the same variable,
        `${oc.env:DEVICE,cuda}`; in a command another shell runs it is kept for CUDA, with a warning)

    Fix safety:
        Safe: only the value `cuda` of the named key changes.
    """

    ID = "shell-hydra-device"
    SAFETY = "safe"
    TRIGGERS = ()
    TRIGGER_PATTERNS = (CUDA_WORD,)

    def check(self, script: Script) -> None:
        keys = load_table(self.ctx.target, "shell")["hydra_device_keys"]
        pattern = re.compile(r"\+{0,2}(" + "|".join(re.escape(k) for k in keys) + ")=cuda")
        for cmd in script.commands:
            words = [] if cmd.program() in TEXT_COMMANDS else list(cmd.words)
            words += [item for w in cmd.assignments for item in w.array_items]
            for word in words:
                m = pattern.fullmatch(word.value or "")
                if not m:
                    continue
                span = token_span(script, word.start, word.end, "cuda")
                if span:
                    self.change(*span, "npu", f"{m.group(1)}=cuda -> {m.group(1)}=npu", quote=cmd.quote,
                                scope=(cmd.start, cmd.end),
                                portable=self._portable(cmd, word, span[0]))

    def _portable(self, cmd: Command, word: Word, at: int) -> Callable[[], Optional[str]]:
        return lambda: probed_value(self, cmd, word, at, quoted=False)

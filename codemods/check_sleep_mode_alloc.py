"""`sleep-mode-expandable-segments`: a launcher that sets expandable segments for the NPU and runs vLLM in sleep mode."""

from __future__ import annotations

from npu_port.codemods.shell_env_vars import EXPANDABLE_SEGMENTS, SLEEP_MODE, assignment_words, name_value
from npu_port.transpiler.text.shell import Script, ShellRule

_NPU_ALLOC_CONF = "PYTORCH_NPU_ALLOC_CONF"


class SleepModeExpandableSegments(ShellRule):
    """Reports `PYTORCH_NPU_ALLOC_CONF=expandable_segments:True` in a launcher that turns vLLM's sleep mode on.

    What it does:
        In a shell script that asks for vLLM's sleep mode (`--sleep_level 1` or 2, `--enable-sleep-mode`,
        `enable_sleep_mode=True`: shell-env-vars' reading), each setting of `PYTORCH_NPU_ALLOC_CONF` whose value
        holds `expandable_segments:True` is reported (warning).

    Why:
        In sleep mode vllm-ascend allocates the engine's memory through its CaMemAllocator, which asserts that
        `PYTORCH_NPU_ALLOC_CONF` does not hold `expandable_segments:True` (vllm_ascend/device_allocator/camem.py;
        its platform leaves the setting out in sleep mode). The CUDA allocator has no such limit, so a port
        that renamed `PYTORCH_CUDA_ALLOC_CONF` in a colocated GRPO launcher stops at engine start. (vllm-ascend's
        RL config strips the setting itself; a launcher cannot count on it being used.) convert leaves such a
        setting with the CUDA name and says why.

    Example:
        PYTORCH_NPU_ALLOC_CONF='expandable_segments:True' \\       # warning
        megatron rlhf --rlhf_type grpo --vllm_mode colocate --sleep_level 1

    Fix safety:
        Report-only: drop `expandable_segments:True` from the NPU setting for sleep-mode runs.
    """

    ID = "sleep-mode-expandable-segments"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = (_NPU_ALLOC_CONF,)

    def check(self, script: Script) -> None:
        mode = SLEEP_MODE.search(self.ctx.text)
        if mode is None:
            return
        line = self.ctx.text.count("\n", 0, mode.start()) + 1
        for cmd in script.commands:
            for word in assignment_words(cmd):
                name, value = name_value(word)
                if name == _NPU_ALLOC_CONF and value and EXPANDABLE_SEGMENTS in value:
                    self.report(word.start, f"{name}={value} in a launcher that turns vLLM's sleep mode on (line "
                                            f"{line}: {mode.group()}): vllm-ascend's sleep-mode allocator asserts "
                                            f"that {name} holds no {EXPANDABLE_SEGMENTS}, so the engine does not start",
                                severity="warning", hint=f"leave {EXPANDABLE_SEGMENTS} out of {name} for sleep-mode runs")

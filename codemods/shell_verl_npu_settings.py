"""shell-verl-npu-settings (extras): the VERL settings an Ascend run needs that a GPU launcher lacks."""

from __future__ import annotations

from npu_port.codemods import _verl_overrides
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import Script, ShellRule, python_launch


class ShellVerlNpuSettings(ShellRule):
    """Appends the VERL overrides Ascend runs need to VERL trainer commands that do not set them.

    What it does:
        For `python -m verl.trainer.main_ppo ...`, adds each override of the framework-settings table
        (codemods/data/ascend/framework_settings.yaml) that names this rule, where the command does
        not set the key (any value counts: an explicit choice stays), the command's rollout engine
        (`actor_rollout_ref.rollout.name`) and strategy are the row's, and the VERL release the
        project targets is in the row's range (`verl_version` in [tool.npu-port], else the newest
        release snapshotted; every range is checked against the key snapshots):
        `actor_rollout_ref.rollout.enable_chunked_prefill=False` with the vllm rollout, and
        `trainer.device=npu` for VERL 0.6, which defaults to cuda. A rollout name given as `$VAR`
        decides nothing, so rows for one engine are not added there. The overrides go after the last
        argument, or before a trailing `$@` so the caller's overrides still win. What the table
        leaves out on purpose (enforce_eager, cudagraph_mode, VLLM_USE_V1, USE_OPTIMIZED_MODEL,
        TASK_QUEUE_ENABLE) it says why, with the upstream source.

    Why:
        verl's Ascend quick start (docs/ascend_tutorial/ascend_quick_start.rst) and 14 of the 19
        NPU launchers that set it run vLLM-Ascend without chunked prefill. VERL 0.6 has no
        auto_set_device: without `trainer.device=npu` it places the workers on cuda; from 0.7.0
        main_ppo picks npu itself, so newer launchers do not get the override.

    Example:
        python3 -m verl.trainer.main_ppo \\                 python3 -m verl.trainer.main_ppo \\
            actor_rollout_ref.rollout.name=vllm \\   ->        actor_rollout_ref.rollout.name=vllm \\
            trainer.total_epochs=15 $@                        trainer.total_epochs=15 \\
                                                              actor_rollout_ref.rollout.enable_chunked_prefill=False $@

    Fix safety:
        Safe: chunked prefill changes how prompts are batched, not what is generated; the device
        value is what VERL itself picks from 0.7.0 on.
    """

    ID = "shell-verl-npu-settings"
    SAFETY = "safe"
    GROUP = "extras"
    TRIGGERS = ("verl.trainer",)

    def check(self, script: Script) -> None:
        entrypoints = load_table(self.ctx.target, "shell")["verl_entrypoints"]
        for cmd in script.commands:
            launch = python_launch(cmd)
            if not (launch and launch.is_module and launch.target in entrypoints):
                continue
            missing = _verl_overrides.applicable(self.ID, self.ctx.target, launch, self.ctx.options)
            if missing:
                _verl_overrides.append(self, script, cmd, launch, missing)

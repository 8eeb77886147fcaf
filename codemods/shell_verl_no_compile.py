"""shell-verl-no-compile (extras): turn off torch.compile for VERL's actor and reference model."""

from __future__ import annotations

from npu_port.codemods import _verl_overrides
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import Script, ShellRule, python_launch


class ShellVerlNoCompile(ShellRule):
    """Appends `actor_rollout_ref.actor.use_torch_compile=False` to VERL trainer commands.

    What it does:
        For `python -m verl.trainer.main_ppo ...`, adds each override of the framework-settings table
        (codemods/data/ascend/framework_settings.yaml) that names this rule and that the command does
        not set yet (any value counts, so an explicit `=True` stays), where the VERL release the project
        targets has the key (`verl_version` in [tool.npu-port], else the newest release snapshotted).
        The overrides go after the last argument, or before a trailing `$@` so the caller's overrides
        still win, in the layout of the command (one per line after `\\` continuations when the
        command is written that way). The reference model's `ref.use_torch_compile` is not added: its
        default is the actor's value (`${oc.select:actor_rollout_ref.actor.use_torch_compile,true}`);
        a launcher that sets it keeps it.

    Why:
        VERL's NPU launchers disable torch.compile for the actor (run_qwen3-8b_npu.sh vs
        run_qwen3-8b.sh; 17 of verl's 24 NPU launchers); compiling it is not supported on every CANN
        release.

    Example:
        python3 -m verl.trainer.main_ppo \\         python3 -m verl.trainer.main_ppo \\
            trainer.total_epochs=15 $@        ->        trainer.total_epochs=15 \\
                                                       actor_rollout_ref.actor.use_torch_compile=False $@

    Fix safety:
        Safe: a performance switch; training results are the same.
    """

    ID = "shell-verl-no-compile"
    SAFETY = "safe"
    GROUP = "extras"
    TRIGGERS = ("verl.trainer",)

    def check(self, script: Script) -> None:
        table = load_table(self.ctx.target, "shell")
        for cmd in script.commands:
            launch = python_launch(cmd)
            if not (launch and launch.is_module and launch.target in table["verl_entrypoints"]):
                continue
            missing = _verl_overrides.applicable(self.ID, self.ctx.target, launch, self.ctx.options)
            if missing:
                _verl_overrides.append(self, script, cmd, launch, missing)

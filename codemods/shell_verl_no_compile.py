"""shell-verl-no-compile (extras): turn off torch.compile for VERL's actor and reference model."""

from __future__ import annotations

import re

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import Script, ShellRule, python_launch

_USER_ARGS = re.compile(r'"?\$[@*]"?|"?\$\{[@*]\}"?')


class ShellVerlNoCompile(ShellRule):
    """Appends `actor_rollout_ref.actor.use_torch_compile=False` and `...ref.use_torch_compile=False`
    to VERL trainer commands.

    What it does:
        For `python -m verl.trainer.main_ppo ...`, adds each override of the target's shell table
        whose key the command does not set yet (any value counts, so an explicit `=True` stays).
        The overrides go after the last argument, or before a trailing `$@` so the caller's
        overrides still win, in the layout of the command (one per line after `\\` continuations
        when the command is written that way).

    Why:
        VERL's NPU launchers disable torch.compile for the actor and the reference model
        (run_qwen3-8b_npu.sh vs run_qwen3-8b.sh); compiling them is not supported on every CANN
        release.

    Example:
        python3 -m verl.trainer.main_ppo \\         python3 -m verl.trainer.main_ppo \\
            trainer.total_epochs=15 $@        ->        trainer.total_epochs=15 \\
                                                       actor_rollout_ref.actor.use_torch_compile=False \\
                                                       actor_rollout_ref.ref.use_torch_compile=False $@

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
            present = {re.sub(r"^\+*", "", (w.value or w.text).split("=", 1)[0]) for w in launch.args}
            missing = [o for o in table["verl_no_compile"] if o.split("=", 1)[0] not in present]
            if missing:
                self._append(script, cmd, launch, missing)

    def _append(self, script: Script, cmd, launch, overrides: list[str]) -> None:
        words = [launch.target_word] + launch.args
        text = script.text
        tail = words[-1]
        before_user_args = len(words) > 1 and _USER_ARGS.fullmatch(tail.text)
        anchor = words[-2] if before_user_args else tail
        # The separator between the last two arguments tells the layout: ` ` or ` \<newline>    `.
        if len(words) >= 2:
            a, b = (words[-3], words[-2]) if before_user_args and len(words) >= 3 else (words[-2], words[-1])
            sep = text[a.end:b.start]
        else:
            sep = " "
        if "\n" not in sep:
            sep = " "
        added = "".join(sep + o for o in overrides)
        message = "added " + ", ".join(overrides)
        self.change(anchor.end, anchor.end, added, message, quote=cmd.quote, scope=(cmd.start, cmd.end))

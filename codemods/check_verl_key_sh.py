"""`unknown-verl-key-sh`: Hydra overrides in launchers that VERL's packaged config does not have."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Optional

from npu_port.transpiler.analysis.project_modules import in_checkout_of
from npu_port.transpiler.tables import verl_keys
from npu_port.transpiler.text.shell import TEXT_COMMANDS, Command, Script, ShellRule, Word, python_launch

_OVERRIDE = re.compile(r"""^["']?(?:(?P<op>\+\+|\+)?(?P<key>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)="""
                       r"""|~(?P<deleted>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:=|["']?$))""")
# A config-group choice (`model_engine=megatron`, `actor_rollout_ref/actor=megatron_actor`,
# `actor@actor_rollout_ref.actor=...`): it swaps part of the composed config for another packaged one.
_GROUP_CHOICE = re.compile(r"""^["']?\+{0,2}(?P<group>[A-Za-z_]\w*)(?P<path>[/@][\w./@]*)?=""")
_ARRAY_EXPANSION = re.compile(r"""^["']?\$\{(?P<name>[A-Za-z_]\w*)\[[@*]\]\}["']?$""")
# Hydra's own flags that take a value (`--config-name x` or `--config-name=x`).
_CONFIG_NAME = ("--config-name", "-cn")
_CONFIG_PATH = ("--config-path", "-cp", "--config-dir", "-cd")


def trainer_launches(script: Script) -> Iterator[tuple[Command, str, list[Word]]]:
    """(command, VERL entry module, its arguments) for each command that runs a VERL Hydra entry point:
    `python3 -m verl.trainer.main_ppo ...`, `python verl/trainer/main_ppo.py ...`, also behind wrappers
    (`nohup`, `env A=1`) and after the `--` of a command that runs another (`ray job submit ... -- python3 ...`)."""
    for cmd in script.commands:
        if cmd.program() in TEXT_COMMANDS:
            continue
        launch = python_launch(cmd)
        if launch is None:
            after = next((k + 1 for k, w in enumerate(cmd.words) if w.value == "--"), None)
            if after is not None and after < len(cmd.words):
                launch = python_launch(Command(words=cmd.words[after:]))
        if launch is None:
            continue
        module = launch.target if launch.is_module else _module_of_script(launch.target)
        if module is not None and module.startswith("verl."):
            yield cmd, module, launch.args


def _module_of_script(path: str) -> Optional[str]:
    """`/root/verl/verl/trainer/main_ppo.py` -> `verl.trainer.main_ppo` (the last `verl/` package on the path)."""
    parts = path.removesuffix(".py").split("/") if path.endswith(".py") else []
    at = max((i for i, p in enumerate(parts[:-1]) if p == "verl"), default=None)
    return ".".join(parts[at:]) if at is not None else None


def _flag_value(args: list[Word], names: tuple[str, ...]) -> Optional[str]:
    """The value of the last `--name VALUE` / `--name=VALUE` among `args` (quotes removed)."""
    found = None
    for k, w in enumerate(args):
        v = w.value if w.value is not None else w.text
        for name in names:
            if v == name and k + 1 < len(args):
                nxt = args[k + 1]
                found = nxt.value if nxt.value is not None else nxt.text.strip("'\"")
            elif v.startswith(name + "="):
                found = v[len(name) + 1:].strip("'\"")
    return found


def _is_group_choice(word: Word, release: verl_keys.Release) -> bool:
    m = _GROUP_CHOICE.match(word.value if word.value is not None else word.text)
    return m is not None and (m.group("path") is not None or m.group("group") in release.groups)


class UnknownVerlKeyShell(ShellRule):
    """Reports Hydra overrides passed to VERL's trainer that VERL's packaged config does not have.

    What it does:
        In shell launchers, finds the commands that run a VERL Hydra entry point
        (`python -m verl.trainer.main_ppo`, `verl/trainer/main_ppo.py`, the SFT trainers,
        `main_generation`, ...; also under `nohup`/`env`, after `ray job submit --`, inside
        `bash -c '...'`, `ssh host "..."` and here-documents fed to a shell) with the shell lexer
        the convert rules use, and checks each `key.path=value` and `~key.path` override, and the
        items of a bash array expanded there (`"${ARGS[@]}"`), against the keys of the config that
        entry point composes (`ppo_trainer`, `sft_trainer`, ...; the one `--config-name` names) in
        the VERL release the project uses (`check --verl-version`, `verl_version` in
        `[tool.npu-port]`, else the project's `verl` pin, or in a VERL checkout its own config,
        else the newest release snapshotted). Where nothing names the release (the newest is
        assumed), a key that another snapshotted release has is a warning, not an error: it is
        wrong only for some releases (MindSpeed-RL's VERL launchers, written for VERL 0.6.1, which
        its verl_npu README installs by commit); a key no release has stays an error.
        `+key=` and `++key=` add keys on purpose and are not checked; free-form dicts
        (`engine_kwargs.vllm.*`) are not looked into; a `--config-path` or a `--config-name` VERL
        does not ship means the user's own config, and turns the check off for that command.
        `echo` text, comments and here-documents that are only text are not commands.

    Why:
        Hydra refuses an override of a key the config lacks ("Could not override
        'trainer.n_npus_per_node'. Key 'n_npus_per_node' is not in struct") and the job dies at
        start-up, after the cluster has been allocated. Keys come and go between VERL releases, so
        the check uses the release the project pins.

    Example:
            python3 -m verl.trainer.main_ppo \\
                actor_rollout_ref.rollout.gpu_memory_utilisation=0.6    # error
        should read:
                actor_rollout_ref.rollout.gpu_memory_utilization=0.6

    Fix safety:
        Report-only; the hint lists the closest real keys, or the VERL releases that do have the key.
    """

    ID = "unknown-verl-key-sh"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("verl",)

    def check(self, script: Script) -> None:
        if in_checkout_of(self.ctx.path, "verl"):
            return  # VERL or a fork: its launchers start the checkout's own configs, whatever release it is closest to
        release = verl_keys.release(getattr(self.ctx.options, "verl_version", None))
        arrays = {w.text.split("=", 1)[0]: w.array_items for cmd in script.commands for w in cmd.assignments
                  if w.array_items}
        for _cmd, module, args in trainer_launches(script):
            config = _flag_value(args, _CONFIG_NAME)
            if config is not None:
                config = config.removesuffix(".yaml")
            else:
                config = release.entry_config(module)
            if config is None or config not in release.configs or _flag_value(args, _CONFIG_PATH) is not None:
                continue  # not a Hydra entry point VERL ships, or a config of the user's own
            words = []
            for word in args:
                m = _ARRAY_EXPANSION.match(word.text)
                words += arrays.get(m.group("name"), []) if m else [word]
            # After a group choice the keys are those of the engine it selects: any of the family's configs.
            configs = release.family(config) if any(_is_group_choice(w, release) for w in words) else [config]
            for word in words:
                self._check_word(word, release, configs)

    def _check_word(self, word: Word, release: verl_keys.Release, configs: list[str]) -> None:
        m = _OVERRIDE.match(word.value if word.value is not None else word.text)
        if m is None or m.group("op"):
            return
        key = m.group("key") or m.group("deleted")
        missing = release.unknown_in_any(key, configs)
        if missing is None:
            return
        # A key of the engine's other config (megatron keys given to ppo_trainer): name the --config-name.
        other = next((c for c in release.family(configs[0]) if c not in configs
                      and release.unknown_key(key, c) is None), None)
        note = f"`{other}` has it: pass `--config-name={other}`" if other else ""
        self.report(word.start, f"VERL {release.version}'s {missing.config} config has no key `{missing.key}`",
                    severity=verl_keys.unknown_key_severity(missing, self.ctx.options), hint=verl_keys.hint(missing, release, note))

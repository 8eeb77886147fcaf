"""`unknown-verl-key-sh`: Hydra overrides in launchers that VERL's packaged config does not have."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Optional

from npu_port.transpiler.core.rules import TextRule
from npu_port.transpiler.tables.framework_facts import code_part
from npu_port.transpiler.tables.verl_keys import config_names, unknown_key

# The entry points that compose VERL's ppo_trainer / ppo_megatron_trainer config.
_ENTRY = re.compile(r"(?:^|[\s/])verl[./]trainer[./]main_ppo(?:\.py)?$")
_OVERRIDE = re.compile(r"^(?:(?P<op>\+\+|\+)?(?P<key>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)="
                       r"|~(?P<deleted>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:=|$))")
_COMMAND_END = ("|", "||", "&&", ";", "&")  # the trainer's arguments stop at a pipe or the next command


def logical_lines(text: str) -> Iterator[list[tuple[str, int]]]:
    """Commands joined over `\\` continuations: each a list of (physical line without comment, line number)."""
    current: list[tuple[str, int]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        code = code_part(line)
        stripped = code.rstrip()
        if stripped.endswith("\\"):
            current.append((stripped[:-1], lineno))
            continue
        current.append((code, lineno))
        yield current
        current = []
    if current:
        yield current


def words(parts: list[tuple[str, int]]) -> Iterator[tuple[str, int, int]]:
    """(word, line, column) of each blank-separated word; quotes group, and are kept in the word."""
    for code, lineno in parts:
        i, n = 0, len(code)
        while i < n:
            if code[i] in " \t":
                i += 1
                continue
            start, quote = i, ""
            while i < n and (quote or code[i] not in " \t"):
                if quote and code[i] == quote:
                    quote = ""
                elif not quote and code[i] in "'\"":
                    quote = code[i]
                i += 1
            yield code[start:i], lineno, start + 1


def _config_name(word: str) -> Optional[str]:
    m = re.match(r"""^--config-name[= ]?['"]?([\w.-]+?)(?:\.yaml)?['"]?$""", word)
    return m.group(1) if m else None


class UnknownVerlKeyShell(TextRule):
    """Reports Hydra overrides passed to VERL's trainer that VERL's packaged config does not have.

    What it does:
        In shell launchers, finds `python -m verl.trainer.main_ppo` (or `verl/trainer/main_ppo.py`)
        commands, across `\\` continuations, and checks each `key.path=value` and `~key.path`
        override against the keys of VERL 0.9.1's packaged trainer config (the one named by
        `--config-name`, else any of `ppo_trainer` / `ppo_megatron_trainer`). `+key=` and `++key=`
        add keys on purpose and are not checked; free-form dicts (`engine_kwargs.vllm.*`) are not
        looked into; a `--config-name` VERL does not ship turns the check off for that command.

    Why:
        Hydra refuses an override of a key the config lacks ("Could not override
        'trainer.n_npus_per_node'. Key 'n_npus_per_node' is not in struct") and the job dies at
        start-up, after the cluster has been allocated.

    Example:
            python3 -m verl.trainer.main_ppo \\
                actor_rollout_ref.rollout.gpu_memory_utilisation=0.6    # error
        should read:
                actor_rollout_ref.rollout.gpu_memory_utilization=0.6

    Fix safety:
        Report-only; the hint lists the closest real keys.
    """

    ID = "unknown-verl-key-sh"
    LANGUAGE = "shell"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("main_ppo",)

    def apply(self, text: str) -> str:
        known_configs = set(config_names())
        for parts in logical_lines(text):
            ws = list(words(parts))
            entry = next((i for i, (w, _, _) in enumerate(ws) if _ENTRY.search(w.strip("'\""))), None)
            if entry is None:
                continue
            config = None
            for w, _, _ in ws[entry + 1:]:
                name = _config_name(w)
                if name:
                    config = name
            if config is not None and config not in known_configs:
                continue  # a config of the user's own: its keys are not known here
            for word, line, col in ws[entry + 1:]:
                if word in _COMMAND_END or word.endswith((";", "|")):
                    break
                m = _OVERRIDE.match(word.strip("'\""))
                if m is None or m.group("op"):
                    continue
                key = m.group("key") or m.group("deleted")
                missing = unknown_key(key, config)
                if missing is None:
                    continue
                hint = f"did you mean {', '.join(f'`{s}`' for s in missing.suggestions)}?" \
                    if missing.suggestions else "add it with `+key=value` if your own config defines it"
                self.ctx.add(self.ID, line, col, f"VERL's config has no key `{missing.key}`", severity="error",
                             hint=hint)
        return text

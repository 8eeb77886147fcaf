"""Hydra overrides that VERL launchers on Ascend need: which rows of codemods/data/<target>/framework_settings.yaml
apply to one `python -m verl.trainer.main_ppo ...` command, and how they are appended to it.

Shared by shell-verl-no-compile and shell-verl-npu-settings (each adds the rows that name it) and by
yaml-verl-npu-settings (every row, in a VERL config YAML).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any, Optional

from npu_port.transpiler.tables import verl_keys
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import PythonLaunch, Script, ShellRule

_USER_ARGS = re.compile(r'"?\$[@*]"?|"?\$\{[@*]\}"?')
_CLAUSE = re.compile(r"^\s*(>=|<=|==|>|<)\s*(\d[\w.]*)\s*$")
_ROLLOUT_NAME = "actor_rollout_ref.rollout.name"
_STRATEGY = "actor_rollout_ref.actor.strategy"


@dataclass(frozen=True)
class Setting:
    key: str
    value: str
    rule: str
    when: dict[str, tuple[str, ...]]
    verl: str

    @property
    def override(self) -> str:
        return f"{self.key}={self.value}"


def in_range(version: str, spec: str) -> bool:
    """Whether VERL `version` satisfies `spec` (`>=0.6.1,<0.7.0`: the clauses a row's `verl` field uses)."""
    have = verl_keys.version_key(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = _CLAUSE.match(clause)
        if m is None:
            raise ValueError(f"unsupported version clause {clause!r} in {spec!r}")
        op, bound = m.group(1), verl_keys.version_key(m.group(2))
        ok = {">=": have >= bound, "<=": have <= bound, "==": have == bound, ">": have > bound,
              "<": have < bound}[op]
        if not ok:
            return False
    return True


@cache
def settings(target: str) -> tuple[Setting, ...]:
    """The rows a rule adds (action: add), in table order."""
    table: dict[str, Any] = load_table(target, "framework_settings")
    return tuple(
        Setting(row["key"], str(row["value"]), row["rule"],
                {k: tuple(v) for k, v in (row.get("when") or {}).items()}, str(row.get("verl", "")))
        for row in table.get("verl_overrides", []) if row.get("action") == "add")


def target_verl(options: Any) -> str:
    """The VERL release the launcher is written for: `verl_version` of the run (a checkout option
    `0.8.0@...` names its release first), else the newest release snapshotted."""
    version = getattr(options, "verl_version", None)
    return version.split("@", 1)[0] if version else verl_keys.releases()[-1].version


def override(word) -> Optional[tuple[str, str]]:
    """(key, value) of a Hydra `key=value` override word (leading `+`/`++`/`~` dropped; the value as
    written where it is not literal); None for a word without `=`."""
    key, eq, value = (word.value if word.value is not None else word.text).partition("=")
    return (key.lstrip("+~"), value) if eq else None


def _values(launch: PythonLaunch) -> dict[str, str]:
    """key -> value of the command's `key=value` overrides (a word without `=` maps to "")."""
    out: dict[str, str] = {}
    for word in launch.args:
        pair = override(word)
        if pair is None:
            text = word.value if word.value is not None else word.text
            out[text.lstrip("+~")] = ""
        else:
            out[pair[0]] = pair[1]
    return out


def _strategy(values: dict[str, str], launch: PythonLaunch) -> Optional[str]:
    strategy = values.get(_STRATEGY)
    if strategy is None:
        config = values.get("--config-name", "")
        names = [w.value or "" for w in launch.args]
        if "--config-name" in names and names.index("--config-name") + 1 < len(names):
            config = names[names.index("--config-name") + 1]
        strategy = "megatron" if "megatron" in config else "fsdp"
    return None if "$" in strategy else strategy


def applicable(rule_id: str, target: str, launch: PythonLaunch, options: Any) -> list[str]:
    """The overrides of `rule_id` that this command lacks and that apply to it (its rollout engine, its
    strategy, the targeted VERL release)."""
    values = _values(launch)
    release = verl_keys.release(target_verl(options))
    config = release.entry_config(launch.target) or "ppo_trainer"
    facts = facts_of(values, _strategy(values, launch))
    return [s.override for s in missing(target, values, facts, config, options) if s.rule == rule_id]


def facts_of(values: dict[str, str], strategy: Optional[str]) -> dict[str, Optional[str]]:
    """What the rows' `when` conditions ask of a run: its rollout engine and strategy (None: not decided
    there, a `$VAR` or no value)."""
    rollout = values.get(_ROLLOUT_NAME)
    return {"rollout": None if rollout is None or "$" in rollout else rollout.strip("'\""),
            "strategy": strategy}


def missing(target: str, values: dict[str, str], facts: dict[str, Optional[str]], config: str,
            options: Any) -> list[Setting]:
    """The rows (of every rule) that a run with these `key -> value` settings lacks and that apply to it:
    its facts meet the row's `when`, and the targeted VERL release is in the row's range and has the key in
    `config`. The shell rules and yaml-verl-npu-settings share it, so a launcher and a config get the same."""
    version = target_verl(options)
    release = verl_keys.release(version)
    out = []
    for s in settings(target):
        if s.key in values or (s.verl and not in_range(version, s.verl)):
            continue
        # The range is checked against the snapshots by the tests; this holds it for the release at hand too.
        if config in release.configs and release.unknown_key(s.key, config, invented_ok=False) is not None:
            continue
        if all(facts.get(name) in allowed for name, allowed in s.when.items()):
            out.append(s)
    return out


def append(rule: ShellRule, script: Script, cmd, launch: PythonLaunch, overrides: list[str]) -> None:
    """Append `overrides` after the command's last argument, or before a trailing `$@` so the caller's
    overrides still win, in the layout of the command (one per line after `\\` continuations)."""
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
    rule.change(anchor.end, anchor.end, added, message, quote=cmd.quote, scope=(cmd.start, cmd.end))

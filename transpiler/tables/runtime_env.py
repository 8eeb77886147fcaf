"""The runtime_env profile: the variables the Ray rules add to `runtime_env={"env_vars": ...}` (the
target's codemods/data/<target>/runtime_env.yaml, or the user's `--runtime-env FILE.yaml`), checked
for the code its names and values land in."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Optional

import yaml

from npu_port.transpiler.core.files import ReadError, read_text, yaml_too_deep
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.tables.user_tables import env_name_problem, text_problem


class ProfileError(ValueError):
    """A runtime_env profile that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class RuntimeEnvProfile:
    env_vars: tuple[tuple[str, str], ...]
    when_devices_managed: tuple[tuple[str, str], ...]
    device_variables: frozenset[str]
    forward: tuple[str, ...]
    never_forward: frozenset[str]

    def forwards(self, name: str) -> bool:
        return name not in self.never_forward and any(fnmatch.fnmatchcase(name, p) for p in self.forward)


def _env_pairs(value, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ProfileError(f"{where} must be a mapping of variable names to values")
    out = []
    for name, val in value.items():
        if not isinstance(name, str) or isinstance(val, (dict, list)) or val is None:
            raise ProfileError(f"{where}: {name!r} must map a name to a string value")
        # Ray wants strings; YAML reads 1500 and true as int and bool.
        text = str(val).lower() if isinstance(val, bool) else str(val)
        # Both land in generated code: a name must be a variable name, a value one line of plain text.
        problem = env_name_problem(name)
        if problem:
            raise ProfileError(f"{where}: {problem}")
        problem = text_problem(text) or ("contains a line break" if "\n" in text else None)
        if problem:
            raise ProfileError(f"{where}: the value of {name} {problem}")
        out.append((name, text))
    return tuple(out)


def _names(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProfileError(f"{where} must be a list of names")
    return tuple(value)


@cache
def load_profile(target: str, path: Optional[str] = None) -> RuntimeEnvProfile:
    """The target's profile, or the user's file (`--runtime-env`) with the missing keys from the target's."""
    builtin = load_table(target, "runtime_env")
    data = builtin
    if path is not None:
        try:
            text = read_text(Path(path))
            if yaml_too_deep(text):  # what PyYAML's parser finds only after seconds
                raise RecursionError
            data = yaml.safe_load(text)
        except (ReadError, yaml.YAMLError, RecursionError) as exc:
            raise ProfileError(f"{path}: cannot read runtime_env profile: "
                               f"{'nested too deeply' if isinstance(exc, RecursionError) else exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("env_vars"), dict):
            raise ProfileError(f"{path}: a runtime_env profile needs a top-level `env_vars:` mapping")
    where = path or f"{target}/runtime_env.yaml"

    def pick(key):
        return data[key] if key in data else builtin[key]

    return RuntimeEnvProfile(
        env_vars=_env_pairs(data["env_vars"], f"{where}: env_vars"),
        when_devices_managed=_env_pairs(pick("when_devices_managed"), f"{where}: when_devices_managed"),
        device_variables=frozenset(_names(pick("device_variables"), f"{where}: device_variables")),
        forward=_names(pick("forward"), f"{where}: forward"),
        never_forward=frozenset(_names(pick("never_forward"), f"{where}: never_forward")),
    )

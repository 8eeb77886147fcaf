"""VERL config-key lookups: the one definition of VERL's config schema, shared by the `unknown-verl-key-*`
checks and the conformance checker (tools/conformance.py). Facts: codemods/data/api/verl.json."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cache
from typing import Optional

from npu_port.transpiler.tables import api_facts
from npu_port.transpiler.tables.framework_facts import INVENTED_NAMES

TOP_SECTIONS_HINT = ("actor_rollout_ref", "trainer", "algorithm", "critic", "reward_model", "data")
_OPEN_TYPES = ("null",)  # a key whose default is None may hold any structure
# Dicts VERL forwards to another library as keyword arguments (`ray.init(**ray_init)`, a Ray
# runtime_env, engine kwargs, a HF config override): their keys belong to that library, not to VERL.
_PASS_THROUGH = ("ray_init", "runtime_env", "env_vars", "override_config", "kwargs")


def _is_pass_through(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return last in _PASS_THROUGH or last.endswith("_kwargs")


@dataclass(frozen=True)
class UnknownKey:
    key: str  # the first unknown part, as a dotted path
    suggestions: tuple[str, ...]


@cache
def _keys(config: str) -> dict[str, str]:
    return api_facts.load("verl").config_keys(config)


@cache
def _children(config: str) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for key in _keys(config):
        parent, _, child = key.rpartition(".")
        out.setdefault(parent, set()).add(child)
    return {k: frozenset(v) for k, v in out.items()}


def config_names() -> list[str]:
    return sorted(api_facts.load("verl").raw.get("config_keys", {}))


def key_type(dotted: str, config: str) -> Optional[str]:
    """The type of the default VERL's packaged `config` gives `dotted` ("int", "dict", "null", ...); None
    when the config has no such key (it may still lie in a free-form dict: see unknown_key)."""
    return _keys(config).get(dotted)


def unknown_key(dotted: str, config: Optional[str] = None, *, invented_ok: bool = True) -> Optional[UnknownKey]:
    """The first part of `dotted` that VERL's packaged config lacks, or None when it is known (or lies
    inside a free-form dict such as `engine_kwargs.vllm`, or under a `null` default). Without a
    `config`, a key any packaged trainer config has is known. With `invented_ok`, a part that is an
    invented name (`n_npus_per_node`) counts as known: the rules report it as unknown-framework-arg-*."""
    configs = [config] if config else config_names()
    results = [_unknown_in(dotted, c, invented_ok) for c in configs]
    if any(r is None for r in results):
        return None
    return results[0]


def _unknown_in(dotted: str, config: str, invented_ok: bool) -> Optional[UnknownKey]:
    keys, children = _keys(config), _children(config)
    parts = dotted.split(".")
    for i in range(len(parts)):
        prefix = ".".join(parts[: i + 1])
        if prefix in keys:
            kind = keys[prefix]
            if kind in _OPEN_TYPES or (kind == "dict" and (prefix not in children or _is_pass_through(prefix))):
                return None  # free-form from here on
            continue
        parent = ".".join(parts[:i])
        siblings = children.get(parent, frozenset())
        if invented_ok and parts[i] in INVENTED_NAMES:
            return None  # reported, with the real name, by unknown-framework-arg-*
        close = difflib.get_close_matches(parts[i], sorted(siblings), n=3, cutoff=0.6)
        return UnknownKey(prefix, tuple(f"{parent}.{c}" if parent else c for c in close))
    return None


def looks_like_verl_config(top_keys: set, min_sections: int = 2) -> bool:
    """A YAML document that is a VERL trainer config (or an override file of one): `min_sections` of its
    top-level sections, one of them `actor_rollout_ref` or `trainer`."""
    return len(top_keys & set(TOP_SECTIONS_HINT)) >= min_sections and (
        "actor_rollout_ref" in top_keys or "trainer" in top_keys)

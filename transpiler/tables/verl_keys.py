"""VERL config-key lookups: the one definition of VERL's config schema, shared by the `unknown-verl-key-*`
checks and the conformance checker (tools/conformance.py).

Facts: one key snapshot per VERL release, codemods/data/api/releases/verl-<version>.json (written from the
real wheels by `python -m tools.release_snapshots`): for every packaged Hydra config (`ppo_trainer`,
`ppo_megatron_trainer`, `sft_trainer`, ...) its dotted keys with the type of their default, and which
config each Hydra entry point composes (`verl.trainer.main_ppo` -> `ppo_trainer`). A project is checked
against the release it uses (`release(version)`); without one, against the newest release snapshotted.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Optional

from npu_port.transpiler.core.report import Severity
from npu_port.transpiler.tables import api_facts, verl_configs
from npu_port.transpiler.tables.framework_facts import INVENTED_NAMES

RELEASES_DIR = api_facts.SNAPSHOT_DIR / "releases"
TOP_SECTIONS_HINT = ("actor_rollout_ref", "trainer", "algorithm", "critic", "reward_model", "data")
_OPEN_TYPES = ("null",)  # a key whose default is None may hold any structure
# Dicts VERL forwards to another library as keyword arguments (`ray.init(**ray_init)`, a Ray
# runtime_env, engine kwargs, a HF config override): their keys belong to that library, not to VERL.
_PASS_THROUGH = ("ray_init", "runtime_env", "env_vars", "override_config", "kwargs")
# Snapshots written before entry points were recorded: the one entry point every release has.
_DEFAULT_ENTRIES = {"verl.trainer.main_ppo": "ppo_trainer"}
_MAX_BYTES = 4 << 20  # a checkout's config or source file larger than this is not read
_MAX_ANSWERS = 50_000


def _is_pass_through(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return last in _PASS_THROUGH or last.endswith("_kwargs")


@dataclass(frozen=True)
class UnknownKey:
    key: str  # the first unknown part, as a dotted path
    suggestions: tuple[str, ...]
    config: str = ""  # the config it was looked up in
    known_in: tuple[str, ...] = ()  # other snapshotted releases whose config has the key


def version_key(version: str) -> tuple[int, ...]:
    """`0.8.0.dev` -> (0, 8, 0): the numeric release part, for ordering (a dev or rc build of X.Y.Z is
    checked as X.Y.Z, the release it becomes)."""
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0].split("dev")[0].split("rc")[0])[:3])


@dataclass(frozen=True)
class Release:
    """The packaged Hydra configs of one VERL release."""

    version: str
    configs: dict[str, dict[str, str]]  # config name -> dotted key -> type of its default
    entries: dict[str, str]  # entry-point module -> the config name its @hydra.main composes
    groups: frozenset[str] = field(default=frozenset())  # config group folders (`actor`, `model_engine`, ...)
    targets: dict[str, dict[str, str]] = field(default_factory=dict)  # config -> section -> its `_target_` class
    fields: dict[str, frozenset[str]] = field(default_factory=dict)  # `_target_` class -> its dataclass fields
    _children: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict, compare=False, repr=False)
    # unknown_in_any's answers: a tree's scripts and configs ask about the same keys over and over (converted
    # verl: 6,539 questions), each a walk of several configs, in this release and the others.
    _answers: dict[tuple, Optional[UnknownKey]] = field(default_factory=dict, compare=False, repr=False)

    def entry_config(self, module: str) -> Optional[str]:
        return self.entries.get(module)

    def family(self, config: str) -> list[str]:
        """`config` and the packaged configs that differ from it only by the engine (`ppo_trainer`,
        `ppo_megatron_trainer`, `ppo_torchtitan_trainer`, ...): what a config-group override may turn it into."""
        stem = config.split("_")[0]
        return sorted(c for c in self.configs if c.split("_")[0] == stem) or [config]

    def children(self, config: str) -> dict[str, frozenset[str]]:
        """Parent key -> its child names, for `config` (computed once)."""
        if config not in self._children:
            out: dict[str, set[str]] = {}
            for key in self.configs[config]:
                parent, _, child = key.rpartition(".")
                out.setdefault(parent, set()).add(child)
            self._children[config] = {k: frozenset(v) for k, v in out.items()}
        return self._children[config]

    def unknown_key(self, dotted: str, config: Optional[str] = None, *,
                    invented_ok: bool = True) -> Optional[UnknownKey]:
        """The first part of `dotted` that the config lacks, or None when it is known (or lies inside a
        free-form dict such as `engine_kwargs.vllm`, or under a `null` default). Without a `config`,
        a key any packaged config has is known. With `invented_ok`, a part that is an invented name
        (`n_npus_per_node`) counts as known: the rules report it as unknown-framework-arg-*."""
        return self.unknown_in_any(dotted, [config] if config else sorted(self.configs), invented_ok=invented_ok)

    def unknown_in_any(self, dotted: str, configs: list[str], *, invented_ok: bool = True) -> Optional[UnknownKey]:
        """As unknown_key, known when any of `configs` has it; the finding names the first config and the
        other snapshotted releases that have the key."""
        question = (dotted, tuple(configs), invented_ok)
        if question in self._answers:
            return self._answers[question]
        first = self._missing(dotted, configs, invented_ok)
        answer = None
        if first is not None:
            config, (prefix, parent, siblings) = first
            close = difflib.get_close_matches(prefix.rsplit(".", 1)[-1], sorted(siblings), n=3, cutoff=0.6)
            elsewhere = tuple(r.version for r in releases() if r.version != self.version
                              and r._missing(dotted, configs, invented_ok) is None)
            answer = UnknownKey(prefix, tuple(f"{parent}.{c}" if parent else c for c in close), config, elsewhere)
        if len(self._answers) >= _MAX_ANSWERS:
            self._answers.clear()  # a bound for a worker that lives long; real trees ask a few thousand
        self._answers[question] = answer
        return answer

    def _missing(self, dotted: str, configs: list[str],
                 invented_ok: bool) -> Optional[tuple[str, tuple[str, str, frozenset[str]]]]:
        """(the first of `configs`, what _unknown_in says of it) when none has the key, else None."""
        first = None
        for config in configs:
            if config in self.configs:
                found = self._unknown_in(dotted, config, invented_ok)
                if found is None:
                    return None  # this config has it
                first = first or (config, found)
        return first

    def dataclass_of(self, section: str, configs: list[str]) -> Optional[tuple[str, frozenset[str]]]:
        """(class, its fields) when VERL builds `section` into a dataclass (its `_target_` in any of
        `configs`) whose fields are known; None otherwise."""
        for config in configs:
            target = self.targets.get(config, {}).get(section)
            if target is not None and target in self.fields:
                return target, self.fields[target]
        return None

    def key_type(self, dotted: str, config: str) -> Optional[str]:
        return self.configs.get(config, {}).get(dotted)

    def _unknown_in(self, dotted: str, config: str, invented_ok: bool) -> Optional[tuple[str, str, frozenset[str]]]:
        """(the first unknown part as a dotted prefix, its parent, the parent's children) or None."""
        keys, children = self.configs[config], self.children(config)
        parts = dotted.split(".")
        for i in range(len(parts)):
            prefix = ".".join(parts[: i + 1])
            if prefix in keys:
                kind = keys[prefix]
                if kind in _OPEN_TYPES or (kind == "dict" and (prefix not in children or _is_pass_through(prefix))):
                    return None  # free-form from here on
                continue
            if invented_ok and parts[i] in INVENTED_NAMES:
                return None  # reported, with the real name, by unknown-framework-arg-*
            parent = ".".join(parts[:i])
            return prefix, parent, children.get(parent, frozenset())
        return None


def _from_record(version: str, raw: dict) -> Release:
    files = raw.get("config_files", [])
    return Release(version, dict(raw.get("config_keys", {})), dict(raw.get("entry_configs") or _DEFAULT_ENTRIES),
                   frozenset(f.split("/", 1)[0] for f in files if "/" in f), dict(raw.get("config_targets", {})),
                   {k: frozenset(v) for k, v in (raw.get("dataclass_fields") or {}).items()})


def _from_snapshot(snap: api_facts.ApiSnapshot) -> Release:
    return _from_record(snap.version or "", snap.raw)


def checkout_option(version: str, root: Path, digest: str) -> str:
    """The run option that names a VERL checkout's own config as the schema: `VERSION@ROOT#DIGEST` (the
    digest of its config files keeps cached results of an edited config from being reused)."""
    return f"{version}@{root}#{digest}"


@cache
def _checkout(option: str) -> Optional[Release]:
    """The configs of the VERL checkout an option names (see checkout_option), or None when they cannot
    be read. Its YAML and sources are read as text, never imported."""
    version, _, rest = option.partition("@")
    root = Path(rest.rsplit("#", 1)[0])
    package = root / "verl"
    try:
        paths = [p.relative_to(root).as_posix() for p in package.rglob("*")
                 if p.suffix in (".yaml", ".py") and p.is_file()]
    except OSError:
        return None

    def read(rel: str) -> Optional[str]:
        try:
            path = root / rel
            return path.read_text(encoding="utf-8") if path.stat().st_size < _MAX_BYTES else None
        except (OSError, UnicodeDecodeError):
            return None

    import yaml  # a checkout's configs only: a run checked against the snapshots needs no YAML parser

    try:
        record = verl_configs.packaged(paths, read)
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):  # a config that does not load: use the snapshot
        return None
    return _from_record(version, record) if record["config_keys"] else None


@cache
def releases() -> tuple[Release, ...]:
    """Every VERL release with a key snapshot, oldest first (the main snapshot's release too)."""
    found = {}
    for path in sorted(RELEASES_DIR.glob("verl-*.json")):
        snap = api_facts.load(path.stem, RELEASES_DIR)
        found[snap.version] = _from_snapshot(snap)
    main = api_facts.load("verl")
    found.setdefault(main.version, _from_snapshot(main))
    return tuple(sorted(found.values(), key=lambda r: version_key(r.version)))


def release(version: Optional[str] = None) -> Release:
    """The snapshot a project on VERL `version` is checked against: the same minor release (its newest
    patch snapshotted), else the newest older one, else the oldest; None: the newest. A checkout option
    (checkout_option) gives the checkout's own configs."""
    known = releases()
    if not version:
        return known[-1]
    if "@" in version:
        own = _checkout(version)
        if own is not None:
            return own
        version = version.split("@", 1)[0]
    wanted = version_key(version)
    same_minor = [r for r in known if version_key(r.version)[:2] == wanted[:2]]
    if same_minor:
        return same_minor[-1]
    older = [r for r in known if version_key(r.version) < wanted]
    return older[-1] if older else known[0]


def unknown_key_severity(missing: UnknownKey, options, severity: Severity = "error") -> Severity:
    """`severity` for a key the checked release lacks; a warning where another snapshotted release has it and
    nothing names the project's release (options.verl_unpinned: the newest was assumed): the key is wrong
    only for some releases, and which one the project runs is not known."""
    return "warning" if missing.known_in and getattr(options, "verl_unpinned", False) else severity


def hint(missing: UnknownKey, checked: Release, note: str = "") -> str:
    """What the user can do about a key `checked` lacks: the close real keys, or the releases that have it."""
    parts = [note] if note else []
    if missing.known_in:
        releases_with = " and ".join(missing.known_in) if len(missing.known_in) < 3 else \
            f"{', '.join(missing.known_in[:-1])} and {missing.known_in[-1]}"
        parts.append(f"VERL {releases_with} {'has' if len(missing.known_in) == 1 else 'have'} it; if the project "
                     f"runs another release than {checked.version}, say so with `check --verl-version`")
    if missing.suggestions:
        parts.append(f"did you mean {', '.join(f'`{s}`' for s in missing.suggestions)}?")
    if not missing.suggestions and not missing.known_in and not note:
        parts.append("add it with `+key=value` if your own config defines it")
    return "; ".join(parts)


# -- the newest release, as the conformance checker and the docs ask -------------------------------------------

def config_names(version: Optional[str] = None) -> list[str]:
    return sorted(release(version).configs)


def key_type(dotted: str, config: str, version: Optional[str] = None) -> Optional[str]:
    """The type of the default VERL's packaged `config` gives `dotted` ("int", "dict", "null", ...); None
    when the config has no such key (it may still lie in a free-form dict: see unknown_key)."""
    return release(version).key_type(dotted, config)


def unknown_key(dotted: str, config: Optional[str] = None, *, invented_ok: bool = True,
                version: Optional[str] = None) -> Optional[UnknownKey]:
    """Release.unknown_key in the release `version` is checked against (default: the newest)."""
    return release(version).unknown_key(dotted, config, invented_ok=invented_ok)


def looks_like_verl_config(top_keys: set, min_sections: int = 2) -> bool:
    """A YAML document that is a VERL trainer config (or an override file of one): `min_sections` of its
    top-level sections, one of them `actor_rollout_ref` or `trainer`."""
    return len(top_keys & set(TOP_SECTIONS_HINT)) >= min_sections and (
        "actor_rollout_ref" in top_keys or "trainer" in top_keys)

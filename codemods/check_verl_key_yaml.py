"""`unknown-verl-key-yaml`: keys of a VERL trainer YAML that VERL's packaged config does not have."""

from __future__ import annotations

from collections.abc import Iterator

from ruamel.yaml.comments import CommentedMap

from npu_port.transpiler.analysis.project_modules import in_checkout_of
from npu_port.transpiler.core.report import Severity
from npu_port.transpiler.core.rules import TextRule
from npu_port.transpiler.tables import verl_keys
from npu_port.transpiler.text.yaml_edit import parse_yaml

_SKIP_TOP = frozenset({"defaults", "hydra"})
# Why a YAML key is a warning where a launcher override is an error.
_YAML_NOTE = "Hydra accepts a key a config file adds, but VERL never reads this one"


def _walk(node: CommentedMap, prefix: str) -> Iterator[tuple[str, int, int, object]]:
    for key in node:
        if not isinstance(key, str):
            continue
        line, col = node.lc.key(key)
        dotted = f"{prefix}.{key}" if prefix else key
        yield dotted, line + 1, col + 1, node[key]


def _defaults(doc: CommentedMap) -> list[str]:
    """The config names a Hydra `defaults` list composes (`- ppo_trainer`, `- actor@x: dp_actor` -> dp_actor)."""
    entries = doc.get("defaults")
    out: list[str] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str):
            out.append(entry.split("@", 1)[0].removesuffix(".yaml"))
        elif isinstance(entry, dict):
            out += [str(v).removesuffix(".yaml") for v in entry.values() if isinstance(v, str)]
    return out


def schema_of(doc: CommentedMap, release: verl_keys.Release) -> tuple[list[str], bool]:
    """(the packaged configs whose keys `doc` is checked against, whether it extends them). A config whose
    `defaults` list names packaged configs extends those; any other is checked against the configs whose
    top-level sections it shares most (`actor_rollout_ref` -> the PPO trainers, `model` + `optim` -> SFT)."""
    named = [c for c in _defaults(doc) if c in release.configs]
    if named:
        return named, True
    top = {k for k in doc if isinstance(k, str)} - _SKIP_TOP
    scores = {c: len(top & {k for k in keys if "." not in k}) for c, keys in release.configs.items()}
    best = max(scores.values(), default=0)
    tied = sorted(c for c, n in scores.items() if n == best and n > 0)
    if len(tied) > 1:  # the same sections (ppo_trainer / ppo_megatron_trainer): the one more of its keys are in
        dotted = set(_dotted_keys(doc, ""))
        overlap = {c: len(dotted & release.configs[c].keys()) for c in tied}
        most = max(overlap.values())
        tied = [c for c in tied if overlap[c] == most]
    return tied, False


def _dotted_keys(node: CommentedMap, prefix: str) -> Iterator[str]:
    for dotted, _, _, value in _walk(node, prefix):
        yield dotted
        if isinstance(value, CommentedMap):
            yield from _dotted_keys(value, dotted)


class UnknownVerlKeyYaml(TextRule):
    """Reports keys in a VERL trainer YAML that VERL's packaged trainer config does not have.

    What it does:
        In a YAML file that looks like a VERL trainer config (top-level `actor_rollout_ref`,
        `trainer`, `data`, `algorithm`, ...), checks every key path against the keys of the
        packaged config it is written for, in the VERL release the project uses (`check
        --verl-version`, `verl_version` in `[tool.npu-port]`, else the project's `verl` pin or VERL
        checkout, else the newest release snapshotted; codemods/data/api/releases/verl-*.json).
        The config is the one its Hydra `defaults` list names (`- ppo_trainer`,
        `- sft_trainer_engine`), else the packaged configs whose top-level sections it shares most
        (the PPO trainers for `actor_rollout_ref`, the SFT trainer for `model` + `optim`). A config
        that extends a packaged one through `defaults` may add top-level sections of its own (read
        by the project's code); those are not reported. Only the first unknown level is reported;
        free-form dicts and dicts VERL hands to another library (`engine_kwargs.vllm`,
        `override_config`, `ray_kwargs.ray_init.runtime_env`) and keys whose default is `null` are
        not looked into. Each finding names the release and config it checked against. Hydra merges
        in a key a config file adds, so what fails is VERL building a section into its dataclass
        (the section's `_target_`, whose fields are snapshotted too): a key that class has no field
        for is an error in a config composed with VERL's through `defaults`, unless the section is
        off (`enable: false`), or where nothing names the project's release (the newest is assumed)
        and another snapshotted release has the key; a field the class has though the YAML does not
        list is known. Other unknown keys (plain dicts, configs without `defaults`, disabled
        sections) are warnings.

    Why:
        VERL turns most sections of its config into dataclasses (`omega_conf_to_dataclass`): an
        unknown key there fails the job at start-up ("RolloutConfig.__init__() got an unexpected
        keyword argument 'gpu_memory_utilisation'"), elsewhere it is silently never read. Hand
        ports rename keys that VERL keeps (`n_gpus_per_node`, `*_per_gpu`), and keys come and go
        between releases.

    Example:
            actor_rollout_ref:
              rollout:
                gpu_memory_utilisation: 0.6     # error: did you mean gpu_memory_utilization?

    Fix safety:
        Report-only; the hint lists the closest real keys, or the VERL releases that do have the key.
    """

    ID = "unknown-verl-key-yaml"
    LANGUAGE = "yaml"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("actor_rollout_ref", "trainer:")

    def apply(self, text: str) -> str:
        if in_checkout_of(self.ctx.path, "verl"):
            return text  # VERL or a fork: its configs are the checkout's own, whatever release it is closest to
        try:
            # The YAML rules' parse of this text, shared (a second ruamel load cost `check` as much as
            # the rest of a VERL config's checks).
            docs = parse_yaml(self.ctx, text)[0].documents
        except Exception:  # a YAML error belongs to the YAML rules' report, not to a key check
            return text
        release = verl_keys.release(getattr(self.ctx.options, "verl_version", None))
        for doc in docs:
            if isinstance(doc, CommentedMap) and verl_keys.looks_like_verl_config(
                    {k for k in doc if isinstance(k, str)}):
                configs, extends = schema_of(doc, release)
                if configs:
                    self._check(doc, "", release, configs, extends)
        return text

    def _unknown(self, dotted: str, line: int, col: int, missing: verl_keys.UnknownKey, release: verl_keys.Release,
                 configs: list[str], extends: bool, disabled: bool) -> None:
        section, _, name = dotted.rpartition(".")
        built = release.dataclass_of(section, configs)
        if built is not None and name in built[1]:
            return  # a field of the dataclass VERL builds the section into, which its YAML does not list
        message = f"VERL {release.version}'s {missing.config} config has no key `{dotted}`"
        severity: Severity = "warning"
        note = _YAML_NOTE  # a plain dict: Hydra merges the key in and nothing reads it
        if built is not None:
            message += f": {built[0].rsplit('.', 1)[-1]}, which VERL builds `{section}` into, has no field `{name}`"
            note = f"{built[0]} refuses a field it lacks when the job starts"
            if extends and not disabled:
                # Composed with VERL's own config: VERL builds the section, and it fails (in the release checked).
                severity = verl_keys.unknown_key_severity(missing, self.ctx.options)
            else:
                note += (" (the section is disabled here)" if disabled else
                         " (if what loads this file builds the section: a config without Hydra defaults is not "
                         "composed with VERL's)")
        self.ctx.add(self.ID, line, col, message, severity=severity, hint=verl_keys.hint(missing, release, note))

    def _check(self, node: CommentedMap, prefix: str, release: verl_keys.Release, configs: list[str],
               extends: bool, disabled: bool = False) -> None:
        disabled = disabled or node.get("enable") is False  # `reward_model: {enable: false, ...}` is never built
        for dotted, line, col, value in _walk(node, prefix):
            if not prefix and (dotted in _SKIP_TOP or dotted.startswith("_")):
                continue
            missing = release.unknown_in_any(dotted, configs)
            if missing is not None:
                if missing.key == dotted and not (extends and not prefix):
                    self._unknown(dotted, line, col, missing, release, configs, extends, disabled)
                continue
            if isinstance(value, CommentedMap):
                self._check(value, dotted, release, configs, extends, disabled)

"""`unknown-verl-key-yaml`: keys of a VERL trainer YAML that VERL's packaged config does not have."""

from __future__ import annotations

from collections.abc import Iterator

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from npu_port.transpiler.core.rules import TextRule
from npu_port.transpiler.tables.verl_keys import looks_like_verl_config, unknown_key

_SKIP_TOP = frozenset({"defaults", "hydra"})


def _walk(node: CommentedMap, prefix: str) -> Iterator[tuple[str, int, int, object]]:
    for key in node:
        if not isinstance(key, str):
            continue
        line, col = node.lc.key(key)
        dotted = f"{prefix}.{key}" if prefix else key
        yield dotted, line + 1, col + 1, node[key]


class UnknownVerlKeyYaml(TextRule):
    """Reports keys in a VERL trainer YAML that VERL's packaged trainer config does not have.

    What it does:
        In a YAML file that looks like a VERL trainer config (top-level `actor_rollout_ref`,
        `trainer`, `data`, `algorithm`, ...), checks every key path against the keys of VERL 0.9.1's
        packaged `ppo_trainer` and `ppo_megatron_trainer` configs (codemods/data/api/verl.json).
        Only the first unknown level is reported; free-form dicts and dicts VERL hands to another
        library (`engine_kwargs.vllm`, `override_config`, `ray_kwargs.ray_init.runtime_env`) and keys
        whose default is `null` are not looked into.

    Why:
        VERL composes its config with Hydra in struct mode: an unknown key fails the job at start-up
        ("Key 'n_npus_per_node' is not in struct"), or, in a config that extends VERL's, is silently
        never read. Hand ports rename keys that VERL keeps (`n_gpus_per_node`, `*_per_gpu`).

    Example:
            actor_rollout_ref:
              rollout:
                gpu_memory_utilisation: 0.6     # error: did you mean gpu_memory_utilization?

    Fix safety:
        Report-only; the hint lists the closest real keys.
    """

    ID = "unknown-verl-key-yaml"
    LANGUAGE = "yaml"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("actor_rollout_ref", "trainer:")

    def apply(self, text: str) -> str:
        try:
            docs = list(YAML(typ="rt").load_all(text))
        except Exception:  # a YAML error belongs to the YAML rules' report, not to a key check
            return text
        for doc in docs:
            if isinstance(doc, CommentedMap) and looks_like_verl_config({k for k in doc if isinstance(k, str)}):
                self._check(doc, "")
        return text

    def _check(self, node: CommentedMap, prefix: str) -> None:
        for dotted, line, col, value in _walk(node, prefix):
            if not prefix and (dotted in _SKIP_TOP or dotted.startswith("_")):
                continue
            missing = unknown_key(dotted)
            if missing is not None:
                if missing.key == dotted:
                    hint = f"did you mean {', '.join(f'`{s}`' for s in missing.suggestions)}?" \
                        if missing.suggestions else "not a key of VERL's ppo_trainer / ppo_megatron_trainer config"
                    self.ctx.add(self.ID, line, col, f"VERL's config has no key `{dotted}`", severity="error",
                                 hint=hint)
                continue
            if isinstance(value, CommentedMap):
                self._check(value, dotted)

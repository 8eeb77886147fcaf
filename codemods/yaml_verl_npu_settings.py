"""yaml-verl-npu-settings (extras): the VERL settings an Ascend run needs, in a user's VERL trainer config YAML."""

from __future__ import annotations

from typing import Any, Optional

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from npu_port.codemods import _verl_overrides
from npu_port.codemods._yaml_entries import child_lines
from npu_port.codemods.yaml_verl_device import FROM_LAUNCHER, VERL_SECTIONS, constant
from npu_port.transpiler.text.text_edits import Edit
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule

# YAML spells booleans in lower case; the table's values are Hydra override text (`False`).
_YAML_BOOLS = {"True": "true", "False": "false"}
_PORTABLE = {"trainer.device": FROM_LAUNCHER}


def _keys(node: Any, prefix: str = "") -> dict[str, str]:
    """dotted key -> value text of every entry, mappings included (any value counts as set)."""
    out: dict[str, str] = {}
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            out[dotted] = "" if isinstance(value, (CommentedMap, CommentedSeq)) else str(value)
            out.update(_keys(value, dotted + "."))
    return out


def _defaults(root: CommentedMap) -> tuple[list[str], list[str]]:
    """The Hydra `defaults:` of a config: the configs it composes (`ppo_megatron_trainer`) and the packages
    a config group fills (`actor@actor_rollout_ref.actor: dp_actor` -> `actor_rollout_ref.actor`)."""
    names, packages = [], []
    for entry in root.get("defaults") or []:
        if isinstance(entry, str):
            names.append(entry)
        elif isinstance(entry, CommentedMap):
            for key, value in entry.items():
                group, _, package = str(key).removeprefix("override ").partition("@")
                names.append(str(value))
                if package:
                    packages.append(package)
    return names, packages


class YamlVerlNpuSettings(YamlRule):
    """Adds the VERL settings Ascend runs need to a VERL trainer config YAML that does not set them.

    What it does:
        In a VERL trainer config (a document with `actor_rollout_ref`, `critic`, `algorithm` or
        `reward_model` at the top, as yaml-verl-device reads it), adds each setting of the
        framework-settings table (codemods/data/ascend/framework_settings.yaml, the rows the launcher
        rules shell-verl-no-compile and shell-verl-npu-settings add) that the document does not set (any
        value counts, an explicit choice stays), under the same conditions as in a launcher: the rollout
        engine the config names (`actor_rollout_ref.rollout.name`; none named decides nothing), its
        strategy (`actor.strategy`, or `ppo_megatron_trainer` in its `defaults:`) and the VERL release
        the project targets (`verl_version` in [tool.npu-port], else the newest snapshotted release;
        never a key that release lacks): `actor_rollout_ref.actor.use_torch_compile: false`,
        `actor_rollout_ref.rollout.enable_chunked_prefill: false` with the vllm rollout, and
        `trainer.device: npu` for VERL 0.6. A key goes in as the first entry of the deepest mapping of
        its path the document has, below the top-level section, in the file's indentation; a document
        without the section, or whose `defaults:` fills that part from a config group (VERL's own
        `actor@actor_rollout_ref.actor: dp_actor`), is left alone; where the mapping is written in flow
        style the setting is reported (info) with what to add.
        `trainer.device: cuda` is yaml-verl-device's to rewrite.

    Why:
        A config YAML carries the same settings as a launcher's overrides (Hydra merges both), and an
        Ascend run needs the same ones: verl's NPU launchers turn torch.compile off for the actor, its
        Ascend quick start runs vLLM-Ascend without chunked prefill, and VERL 0.6 defaults
        trainer.device to cuda.

    Example:
        actor_rollout_ref:                  actor_rollout_ref:
          actor:                              actor:
            ppo_mini_batch_size: 256  ->        use_torch_compile: false
                                                ppo_mini_batch_size: 256

    With --keep-cuda:
        trainer.device is added as `device: ${oc.env:DEVICE,cuda}` (the launcher's device probe, as
        yaml-verl-device writes it); the torch.compile and chunked-prefill switches are kept for CUDA,
        with a warning, as the launcher rules keep them.

    Fix safety:
        Safe: performance switches and the device VERL picks itself from 0.7.0 on; values, comments and
        layout of the rest of the file stay.
    """

    ID = "yaml-verl-npu-settings"
    SAFETY = "safe"
    GROUP = "extras"
    TRIGGERS = ("actor_rollout_ref", "trainer")

    def check(self, doc: YamlDocument) -> None:
        for root in doc.documents:
            if isinstance(root, CommentedMap) and any(isinstance(root.get(k), CommentedMap) for k in VERL_SECTIONS):
                self._add(doc, root)

    def _add(self, doc: YamlDocument, root: CommentedMap) -> None:
        values = _keys(root)
        names, packages = _defaults(root)
        strategy = values.get("actor_rollout_ref.actor.strategy") or (
            "megatron" if any("megatron" in n for n in names) else "fsdp")
        facts = _verl_overrides.facts_of(values, None if "$" in strategy else strategy)
        config = "ppo_megatron_trainer" if strategy == "megatron" else "ppo_trainer"
        pending: dict[tuple[int, str], tuple[CommentedMap, str, dict[str, Any], list[str]]] = {}
        for setting in _verl_overrides.missing(self.ctx.target, values, facts, config, self.ctx.options):
            if any(setting.key.startswith(p + ".") for p in packages):
                continue  # that part of the config comes from a group file, VERL's own layout
            place = _place(root, setting.key.split("."))
            if place is None:
                continue
            parent, key, rest = place
            value = _YAML_BOOLS.get(setting.value, setting.value)
            at = doc.key_span(parent, key)[0]
            if self.positions.is_silenced(self.ID, at):
                continue
            if child_lines(doc, parent, key, {"probe": ""}) is None:
                # A flow-style (or empty) mapping: the rule writes only block lines, so it says what to add.
                self.report(at, f"not set: {setting.key}: {value} (VERL on Ascend; a flow-style mapping is not "
                            "edited)", severity="info", hint=f"add {rest[-1]}: {value} to the mapping it belongs in")
                continue
            # --keep-cuda: the device the launcher's probe exported, as yaml-verl-device writes it; the
            # performance switches have no form that reads the device, so they are kept for CUDA.
            portable = _PORTABLE.get(setting.key)
            form = self.portable_text(at, value, f"added {setting.key}: {value}",
                                      constant(portable) if portable else None)
            if form is None:
                continue
            value = form
            _, tree, added = pending.setdefault((id(parent), key), (parent, key, {}, []))[1:]
            node = tree
            for part in rest[:-1]:
                node = node.setdefault(part, {})
            node[rest[-1]] = value
            added.append(f"{setting.key}: {value}")
        for parent, key, tree, added in pending.values():
            insertion = child_lines(doc, parent, key, tree)
            at = doc.key_span(parent, key)[0]
            message = "added " + ", ".join(added)
            if insertion is None:
                continue
            self.edits.append(Edit(insertion[0], insertion[0], insertion[1]))
            line, col = self.positions.line_col(at)
            self.ctx.add(self.ID, line, col, message, kind="change")


def _place(root: CommentedMap, parts: list[str]) -> Optional[tuple[CommentedMap, str, list[str]]]:
    """(parent, key, rest): the deepest mapping on the path `parts` is `parent[key]` and `rest` goes in it;
    None where not even the top-level section is a mapping, or something on the path is not one."""
    parent, key = root, parts[0]
    if not isinstance(root.get(key), CommentedMap):
        return None
    depth = 1
    while depth < len(parts) - 1:
        child = parent[key].get(parts[depth])
        if child is None:
            break
        if not isinstance(child, CommentedMap):
            return None
        parent, key, depth = parent[key], parts[depth], depth + 1
    return parent, key, parts[depth:]

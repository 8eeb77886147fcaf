"""yaml-megatron-fusions: Megatron settings whose CUDA kernels MindSpeed does not run as written, in YAML configs."""

from __future__ import annotations

from ruamel.yaml.comments import CommentedMap

from npu_port.codemods.shell_megatron_fusions import rows
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule

# Mappings whose keys are Megatron settings: VERL's `...megatron.override_transformer_config` (TransformerConfig
# fields) and MindSpeed-RL's `megatron_training` (Megatron's arguments, `_` for `-`).
_SECTIONS = ("override_transformer_config", "megatron_training")


class YamlMegatronFusions(YamlRule):
    """Reports Megatron fusion settings that MindSpeed replaces or drops in VERL and MindSpeed-RL YAML configs.

    What it does:
        In a mapping named `override_transformer_config` (VERL's Megatron overrides) or
        `megatron_training` (MindSpeed-RL's Megatron arguments), and at the top of a LLaMA-Factory config
        that trains with Megatron (`model_name_or_path` or `stage` beside a Megatron parallel size, as
        its examples/megatron/*.yaml), the settings of shell-megatron-fusions'
        table (codemods/data/ascend/megatron_flags.yaml) are reported with the MindSpeed setting to use:
        `tp_comm_overlap: true`, `apply_rope_fusion: true` (info), and `transformer_impl:
        transformer_engine` where the same mapping does not set `use_flash_attn: true`. A value of false,
        or one the file does not decide (an interpolation), is not reported.

    Why:
        The same settings as in a launcher, given through a config: MindSpeed drops Transformer Engine's
        userbuffer overlap, runs its own fused RoPE under its own flag, and its TE path needs flash
        attention (MindSpeed's docs/zh/features).

    Example:
        override_transformer_config:
          apply_rope_fusion: true        ->  unchanged; info: MindSpeed's is --use-fused-rotary-pos-emb

    Fix safety:
        Report-only: nothing is rewritten.
    """

    ID = "yaml-megatron-fusions"
    SAFETY = "report-only"
    TRIGGERS = ("rope_fusion", "tp_comm_overlap", "transformer_engine")

    def check(self, doc: YamlDocument) -> None:
        lmf = load_table(self.ctx.target, "megatron_flags")["llamafactory"]
        for path, mapping in doc.mappings():
            if path and path[-1] in _SECTIONS:
                self._judge(doc, mapping)
            elif not path and any(k in mapping for k in lmf["config_keys"]) and any(
                    k in mapping for k in lmf["megatron_keys"]):
                self._judge(doc, mapping)

    def _judge(self, doc: YamlDocument, mapping: CommentedMap) -> None:
        for row in rows(self.ctx.target):
            key = row.field
            if key not in mapping:
                continue
            value = mapping[key]
            wanted = row.value if row.value else True
            if value != wanted:
                continue
            if row.unless and mapping.get(row.unless.lstrip("-").replace("-", "_")) is True:
                continue
            self.report(doc.key_span(mapping, key)[0], f"{key}: {row.what}", severity=row.severity,
                        hint=row.setting)

"""yaml-megatron-fusions: Megatron settings whose CUDA kernels MindSpeed does not run as written, in YAML configs."""

from __future__ import annotations

from npu_port.codemods.shell_megatron_fusions import rows
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule

# Mappings whose keys are Megatron settings: VERL's `...megatron.override_transformer_config` (TransformerConfig
# fields) and MindSpeed-RL's `megatron_training` (Megatron's arguments, `_` for `-`).
_SECTIONS = ("override_transformer_config", "megatron_training")


class YamlMegatronFusions(YamlRule):
    """Reports Megatron fusion settings that MindSpeed replaces or drops in VERL and MindSpeed-RL YAML configs.

    What it does:
        In a mapping named `override_transformer_config` (VERL's Megatron overrides) or
        `megatron_training` (MindSpeed-RL's Megatron arguments), the settings of shell-megatron-fusions'
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
        for path, mapping in doc.mappings():
            if not path or path[-1] not in _SECTIONS:
                continue
            for row in rows(self.ctx.target):
                key = row.key or row.option.lstrip("-").replace("-", "_")
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

"""bitsandbytes-npu-yaml: double quantisation and the other bitsandbytes settings of LLaMA-Factory configs."""

from __future__ import annotations

from typing import Any, Optional

from ruamel.yaml.comments import CommentedMap

from npu_port.codemods._yaml_entries import entry_below
from npu_port.codemods.bitsandbytes_npu import table
from npu_port.transpiler.text.text_edits import Edit
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule


class BitsAndBytesNpuYaml(YamlRule):
    """Sets `double_quantization: false` in LLaMA-Factory QLoRA configs and reports the bitsandbytes
    settings the NPU backend lacks.

    What it does:
        In a LLaMA-Factory config (a top-level mapping with `quantization_bit` and `model_name_or_path`,
        `stage`, `finetuning_type` or `template`; or a v1 `quant_config:` section) that quantises with
        bitsandbytes (`quantization_method: bnb`, or none: bnb is the default):
        - with `quantization_bit: 4`, `double_quantization: true` becomes `false`, and where the key is
          absent (LLaMA-Factory's default is true) `double_quantization: false` is added below
          `quantization_method` (or `quantization_bit`), where LLaMA-Factory's *_bnb_npu.yaml examples
          have it; `quantization_type: fp4` is reported (the backend takes nf4 only);
        - `quantization_bit: 8` is reported: the NPU backend has no LLM.int8 kernels.
        trl recipe YAMLs (a top-level `model_name_or_path` with trl's ModelConfig keys) get the same:
        with `load_in_4bit: true`, `use_bnb_nested_quant: true` becomes `false` and
        `bnb_4bit_quant_type: fp4` is reported; `load_in_8bit: true` is reported.
        The facts, with their sources, are codemods/data/ascend/bitsandbytes_npu.yaml.

    Why:
        bitsandbytes' Ascend backend (built from its multi-backend-refactor branch) raises
        NotImplementedError for double quantisation, FP4 and int8; LLaMA-Factory's own Ascend QLoRA
        instructions say to set `double_quantization: false`
        (examples/train_qlora/qwen3_lora_sft_bnb_npu.yaml).

    Example:
        model_name_or_path: Qwen/Qwen3-4B          model_name_or_path: Qwen/Qwen3-4B
        quantization_bit: 4                 ->     quantization_bit: 4
                                                   double_quantization: false

    With --keep-cuda:
        The config is kept (double quantisation works on GPUs) and the line is reported to port by hand.

    Fix safety:
        Review: without double quantisation the quantisation constants stay 32-bit, a little more
        memory; results are the same. The reports change nothing.
    """

    ID = "bitsandbytes-npu-yaml"
    SAFETY = "review"
    TRIGGERS = ("quantization_bit", "load_in_4bit", "load_in_8bit")

    def check(self, doc: YamlDocument) -> None:
        rows = table(self.ctx.target)["yaml"]
        trl = table(self.ctx.target)["trl"]
        for root in doc.documents:
            if isinstance(root, CommentedMap) and any(k in root for k in trl["config_keys"]):
                self._trl(doc, root, trl)
        for path, mapping in doc.mappings():
            method_key = _method_key(path, mapping, rows)
            if method_key is None:
                continue
            method = mapping.get(method_key)
            if method is not None and str(method).lower() not in rows["bnb_methods"]:
                continue
            bits = mapping.get(rows["bits_key"])
            if bits == 8:
                self.report(doc.value_span(mapping, rows["bits_key"])[0],
                            f"{rows['bits_key']}: 8 with bitsandbytes: its Ascend backend has no LLM.int8 kernels",
                            hint=f"{rows['bits_key']}: 4 with {rows['double_quant']['key']}: false, or no "
                            f"quantisation; {table(self.ctx.target)['backend_hint']}")
            elif bits == 4:
                self._double_quant(doc, mapping, rows, method_key)
                self._quant_type(doc, mapping, rows)

    def _double_quant(self, doc: YamlDocument, mapping: CommentedMap, rows: dict[str, Any], method_key: str) -> None:
        row = rows["double_quant"]
        key, npu = row["key"], row["npu_value"]
        why = "(no double quantisation in bitsandbytes' Ascend backend)"
        message = f"{key}: {npu} {why}"
        if key in mapping:
            if mapping[key] is True:
                span = doc.value_span(mapping, key)
                self.replace(span, doc.text[span[0]:span[1]].strip("'\""), npu, f"{key}: true -> {npu} {why}")
            return
        at = doc.key_span(mapping, rows["bits_key"])[0]
        # Below the method where the config names it, as LLaMA-Factory's own *_bnb_npu.yaml examples write it.
        below = method_key if method_key in mapping else rows["bits_key"]
        insertion = entry_below(doc, mapping, below, f"{key}: {npu}")
        if insertion is None:
            self.report(at, f"{key} defaults to true, which bitsandbytes' Ascend backend lacks",
                        hint=f"add {key}: {npu}")
            return
        if self.positions.is_silenced(self.ID, at) or self.portable_text(at, npu, f"added {message}", None) is None:
            return
        self.edits.append(Edit(insertion[0], insertion[0], insertion[1]))
        line, col = self.positions.line_col(at)
        self.ctx.add(self.ID, line, col, f"added {message}", kind="change")

    def _trl(self, doc: YamlDocument, root: CommentedMap, trl: dict[str, Any]) -> None:
        """trl's recipe keys: the same settings under ModelConfig's names (only an explicit true turns
        double quantisation on there, and nf4 is its default)."""
        hint = table(self.ctx.target)["backend_hint"]
        four, eight, double = trl["four_bit_key"], trl["eight_bit_key"], trl["double_quant"]
        if root.get(eight) is True:
            self.report(doc.value_span(root, eight)[0], f"{eight}: true: bitsandbytes' Ascend backend has no "
                        "LLM.int8 kernels", hint=f"{four}: true with {double['key']}: false, or no quantisation; {hint}")
        if root.get(four) is not True:
            return
        if root.get(double["key"]) is True:
            span = doc.value_span(root, double["key"])
            self.replace(span, doc.text[span[0]:span[1]].strip("'\""), double["npu_value"],
                         f"{double['key']}: true -> {double['npu_value']} (no double quantisation in "
                         "bitsandbytes' Ascend backend)")
        self._quant_type(doc, root, {"quant_type": trl["quant_type"]})

    def _quant_type(self, doc: YamlDocument, mapping: CommentedMap, rows: dict[str, Any]) -> None:
        key, supported = rows["quant_type"]["key"], rows["quant_type"]["supported"]
        value = mapping.get(key)
        if value is not None and str(value) not in supported:
            self.report(doc.value_span(mapping, key)[0],
                        f"{key}: {value}: bitsandbytes' Ascend backend quantises to {' or '.join(supported)} only",
                        hint=f"{key}: {supported[0]}")


def _method_key(path: tuple[str, ...], mapping: CommentedMap, rows: dict[str, Any]) -> Optional[str]:
    """The key that names the quantisation method where `mapping` is a LLaMA-Factory quantisation config."""
    if rows["bits_key"] not in mapping:
        return None
    if not path:
        return rows["method_key"] if any(k in mapping for k in rows["config_keys"]) else None
    section: Optional[str] = rows["sections"].get(path[-1])
    return section if len(path) == 1 else None

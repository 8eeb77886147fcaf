"""`unsupported-cuda-libs-yaml`: config values that instantiate a class of a CUDA-only library."""

from __future__ import annotations

import re

from npu_port.codemods.unsupported_cuda_libs import match_library
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule

# The keys whose value a config system imports and instantiates: Hydra and omegaconf's `_target_`, torchtune's
# `_component_`, LightningCLI's `class_path`.
TARGET_KEYS = ("_target_", "_component_", "class_path")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z")


class UnsupportedCudaLibsYaml(YamlRule):
    """Reports config values that instantiate a class or function of a library with no Ascend build.

    What it does:
        In any YAML, the value of a `_target_` (Hydra), `_component_` (torchtune) or `class_path`
        (LightningCLI) key is a dotted path the config system imports; where it lies in a library of
        unsupported-cuda-libs' table (codemods/data/<target>/unsupported_libraries.yaml: bitsandbytes,
        xformers, apex, flash_attn, transformer_engine, ...), it is reported with that library's
        finding and hint, as an `import` of it in Python would be.

    Why:
        `_component_: bitsandbytes.optim.PagedAdamW8bit` is an import and a constructor call made by the
        recipe's loader: on an Ascend host the optimiser has no kernels (bitsandbytes' NPU backend has no
        8-bit or paged optimisers) and the run fails at set-up, though no Python file names bitsandbytes.

    Example:
        optimizer:
          _component_: bitsandbytes.optim.PagedAdamW8bit     # warning: use torch.optim.AdamW
          lr: 2e-5

    Fix safety:
        Report-only: which class replaces it (torch.optim.AdamW, a torch_npu fused optimiser) is a choice.
    """

    ID = "unsupported-cuda-libs-yaml"
    SAFETY = "report-only"
    TRIGGERS = TARGET_KEYS

    def check(self, doc: YamlDocument) -> None:
        for _path, mapping in doc.mappings():
            for key in TARGET_KEYS:
                value = mapping.get(key)
                if not isinstance(value, str) or not _DOTTED.match(value.strip()):
                    continue
                row = match_library(self.ctx.target, value.strip())
                if row is None:
                    continue
                self.report(doc.value_span(mapping, key)[0],
                            f"`{key}: {value.strip()}` imports {row.what} when the config is loaded: it does not work "
                            "on Ascend NPU", severity=row.severity, hint=row.hint)

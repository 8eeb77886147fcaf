"""yaml-verl-device: `trainer.device: cuda` in VERL trainer configs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from npu_port.transpiler.core.rules import CUDA_WORD
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule

# Top-level sections of a VERL trainer config (verl/trainer/config/ppo_trainer.yaml).
VERL_SECTIONS = ("actor_rollout_ref", "critic", "algorithm", "reward_model")
# Keys of VERL's own `trainer` section (ppo_trainer.yaml, sft_trainer.yaml, sft_trainer_engine.yaml): an SFT config
# has no RL sections, but its trainer says whose it is.
VERL_TRAINER_KEYS = ("n_gpus_per_node", "default_hdfs_dir")
# --keep-cuda: the launcher's device probe (transpiler/text/shell.PROBE_LINES exports DEVICE), through
# OmegaConf's env resolver, which VERL's Hydra configs resolve (main_ppo: OmegaConf.resolve(config)).
FROM_LAUNCHER = "${oc.env:DEVICE,cuda}"


class YamlVerlDevice(YamlRule):
    """Sets `trainer.device: npu` in VERL trainer configs that say `cuda`.

    What it does:
        In a YAML document with a `trainer:` mapping whose `device` is `cuda`, and which is a VERL
        config (it has `actor_rollout_ref`, `critic`, `algorithm` or `reward_model` at the top, or
        `trainer.n_gpus_per_node` or `trainer.default_hdfs_dir`, as VERL's SFT configs do), the value becomes `npu`; quotes and comments stay. Keys that name
        GPUs (`n_gpus_per_node`, `gpu_memory_utilization`, `*_per_gpu`) and `rollout.name: vllm` keep
        their names and values on NPU.

    Why:
        VERL's `trainer.device` picks the torch device of its workers (ppo_trainer.yaml; `npu` in the
        Ascend quick start). Newer VERL sets it itself when torch_npu is present, but an explicit
        `cuda` in a user config is wrong on Ascend.

    Example:
        trainer:                    trainer:
          device: cuda      ->        device: npu
          n_gpus_per_node: 8          n_gpus_per_node: 8

    With --keep-cuda:
        trainer:                    trainer:
          device: cuda      ->        device: ${oc.env:DEVICE,cuda}
        (the device the launcher's probe exported, `export DEVICE=$(command -v npu-smi ... && echo npu
        || echo cuda)`, which shell-device-args / shell-hydra-device add with --keep-cuda; `cuda`, as
        before, where the job's environment has no DEVICE: recent VERL then picks the NPU by itself,
        `auto_set_device`. OmegaConf resolves `${oc.env:...}` in every VERL config loaded through Hydra.)

    Fix safety:
        Safe: one value changes; the file is edited in place, not re-dumped.
    """

    ID = "yaml-verl-device"
    SAFETY = "safe"
    TRIGGERS = ()
    TRIGGER_PATTERNS = (CUDA_WORD,)

    def check(self, doc: YamlDocument) -> None:
        for root in doc.documents:
            if not hasattr(root, "get"):
                continue
            trainer = root.get("trainer")
            if not hasattr(trainer, "get") or trainer.get("device") != "cuda":
                continue
            if not (any(k in root for k in VERL_SECTIONS) or any(k in trainer for k in VERL_TRAINER_KEYS)):
                continue
            # Flow style (`trainer: {device: cuda}`) reads `,` and `{}` as its own: the interpolation is quoted.
            form = f"'{FROM_LAUNCHER}'" if trainer.fa.flow_style() else FROM_LAUNCHER
            self.replace(doc.value_span(trainer, "device"), "cuda", "npu", "trainer.device: cuda -> npu",
                         portable=constant(form))


def constant(text: str) -> Callable[[], Optional[str]]:
    return lambda: text

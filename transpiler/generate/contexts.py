"""Values a template needs beyond the options themselves, derived in one place.

The VERL override list feeds both the generated script and its `--config-out` YAML, so the two can
never disagree. Keys are VERL's own (ppo_trainer.yaml); `gpu` in a key name stays on NPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Override = tuple[str, Any]


def verl_overrides(v: Mapping[str, Any], *, save_hf_model: bool = False) -> list[tuple[str, list[Override]]]:
    """(section comment, [(dotted key, value)]) in the order a person reads a VERL launch script."""
    grpo = v["algorithm"] == "grpo"
    micro = v["micro_batch_size_per_device"]
    actor = [
        ("actor_rollout_ref.model.path", v["model_path"]),
        ("actor_rollout_ref.model.use_remove_padding", True),
        ("actor_rollout_ref.model.enable_gradient_checkpointing", True),
        ("actor_rollout_ref.actor.optim.lr", v["lr"]),
        ("actor_rollout_ref.actor.ppo_mini_batch_size", v["ppo_mini_batch_size"]),
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", micro),
        ("actor_rollout_ref.actor.use_kl_loss", grpo),
    ]
    if grpo:
        actor += [
            ("actor_rollout_ref.actor.kl_loss_coef", 0.001),
            ("actor_rollout_ref.actor.kl_loss_type", "low_var_kl"),
            ("actor_rollout_ref.actor.entropy_coeff", 0),
        ]
    # torch.compile of the actor/ref is what VERL's own *_npu.sh examples switch off.
    actor += [
        ("actor_rollout_ref.actor.use_torch_compile", False),
        ("actor_rollout_ref.ref.use_torch_compile", False),
        ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", micro),
    ]
    if save_hf_model:
        # A full Hugging Face copy under global_step_N/actor/huggingface is what the inference side loads.
        actor.append(("actor_rollout_ref.actor.checkpoint.save_contents", ["model", "optimizer", "extra", "hf_model"]))
    groups: list[tuple[str, list[Override]]] = [
        ("algorithm", [
            ("algorithm.adv_estimator", "grpo" if grpo else "gae"),
            ("algorithm.use_kl_in_reward", False),
        ]),
        ("data", [
            ("data.train_files", v["train_files"]),
            ("data.val_files", v["val_files"]),
            ("data.train_batch_size", v["train_batch_size"]),
            ("data.max_prompt_length", v["max_prompt_length"]),
            ("data.max_response_length", v["max_response_length"]),
        ]),
        ("actor and reference policy", actor),
        ("rollout: the name stays 'vllm' on NPU, the vllm-ascend plugin is picked up by itself", [
            ("actor_rollout_ref.rollout.name", v["rollout_engine"]),
            ("actor_rollout_ref.rollout.n", v["rollout_n"]),
            ("actor_rollout_ref.rollout.tensor_model_parallel_size", v["rollout_tp"]),
            ("actor_rollout_ref.rollout.gpu_memory_utilization", v["gpu_memory_utilization"]),
            ("actor_rollout_ref.rollout.enforce_eager", True),
            ("actor_rollout_ref.rollout.enable_chunked_prefill", False),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", micro),
        ]),
    ]
    if not grpo:
        groups.append(("critic (PPO)", [
            ("critic.model.path", v["model_path"]),
            ("critic.model.use_remove_padding", True),
            ("critic.model.enable_gradient_checkpointing", True),
            ("critic.optim.lr", v["critic_lr"]),
            ("critic.ppo_micro_batch_size_per_gpu", micro),
        ]))
    groups.append(("trainer: device=npu; n_gpus_per_node keeps its name and counts NPUs", [
        ("trainer.device", "npu"),
        ("trainer.nnodes", v["nnodes"]),
        ("trainer.n_gpus_per_node", v["devices_per_node"]),
        ("trainer.total_epochs", v["total_epochs"]),
        ("trainer.save_freq", v["save_freq"]),
        ("trainer.test_freq", v["test_freq"]),
        ("trainer.default_local_dir", v["checkpoint_dir"]),
        ("trainer.resume_mode", v["resume"]),
        ("trainer.project_name", v["project_name"]),
        ("trainer.experiment_name", v["experiment_name"]),
        ("trainer.logger", ["console"]),
    ]))
    return groups


def nest(pairs: list[Override]) -> dict[str, Any]:
    """{"a.b": 1, "a.c": 2} -> {"a": {"b": 1, "c": 2}}."""
    root: dict[str, Any] = {}
    for key, value in pairs:
        *parents, leaf = key.split(".")
        node = root
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return root


def _verl_train(v: Mapping[str, Any]) -> dict[str, Any]:
    groups = verl_overrides(v)
    return {"override_groups": groups, "verl_config": nest([kv for _, g in groups for kv in g])}


def _pipeline(v: Mapping[str, Any]) -> dict[str, Any]:
    groups = verl_overrides(v, save_hf_model=True)
    return {"override_groups": groups, "verl_config": nest([kv for _, g in groups for kv in g])}


def _msrl_train(v: Mapping[str, Any]) -> dict[str, Any]:
    # config_file: where the launch script finds the YAML, relative to itself (`generate` passes the real one).
    return {"num_npus": v["nnodes"] * v["npus_per_node"], "config_file": v["config_name"] + ".yaml"}


CONTEXT_BUILDERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "verl-train": _verl_train,
    "pipeline": _pipeline,
    "msrl-train": _msrl_train,
}


def _vllm_infer(v: Mapping[str, Any]) -> dict[str, Any]:
    # The adapter partial is shared with `pipeline`, where gpu_memory_utilization means the rollout's share.
    return {"inference_memory_utilization": v["gpu_memory_utilization"]}


CONTEXT_BUILDERS["vllm-infer"] = _vllm_infer

"""Values a template needs beyond the options themselves, derived in one place.

The VERL override list feeds both the generated script and its `--config-out` YAML, so the two can
never disagree. Keys are VERL's own (ppo_trainer.yaml); `gpu` in a key name stays on NPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import Any, Optional

import yaml

from npu_port.transpiler.generate.versions import VersionSet, choose, mindspeed_rl_source
from npu_port.transpiler.tables import api_facts

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
            # The actor's model as the composed config names it: an override of actor_rollout_ref.model.path on
            # the command line moves the critic too (its own critic.model.path override still wins).
            ("critic.model.path", "${actor_rollout_ref.model.path}"),
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


@cache
def npu_env_vars() -> dict[str, str]:
    """The Ascend additions to Ray's runtime_env (skeletons/npu_env.yaml)."""
    text = (resources.files("npu_port.skeletons") / "npu_env.yaml").read_text(encoding="utf-8")
    return {str(k): str(v) for k, v in yaml.safe_load(text)["env_vars"].items()}


def ray_address(v: Mapping[str, Any]) -> Optional[str]:
    """Where Ray runs: the given address; "auto" (join the cluster started with `ray start`) for more
    than one node, since a Ray started by the script holds this node's NPUs only; None: a local Ray."""
    if v.get("ray_address"):
        return v["ray_address"]
    return "auto" if v["nnodes"] > 1 else None


def added_overrides(v: Mapping[str, Any]) -> list[tuple[str, list[Override]]]:
    """Keys that go into mappings VERL passes on as they are (Hydra's `+key=value`): ray_kwargs.ray_init is
    `ray.init(**ray_init)` in run_ppo, engine_kwargs.<engine> the rollout engine's own arguments."""
    address = ray_address(v)
    ray_init: list[Override] = [("ray_kwargs.ray_init.address", address)] if address else [
        ("ray_kwargs.ray_init.resources", {"NPU": v["devices_per_node"]})]
    groups = [("Ray: run_ppo calls ray.init with these, after its own set-up (VERL_FULL_DETERMINISM, ...)",
               ray_init)]
    if v["rollout_engine"] == "sglang":
        # VERL's *_sglang_*_npu.sh examples select SGLang's Ascend attention kernels this way.
        groups.append(("SGLang on Ascend: its NPU attention backend", [
            ("actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend", "ascend")]))
    return groups


def version_set(v: Mapping[str, Any]) -> VersionSet:
    return choose(v.get("verl_version"), v.get("vllm_version"))


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


def _verl_context(v: Mapping[str, Any], groups: list[tuple[str, list[Override]]]) -> dict[str, Any]:
    added = added_overrides(v)
    vs = version_set(v)
    return {"override_groups": groups, "added_groups": added, "ray_address_value": ray_address(v),
            "versions": vs, "version_header": vs.header_lines(),
            "verl_config": nest([kv for _, g in groups + added for kv in g]
                                + [("ray_kwargs.ray_init.runtime_env.env_vars", npu_env_vars())])}


def _verl_train(v: Mapping[str, Any]) -> dict[str, Any]:
    return _verl_context(v, verl_overrides(v))


def agent_overrides(v: Mapping[str, Any]) -> tuple[str, list[Override]]:
    """Rollouts through VERL's tool agent loop with the project's tools and reward (files next to the script;
    the pipeline makes the paths absolute at run time)."""
    return ("agent in the loop: VERL's tool agent loop (multi-turn, hermes tool calls), the project's tools and reward", [
        ("actor_rollout_ref.rollout.multi_turn.enable", True),
        ("actor_rollout_ref.rollout.multi_turn.format", "hermes"),
        ("actor_rollout_ref.rollout.multi_turn.max_assistant_turns", v["agent_max_turns"]),
        ("actor_rollout_ref.rollout.multi_turn.function_tool_path", "agent_tools.py"),
        ("actor_rollout_ref.rollout.agent.default_agent_loop", "tool_agent"),
        ("data.return_raw_chat", True),
        ("reward.custom_reward_function.path", "agent_reward.py"),
        ("reward.custom_reward_function.name", "compute_score"),
    ])


def weight_handoff(v: Mapping[str, Any]) -> str:
    """The hand-off the generated code does: `reload` only where the set's engine can reload its weights
    from a checkpoint folder (not vLLM 0.11.0's: there it is `disk`, a rebuild on the checkpoint)."""
    wanted = str(v.get("weight_handoff", "reload"))
    return wanted if version_set(v).engine_reload else "disk"


def _pipeline(v: Mapping[str, Any]) -> dict[str, Any]:
    groups = verl_overrides(v, save_hf_model=True)
    return {**_verl_context(v, groups + [agent_overrides(v)]), "weight_handoff": weight_handoff(v)}


def _msrl_train(v: Mapping[str, Any]) -> dict[str, Any]:
    # config_file: where the launch script finds the YAML, relative to itself (`generate` passes the real one).
    snap = api_facts.load("mindspeed_rl")
    source = mindspeed_rl_source()
    if snap.commit != source.commit:
        raise ValueError(f"MindSpeed-RL's API snapshot is of git {snap.commit}, version_sets.yaml names {source.commit}")
    target = f"Targets: MindSpeed-RL {source.label}, the commit its keys were read from:"
    checkout = f"git clone https://gitcode.com/Ascend/MindSpeed-RL; git -C MindSpeed-RL checkout {source.commit[:10]}"
    return {"num_npus": v["nnodes"] * v["npus_per_node"], "config_file": v["config_name"] + ".yaml",
            "version_header": [target, checkout]}


CONTEXT_BUILDERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "verl-train": _verl_train,
    "pipeline": _pipeline,
    "msrl-train": _msrl_train,
}


def _vllm_infer(v: Mapping[str, Any]) -> dict[str, Any]:
    # The adapter partial is shared with `pipeline`, where gpu_memory_utilization means the rollout's share.
    vs = version_set(v)
    return {"inference_memory_utilization": v["gpu_memory_utilization"], "versions": vs,
            "version_header": vs.header_lines()}


CONTEXT_BUILDERS["vllm-infer"] = _vllm_infer

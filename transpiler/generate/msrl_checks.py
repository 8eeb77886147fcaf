"""The msrl-train option checks MindSpeed-RL itself applies, run before anything is written.

MindSpeed-RL refuses a config at start-up (mindspeed_rl/config_cls/validate_config.py, validate_rl_args)
and Megatron refuses a parallel layout it cannot split; a generated config must pass both, so these
mirror the checks that the options the skeleton sets can fail, with upstream's reasoning in the
messages. The generated config runs the integrated worker (actor, reference and rollout share the
NPUs: rl_config.actor_resource.num_npus = nnodes x npus_per_node), context parallel 1, and a rule
reward (one reward process per node).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import yaml


@cache
def model_facts() -> dict[str, dict[str, int]]:
    text = (resources.files("npu_port.skeletons") / "msrl_train" / "models.yaml").read_text(encoding="utf-8")
    return {str(k): dict(v) for k, v in yaml.safe_load(text).items()}


def layer_list(text: str) -> list[int]:
    """'7,7,8' -> [7, 7, 8]; ValueError on anything else."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--num-layer-list: {text!r} is not a comma-separated list of positive layer counts")
    return [int(p) for p in parts]


def problems(v: Mapping[str, Any]) -> list[str]:
    """Every reason MindSpeed-RL or Megatron would refuse these options (empty: it starts)."""
    out: list[str] = []
    npus = v["nnodes"] * v["npus_per_node"]
    tp, pp, ep = v["tensor_model_parallel_size"], v["pipeline_model_parallel_size"], v["expert_model_parallel_size"]
    itp, ipp, iep = v["infer_tensor_parallel_size"], v["infer_pipeline_parallel_size"], v["infer_expert_parallel_size"]
    gbs, mbs, n = v["global_batch_size"], v["micro_batch_size"], v["n_samples_per_prompt"]
    facts = model_facts().get(v["model"], {})

    if v["max_model_len"] < v["seq_length"]:
        out.append(f"--max-model-len {v['max_model_len']} is below --seq-length {v['seq_length']}: MindSpeed-RL "
                   "refuses a sequence longer than vLLM's max_model_len")
    if ipp > 1:
        out.append(f"--infer-pipeline-parallel-size {ipp}: MindSpeed-RL does not support pipeline parallel in vLLM "
                   "(it must be 1)")
    if npus % (tp * pp) or npus % (itp * ipp):
        return out  # the divisibility constraints of the schema already name these
    actor_dp = npus // (tp * pp)
    infer_dp = npus // (itp * ipp)
    if (gbs * n) % mbs:
        out.append(f"--global-batch-size x --n-samples-per-prompt ({gbs} x {n}) must be a multiple of "
                   f"--micro-batch-size {mbs}")
    if gbs % actor_dp:
        out.append(f"--global-batch-size {gbs} must be a multiple of the actor's data parallel size {actor_dp} "
                   f"({npus} NPUs / (tensor {tp} x pipeline {pp}))")
    elif (gbs // actor_dp * n) % mbs:
        out.append(f"--global-batch-size / data parallel x --n-samples-per-prompt ({gbs} / {actor_dp} x {n}) must be "
                   f"a multiple of --micro-batch-size {mbs}")
    if gbs % infer_dp:
        out.append(f"--global-batch-size {gbs} must be a multiple of the rollout's data parallel size {infer_dp} "
                   f"({npus} NPUs / (infer tensor {itp} x infer pipeline {ipp}))")
    if gbs % v["nnodes"]:
        out.append(f"--global-batch-size {gbs} must be a multiple of --nnodes {v['nnodes']}: the rule reward runs "
                   "one process per node")

    layers = facts.get("num_layers")
    if v.get("num_layer_list"):
        try:
            per_stage = layer_list(v["num_layer_list"])
        except ValueError as exc:
            out.append(str(exc))
        else:
            if len(per_stage) != pp:
                out.append(f"--num-layer-list has {len(per_stage)} stages; --pipeline-model-parallel-size is {pp}")
            if layers is not None and sum(per_stage) != layers:
                out.append(f"--num-layer-list sums to {sum(per_stage)} layers; {v['model']} has {layers}")
    elif layers is not None and layers % pp:
        out.append(f"{v['model']} has {layers} layers, which {pp} pipeline stages cannot split evenly: "
                   f"give --num-layer-list (e.g. {_even_split(layers, pp)}) or another "
                   "--pipeline-model-parallel-size")

    experts = facts.get("num_experts")
    if experts is None:
        if ep > 1 or iep > 1:
            out.append(f"{v['model']} is a dense model: expert parallel sizes must be 1")
    else:
        if experts % ep:
            out.append(f"--expert-model-parallel-size {ep} must divide the {experts} experts of {v['model']}")
        if actor_dp % ep:
            out.append(f"--expert-model-parallel-size {ep} must divide the actor's data parallel size {actor_dp}")
        if experts % iep or npus % iep:
            out.append(f"--infer-expert-parallel-size {iep} must divide the {experts} experts and the {npus} NPUs")
    return out


def _even_split(layers: int, stages: int) -> str:
    base, extra = divmod(layers, stages)
    # The extra layers go to the middle stages, as MindSpeed-RL's DeepSeek configs do (7,7,8,...,8,7).
    counts = [base] * stages
    start = (stages - extra) // 2
    for i in range(start, start + extra):
        counts[i] += 1
    return ",".join(map(str, counts))

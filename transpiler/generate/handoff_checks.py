"""Option checks of the reload weight hand-off (`generate pipeline`, `weave --agent-loop`).

With the reload hand-off the agent's vLLM engine starts before training and sleeps through it. An
engine on vLLM's Ray executor would start Ray itself (vLLM calls ray.init when none runs), and VERL's
run_ppo then skips its own start-up: the NPU runtime_env and every ray_kwargs.ray_init setting would be
dropped, and vLLM's workers would keep Ray's NPUs from the trainer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npu_port.transpiler.generate.contexts import weight_handoff


def problems(values: Mapping[str, Any]) -> list[str]:
    # On a set whose engine cannot reload (vLLM 0.11.0) the hand-off is from disk: no engine before training.
    if weight_handoff(values) == "reload" and values.get("distributed_executor_backend") == "ray":
        return ["--distributed-executor-backend ray with the reload hand-off: the agent's engine starts before "
                "training, and vLLM's Ray executor would start Ray before VERL does (dropping ray_kwargs.ray_init "
                "and the NPU runtime_env); use mp, or --weight-handoff disk"]
    return []

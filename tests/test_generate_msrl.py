"""msrl-train: the options MindSpeed-RL's own validation (validate_rl_args) and Megatron would refuse are
refused before writing, the MoE options, and the launcher's head detection, worker join and re-runs
(run with stand-ins for ray, python, hostname and ip on PATH)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.generate.msrl_checks import model_facts
from npu_port.transpiler.generate.render import render, schemas
from npu_port.transpiler.generate.schema import OptionError


def problems(**options) -> list[str]:
    try:
        schemas()["msrl-train"].validate(options)
    except OptionError as exc:
        return exc.problems
    return []


def test_defaults_pass():
    assert problems() == []


def test_a_batch_the_rollout_cannot_split_is_refused(tmp_path):
    # 16 NPUs with infer TP 1: 16 rollout replicas, and 8 prompts cannot be dealt out to them.
    assert any("rollout's data parallel size 16" in p for p in problems(global_batch_size=8, mini_batch_size=8))
    result = CliRunner().invoke(cli, ["generate", "msrl-train", "--global-batch-size", "8", "--mini-batch-size", "8",
                                      "-o", str(tmp_path / "l.sh")])
    assert result.exit_code == 2 and "rollout's data parallel size" in result.output
    assert not list(tmp_path.iterdir())


def test_deepseek_on_four_by_sixteen_needs_a_layer_split_and_a_fitting_batch():
    found = problems(model="deepseekv3_671b", nnodes=4)
    assert any("61 layers, which 2 pipeline stages cannot split evenly" in p and "--num-layer-list" in p
               for p in found)
    assert problems(model="deepseekv3_671b", nnodes=4, tensor_model_parallel_size=4, pipeline_model_parallel_size=4,
                    num_layer_list="15,16,15,15", expert_model_parallel_size=4, infer_tensor_parallel_size=4,
                    infer_expert_parallel_size=16, global_batch_size=64, mini_batch_size=64) == []


@pytest.mark.parametrize("options,fragment", [
    ({"max_model_len": 1024, "seq_length": 2048, "max_prompt_length": 512, "max_tokens": 256},
     "below --seq-length"),
    ({"infer_pipeline_parallel_size": 2}, "does not support pipeline parallel in vLLM"),
    ({"global_batch_size": 30, "mini_batch_size": 30}, "actor's data parallel size 4"),
    ({"nnodes": 3, "infer_tensor_parallel_size": 3, "global_batch_size": 16, "mini_batch_size": 16},
     "multiple of --nnodes 3"),
    ({"num_layer_list": "14,14"}, "sums to 28"),  # qwen25_7b has 28 layers: this one passes
    ({"num_layer_list": "10,10,8"}, "3 stages"),
    ({"num_layer_list": "a,b"}, "not a comma-separated list"),
    ({"expert_model_parallel_size": 2}, "dense model"),
    ({"model": "qwen3_30b_a3b", "expert_model_parallel_size": 8}, "data parallel size 4"),
])
def test_upstream_checks(options, fragment):
    found = problems(**options)
    if fragment == "sums to 28":
        assert found == []
    else:
        assert any(fragment in p for p in found), found


def test_model_facts_cover_every_model_choice():
    assert set(model_facts()) == set(schemas()["msrl-train"].options["model"].choices)


def test_moe_options_reach_the_config():
    values = schemas()["msrl-train"].validate({"model": "qwen3_30b_a3b", "expert_model_parallel_size": 4,
                                               "infer_expert_parallel_size": 8, "global_batch_size": 32})
    config = render("msrl-train", values).config or ""
    assert "expert_model_parallel_size: 4" in config and "infer_expert_parallel_size: 8" in config
    assert "enable_expert_parallel: true" in config


# --- the launcher ---------------------------------------------------------------------------------------

FAKE_RAY = """#!/usr/bin/env bash
echo "ray $*" >> "$LOG"
if [ "$1" = start ] && [ "${2:-}" != --head ]; then
  n=$(cat "$STATE/join_tries" 2>/dev/null || echo 0); echo $((n + 1)) > "$STATE/join_tries"
  [ "$n" -ge "${JOIN_FAILS:-0}" ] || exit 1
fi
if [ "$1" = status ]; then exit 1; fi
exit 0
"""
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = -c ]; then echo "${CLUSTER_NPUS:-16}"; exit 0; fi
echo "python $*" >> "$LOG"
"""


def _launcher(tmp_path: Path, **options) -> Path:
    values = schemas()["msrl-train"].validate(options)
    rendered = render("msrl-train", values, {"config_file": "grpo_npu.yaml"})
    script = tmp_path / "launch.sh"
    script.write_text(rendered.main)
    (tmp_path / "grpo_npu.yaml").write_text(rendered.config or "")
    return script


def _run(tmp_path: Path, script: Path, host_ips: str, **env) -> tuple[int, list[str]]:
    bin_dir, state, ascend = tmp_path / "bin", tmp_path / "state", tmp_path / "ascend"
    for d in (bin_dir, state, ascend / "ascend-toolkit", ascend / "nnal" / "atb", tmp_path / "msrl" / "configs"):
        d.mkdir(parents=True, exist_ok=True)
    (ascend / "ascend-toolkit" / "set_env.sh").write_text("")
    (ascend / "nnal" / "atb" / "set_env.sh").write_text("")
    for name, text in {"ray": FAKE_RAY, "python": FAKE_PYTHON, "sleep": "#!/bin/sh\nexit 0\n",
                       "hostname": f"#!/bin/sh\necho '{host_ips}'\n"}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "log"
    log.write_text("")
    full_env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log), "STATE": str(state),
                "ASCEND_INSTALL_DIR": str(ascend), "MINDSPEED_RL_DIR": str(tmp_path / "msrl"), "HOME": str(tmp_path),
                **env}
    proc = subprocess.run(["bash", str(script)], env=full_env, capture_output=True, text=True, timeout=60)
    return proc.returncode, log.read_text().splitlines()


@pytest.mark.slow
def test_launcher_head_on_a_second_interface_stops_old_ray_then_trains(tmp_path):
    script = _launcher(tmp_path, nnodes=2, npus_per_node=8, master_addr="10.0.0.5", global_batch_size=32,
                       tensor_model_parallel_size=2, pipeline_model_parallel_size=2)
    code, calls = _run(tmp_path, script, "192.168.1.7 10.0.0.5", CLUSTER_NPUS="16")
    assert code == 0, calls
    assert calls[0] == "ray stop --force"  # a re-run starts clean
    assert any(c.startswith("ray start --head") and "--node-ip-address 10.0.0.5" in c for c in calls)
    assert "python cli/train_grpo.py --config-name grpo_npu" in calls


@pytest.mark.slow
def test_launcher_worker_retries_until_the_head_answers(tmp_path):
    script = _launcher(tmp_path, nnodes=2, npus_per_node=8, master_addr="10.0.0.5", global_batch_size=32,
                       tensor_model_parallel_size=2, pipeline_model_parallel_size=2)
    code, calls = _run(tmp_path, script, "10.0.0.9", JOIN_FAILS="2")
    assert code == 0, calls
    joins = [c for c in calls if c.startswith("ray start --address 10.0.0.5:6766")]
    assert len(joins) == 3 and "--node-ip-address 10.0.0.9" in joins[0]
    assert not any("train_grpo" in c for c in calls)


@pytest.mark.slow
def test_launcher_head_gives_up_when_nodes_are_missing(tmp_path):
    script = _launcher(tmp_path, nnodes=2, npus_per_node=8, master_addr="10.0.0.5", global_batch_size=32,
                       tensor_model_parallel_size=2, pipeline_model_parallel_size=2)
    code, calls = _run(tmp_path, script, "10.0.0.5", CLUSTER_NPUS="8", JOIN_TIMEOUT="10")
    assert code == 1 and not any("train_grpo" in c for c in calls)

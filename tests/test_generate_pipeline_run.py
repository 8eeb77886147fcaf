"""The generated agent pipeline (`generate pipeline`) run end to end on CPU, trainer and engine injected.

pipeline.py runs for real: Hydra composes the config from a stand-in `verl` package (the one of
test_generate_ray_init.py, whose run_ppo starts Ray from ray_kwargs.ray_init as verl 0.9.1 does) and the
command line; the stand-in run_ppo records the config and writes a checkpoint as VERL lays it out;
`vllm.LLM` is a scripted engine that records sleep / wake_up / collective_rpc. Nothing of the real VERL,
vLLM or Ray is imported.
"""

from __future__ import annotations

import ast
import json
import runpy
import sys
import types
from pathlib import Path

import pytest
from test_generate_ray_init import MAIN_PPO, _fake_verl
from test_weave_agent_loop import FakeLLM, Recorder, keep_env
from verl_tool_stubs import function_tool_module

from npu_port.transpiler.generate.render import render, schemas

pytest.importorskip("hydra")
pytest.importorskip("omegaconf")

# After the stand-in's own run_ppo (VERL's start-up, then ray.init): what the trainer leaves behind.
TRAINER = MAIN_PPO.replace("def run_ppo(", "def _start_ray(") + '''

def run_ppo(config, task_runner_class=None):
    import pathlib

    from omegaconf import OmegaConf

    _start_ray(config, task_runner_class)
    ray.trained.append(OmegaConf.to_container(config))
    if config.trainer.total_epochs == 0:  # the test's way to train without saving
        return
    root = pathlib.Path(config.trainer.default_local_dir)
    hf = root / "global_step_3" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    (root / "latest_checkpointed_iteration.txt").write_text("3")
'''

RAY = '''
calls = []
trained = []
events = None  # the test's recorder
task_runner = None
from_run_ppo = False


def is_initialized():
    return bool(calls)


def init(**kwargs):
    calls.append(dict(kwargs, _from_run_ppo=from_run_ppo))
    events.append(("ray.init",))


def shutdown():
    events.append(("ray.shutdown",))
'''


@pytest.fixture
def pipeline(tmp_path, monkeypatch):
    """Render the pipeline with `options` into tmp_path/project and run it with `argv`."""
    def run(options: dict, argv: list[str]):
        rendered = render("pipeline", schemas()["pipeline"].validate(options))
        tree = ast.parse(rendered.main)
        overrides = next(ast.literal_eval(s.value) for s in tree.body if isinstance(s, ast.Assign)
                         and getattr(s.targets[0], "id", "") == "OVERRIDES")
        _fake_verl(tmp_path, overrides)
        (tmp_path / "verl" / "trainer" / "main_ppo.py").write_text(TRAINER)
        (tmp_path / "ray.py").write_text(RAY)
        monkeypatch.syspath_prepend(str(tmp_path))
        for name in [m for m in sys.modules if m in ("ray", "verl") or m.startswith("verl.")]:
            monkeypatch.delitem(sys.modules, name)  # the previous run's stand-ins too
        recorder = Recorder()
        _stub_agent_packages(monkeypatch, recorder)
        import ray

        ray.events = recorder.events
        project = tmp_path / "project"
        project.mkdir(exist_ok=True)
        script = project / "pipeline.py"
        script.write_text(rendered.main)
        for name, text in (rendered.companions or {}).items():
            (project / name).write_text(text)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "argv", [str(script), *argv])
        runpy.run_path(str(script), run_name="__main__")
        return recorder, ray
    return run


def _stub_agent_packages(monkeypatch, recorder):
    keep_env(monkeypatch)

    def read_parquet(path):
        rows = [{"prompt": [{"role": "user", "content": "84"}], "data_source": "gsm8k",
                 "reward_model": {"ground_truth": "84"}}]
        return types.SimpleNamespace(head=lambda n: types.SimpleNamespace(to_dict=lambda orient: rows[:n]))

    stubs = {
        "vllm": {"LLM": lambda **kw: FakeLLM(recorder, **kw), "SamplingParams": lambda **kw: kw},
        "verl.tools": {},
        "verl.tools.function_tool": function_tool_module(),
        "pandas": {"read_parquet": read_parquet},
    }
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)


def test_the_generated_pipeline_trains_the_agent_reloads_its_engine_and_evaluates(pipeline, tmp_path):
    recorder, ray = pipeline({"save_freq": 5}, ["actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2"])
    config = ray.trained[0]
    rollout = config["actor_rollout_ref"]["rollout"]
    project = tmp_path / "project"
    assert rollout["multi_turn"]["function_tool_path"] == str(project / "agent_tools.py")
    assert config["reward"]["custom_reward_function"]["path"] == str(project / "agent_reward.py")
    assert rollout["agent"]["default_agent_loop"] == "tool_agent" and rollout["multi_turn"]["max_assistant_turns"] == 2
    assert ray.calls[0]["resources"] == {"NPU": 8} and ray.calls[0]["_from_run_ppo"]  # VERL started Ray
    env = ray.calls[0]["runtime_env"]["env_vars"]
    assert env["HCCL_CONNECT_TIMEOUT"] and env["TOKENIZERS_PARALLELISM"] == "true"  # ours over VERL's defaults
    steps = [e[0] for e in recorder.events]
    # The engine answers the probe, sleeps through training, and reloads the new checkpoint without a rebuild.
    assert steps[:6] == ["LLM", "generate", "sleep", "ray.init", "ray.shutdown", "wake_up"]
    assert steps[6:10] == ["collective_rpc", "wake_up", "reset_prefix_cache", "generate"] and steps.count("LLM") == 1
    weights = Path(config["trainer"]["default_local_dir"]) / "global_step_3" / "actor" / "huggingface"
    assert ("collective_rpc", [str(weights)]) in recorder.events
    weights = tmp_path / weights  # relative to the working folder, as VERL saves it
    result = json.loads((weights.parent.parent / "agent_eval.json").read_text())
    assert result["samples"] == 1 and result["mean_score"] == 1.0
    assert [e[2] for e in recorder.events if e[0] == "chat"][0] == ["calculator"]


def test_a_run_that_saves_nothing_stops_with_the_reason(pipeline):
    with pytest.raises(SystemExit, match="training wrote no checkpoint"):
        pipeline({}, ["trainer.total_epochs=0"])
    with pytest.raises(SystemExit, match=r"trainer.save_freq=-1: the pipeline hands the trained weights"):
        pipeline({}, ["trainer.save_freq=-1"])

"""The generated adapter on a real accelerator with a tiny model: skipped unless asked for.

    NPU_PORT_DEVICE_TESTS=1 NPU_PORT_TINY_MODEL=/models/Qwen2.5-0.5B-Instruct python -m pytest -q tests/test_generate_on_device.py

On an Ascend host (CANN, torch_npu, vllm + vllm-ascend of the version set) this runs vLLM on the NPU; on a
GPU host the same code runs on CUDA (the adapter is the GPU code, vllm-ascend only plugs in). It builds
the engine with sleep mode, answers, sleeps, has the engine reload the weights (the model's own folder
stands for a checkpoint) and answers again without a rebuild; then the generated pipeline's half after
training (reload hand-off from a VERL checkpoint folder, the agent loop with the sample tools and reward,
agent_eval.json). The CPU tests inject the engine instead.
"""

from __future__ import annotations

import os
import sys
import types

import pytest

from npu_port.transpiler.generate.render import render, schemas

MODEL = os.environ.get("NPU_PORT_TINY_MODEL", "")
pytestmark = pytest.mark.skipif(
    not (os.environ.get("NPU_PORT_DEVICE_TESTS") and os.path.isfile(os.path.join(MODEL, "config.json"))),
    reason="needs an accelerator with vLLM: set NPU_PORT_DEVICE_TESTS=1 and NPU_PORT_TINY_MODEL to a local model folder")


def test_reload_hand_off_on_a_real_engine(monkeypatch):
    pytest.importorskip("vllm")
    values = schemas()["vllm-infer"].validate({"model_path": MODEL, "gpu_memory_utilization": 0.3,
                                               "max_model_len": 512, "max_tokens": 8, "temperature": 0.0})
    module = types.ModuleType("generated_adapter_on_device")
    module.__file__ = "generated_adapter_on_device.py"
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(render("vllm-infer", values).main, module.__file__, "exec"), module.__dict__)
    adapter = module.VLLMAdapter(enable_sleep_mode=True)
    try:
        before = adapter.generate("The capital of France is")
        engine = adapter.engine
        adapter.sleep()
        assert adapter.hand_off_weights(MODEL) == "reloaded"
        after = adapter.generate("The capital of France is")
        assert adapter.engine is engine  # not rebuilt
        assert after == before  # the same weights came back: greedy decoding gives the same text
    finally:
        adapter.close()


def test_the_pipeline_serves_hands_off_and_evaluates_the_agent_on_a_real_engine(monkeypatch, tmp_path):
    """The pipeline's half after training, for real: the agent's engine sleeps, the "checkpoint" (a VERL
    checkpoint folder whose Hugging Face copy is the tiny model) is reloaded into the running engine, and the agent loop with
    the sample tools and reward answers two rows into agent_eval.json. Training itself is VERL's."""
    pytest.importorskip("vllm")
    pytest.importorskip("verl.tools.function_tool")
    values = schemas()["pipeline"].validate({"model_path": MODEL, "inference_memory_utilization": 0.3,
                                             "max_model_len": 1024, "max_tokens": 64, "temperature": 0.0})
    rendered = render("pipeline", values)
    for name, text in (rendered.companions or {}).items():
        (tmp_path / name).write_text(text)
    module = types.ModuleType("generated_pipeline_on_device")
    module.__file__ = str(tmp_path / "pipeline.py")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(rendered.main, module.__file__, "exec"), module.__dict__)
    step = tmp_path / "checkpoints" / "global_step_1" / "actor"
    step.mkdir(parents=True)
    (step / "huggingface").symlink_to(MODEL, target_is_directory=True)
    (tmp_path / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")
    adapter = module.VLLMAdapter(gpu_memory_utilization=0.3, enable_sleep_mode=True)
    try:
        adapter.generate(module.PROBE_PROMPT)
        engine = adapter.engine
        adapter.sleep()
        weights, how = module.hand_off_checkpoint(adapter, str(tmp_path / "checkpoints"))
        assert how == "reloaded" and adapter.engine is engine
        rows = [{"prompt": [{"role": "user", "content": "What is 12 * 7? Use the calculator, then answer as #### N."}],
                 "data_source": "gsm8k", "reward_model": {"ground_truth": "84"}}] * 2
        summary = module.evaluate_agent(module.make_agent_loop(adapter, str(tmp_path / "agent_tools.py")), rows,
                                        module.eval_path(weights), module.reward_function(str(tmp_path / "agent_reward.py")))
        assert summary["samples"] == 2 and all(0.0 <= r["score"] <= 1.0 for r in summary["results"])
        assert (step.parent / "agent_eval.json").is_file()
    finally:
        adapter.close()

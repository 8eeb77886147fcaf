"""The generated adapter on a real accelerator with a tiny model: skipped unless asked for.

    NPU_PORT_DEVICE_TESTS=1 NPU_PORT_TINY_MODEL=/models/Qwen2.5-0.5B-Instruct python -m pytest -q tests/test_generate_on_device.py

On an Ascend host (CANN, torch_npu, vllm + vllm-ascend of the version set) this runs vLLM on the NPU; on a
GPU host the same code runs on CUDA (the adapter is the GPU code, vllm-ascend only plugs in). It builds
the engine with sleep mode, answers, sleeps, hands the weights over in place (the model's own folder
stands for a checkpoint) and answers again without a rebuild. The CPU tests inject the engine instead.
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


def test_in_place_hand_off_on_a_real_engine(monkeypatch):
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
        assert adapter.hand_off_weights(MODEL) == "in-place"
        after = adapter.generate("The capital of France is")
        assert adapter.engine is engine  # not rebuilt
        assert after == before  # the same weights came back: greedy decoding gives the same text
    finally:
        adapter.close()

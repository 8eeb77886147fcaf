"""The generated adapter's own logic, run on CPU with a fake engine (vLLM itself needs NPUs or GPUs).

`vllm` is replaced in sys.modules by a stub whose SamplingParams records its keywords and whose LLM
must never be built; the engine is injected. The vLLM calls themselves are checked statically
against the real package by test_generate.py (conformance).
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass, field

import pytest

from npu_port.transpiler.generate.render import render, schemas


class StubSamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class ForbiddenLLM:
    def __init__(self, **kwargs):
        raise AssertionError(f"the test must inject an engine; the real LLM was built with {kwargs!r}")


@dataclass
class Completion:
    text: str


@dataclass
class RequestOutput:
    request_id: str
    outputs: list


@dataclass
class FakeEngine:
    """Answers each prompt with its upper-cased text and records every call."""
    calls: list = field(default_factory=list)
    drop_one: bool = False

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True):
        self.calls.append(("generate", list(prompts), sampling_params, use_tqdm))
        outs = [RequestOutput(str(i), [Completion(p.upper())]) for i, p in enumerate(prompts)]
        return outs[:-1] if self.drop_one else outs

    def chat(self, messages, sampling_params=None, use_tqdm=True, tools=None):
        self.calls.append(("chat", messages, sampling_params, use_tqdm))
        return [RequestOutput("c", [Completion("reply to " + messages[-1]["content"])])]

    # vLLM's sleep mode and RPC to the workers, recorded (LLM.sleep, wake_up, collective_rpc, reset_prefix_cache).
    def sleep(self, level=1):
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tags))

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        worker = FakeWorker()
        method(worker, *args, **(kwargs or {}))
        self.calls.append(("collective_rpc", worker.loaded))
        return [None]

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))


class FakeWorker:
    """A vLLM worker as collective_rpc hands it to the callable: its model runner reloads weights."""

    def __init__(self):
        self.loaded = []
        worker = self

        class Runner:
            model_config = types.SimpleNamespace(model="base")

            def reload_weights(self, weights_path=None):
                worker.loaded.append(weights_path or self.model_config.model)

        self.model_runner = Runner()


def load_generated(kind: str, monkeypatch, **options) -> types.ModuleType:
    vllm = types.ModuleType("vllm")
    vllm.LLM = ForbiddenLLM
    vllm.SamplingParams = StubSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    for name in ("ray", "hydra", "omegaconf", "verl", "verl.trainer", "verl.trainer.main_ppo",
                 "verl.trainer.ppo", "verl.trainer.ppo.utils", "verl.tools", "verl.tools.function_tool"):
        if kind == "pipeline":
            stub = types.ModuleType(name)
            stub.__getattr__ = lambda attr: object  # any imported name exists
            monkeypatch.setitem(sys.modules, name, stub)
    source = render(kind, schemas()[kind].validate(options)).main
    module = types.ModuleType(f"generated_{kind.replace('-', '_')}")
    module.__file__ = f"/generated/{kind}.py"
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look their module up
    exec(compile(source, module.__name__, "exec"), module.__dict__)
    return module


@pytest.fixture
def adapter_module(monkeypatch):
    return load_generated("vllm-infer", monkeypatch, max_batch_size=3, temperature=0.2, top_k=-1)


def test_batch_splits_into_chunks_and_keeps_order(adapter_module):
    engine = FakeEngine()
    adapter = adapter_module.VLLMAdapter(engine=engine)
    prompts = [f"p{i}" for i in range(7)]
    assert adapter.batch(prompts) == [p.upper() for p in prompts]
    assert [len(c[1]) for c in engine.calls] == [3, 3, 1]
    assert all(c[3] is False for c in engine.calls)  # no progress bars inside an agent loop


def test_sampling_settings_become_sampling_params(adapter_module):
    engine = FakeEngine()
    adapter = adapter_module.VLLMAdapter(engine=engine)
    adapter.generate("q")
    params = engine.calls[0][2].kwargs
    assert params == {"temperature": 0.2, "top_p": 0.95, "top_k": -1, "max_tokens": 512, "stop": None,
                      "seed": None}
    custom = adapter_module.SamplingSettings(temperature=0.0, top_k=0, max_tokens=8, stop=("\n",), seed=3)
    adapter.generate("q", custom)
    assert engine.calls[1][2].kwargs == {"temperature": 0.0, "top_p": 0.95, "top_k": -1, "max_tokens": 8,
                                         "stop": ["\n"], "seed": 3}


@pytest.mark.parametrize("kwargs", [{"temperature": -1}, {"top_p": 0}, {"top_p": 1.5}, {"top_k": -2},
                                    {"max_tokens": 0}, {"stop": "abc"}])
def test_bad_sampling_settings_raise(adapter_module, kwargs):
    with pytest.raises(adapter_module.AdapterError):
        adapter_module.SamplingSettings(**kwargs)


def test_chat_formats_and_validates_messages(adapter_module):
    engine = FakeEngine()
    adapter = adapter_module.VLLMAdapter(engine=engine)
    reply = adapter.chat([{"role": "system", "content": "be brief", "name": "x"}, {"role": "user", "content": "hi"}])
    assert reply == "reply to hi"
    assert engine.calls[0][1] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    for bad in ([], [{"role": "robot", "content": "x"}], [{"role": "user"}], ["hi"]):
        with pytest.raises(adapter_module.AdapterError):
            adapter.chat(bad)


def test_engine_errors_are_reported(adapter_module):
    adapter = adapter_module.VLLMAdapter(engine=FakeEngine(drop_one=True))
    with pytest.raises(adapter_module.AdapterError, match="2 results for 3 prompts"):
        adapter.batch(["a", "b", "c"])
    with pytest.raises(adapter_module.AdapterError, match="not one string"):
        adapter.batch("abc")
    with pytest.raises(adapter_module.AdapterError, match="prompt 1"):
        adapter.batch(["a", 2])
    with pytest.raises(adapter_module.AdapterError):
        adapter_module.VLLMAdapter(engine=FakeEngine(), max_batch_size=0)
    with pytest.raises(adapter_module.AdapterError):
        adapter_module.VLLMAdapter(engine=FakeEngine(), gpu_memory_utilization=1.5)


def test_reload_weights_rebuilds_the_engine_from_the_new_directory(adapter_module, tmp_path):
    built = []

    def factory(model):
        built.append(model)
        return FakeEngine()

    adapter = adapter_module.VLLMAdapter("base-model", engine_factory=factory)
    adapter.generate("x")
    with pytest.raises(adapter_module.AdapterError, match="config.json"):
        adapter.reload_weights(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    adapter.reload_weights(str(tmp_path))
    adapter.generate("y")
    assert built == ["base-model", str(tmp_path)]


def test_parallel_settings_reach_the_engine_constructor(monkeypatch):
    module = load_generated("vllm-infer", monkeypatch, tensor_parallel_size=4, pipeline_parallel_size=2,
                            distributed_executor_backend="ray")
    captured = {}

    class RecordingLLM:
        def __init__(self, **kwargs):
            captured.update(kwargs)

    module.LLM = RecordingLLM
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "")  # absent here, restored at teardown
    monkeypatch.delenv("VLLM_ALLOW_INSECURE_SERIALIZATION")
    _ = module.VLLMAdapter("m").engine
    assert captured["tensor_parallel_size"] == 4 and captured["pipeline_parallel_size"] == 2
    assert "VLLM_ALLOW_INSECURE_SERIALIZATION" not in os.environ  # only the reload hand-off needs it
    assert captured["distributed_executor_backend"] == "ray"
    assert "device" not in captured and "npu_memory_utilization" not in captured


def test_openai_server_adapter_over_a_fake_transport(adapter_module):
    sent = []

    def transport(path, payload):
        sent.append((path, payload))
        if path == "/completions":
            return {"choices": [{"index": i, "text": p[::-1]} for i, p in reversed(list(enumerate(payload["prompt"])))]}
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}

    client = adapter_module.OpenAIServerAdapter("http://h:8000/v1/", "m", transport=transport)
    assert client.batch(["ab", "cd", "ef", "gh"]) == ["ba", "dc", "fe", "hg"]
    assert [len(p["prompt"]) for _, p in sent] == [3, 1]
    assert sent[0][1]["temperature"] == 0.2 and "top_k" not in sent[0][1]
    assert client.chat([{"role": "user", "content": "hi"}]) == "ok"
    assert sent[-1][0] == "/chat/completions" and sent[-1][1]["messages"] == [{"role": "user", "content": "hi"}]
    assert client.base_url == "http://h:8000/v1"
    bad = adapter_module.OpenAIServerAdapter(transport=lambda p, b: {"error": "overloaded"})
    with pytest.raises(adapter_module.AdapterError, match="expected 1 choices"):
        bad.generate("x")


def test_openai_http_errors_become_adapter_errors(adapter_module):
    client = adapter_module.OpenAIServerAdapter("http://127.0.0.1:9", timeout=2)
    with pytest.raises(adapter_module.AdapterError, match="failed"):
        client.generate("x")


def test_pipeline_hands_the_newest_checkpoint_to_the_adapter(monkeypatch, tmp_path):
    module = load_generated("pipeline", monkeypatch)
    assert module.latest_checkpoint(str(tmp_path)) is None
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("40\n")
    assert module.latest_checkpoint(str(tmp_path)) is None  # recorded but the folder is missing
    hf = tmp_path / "global_step_40" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    assert module.latest_checkpoint(str(tmp_path)) == str(tmp_path / "global_step_40")
    built = []
    adapter = module.VLLMAdapter("base", engine_factory=lambda m: built.append(m) or FakeEngine())
    assert module.hand_off_checkpoint(adapter, str(tmp_path)) == (str(hf), "loaded")  # no engine yet: built from disk
    adapter.generate("x")
    assert built == [str(hf)]
    assert module.OVERRIDES["actor_rollout_ref.actor.checkpoint.save_contents"][-1] == "hf_model"


def test_no_checkpoint_is_a_clear_error(monkeypatch, tmp_path):
    module = load_generated("pipeline", monkeypatch)
    with pytest.raises(SystemExit, match=r"training wrote no checkpoint .*save_freq must be >= 1"):
        module.hand_off_checkpoint(module.VLLMAdapter("base", engine=FakeEngine()), str(tmp_path))


def test_the_running_engine_reloads_the_checkpoint_without_a_rebuild(monkeypatch, tmp_path):
    module = load_generated("vllm-infer", monkeypatch, vllm_version="0.23.0")
    (tmp_path / "config.json").write_text("{}")
    engine = FakeEngine()
    built = []
    adapter = module.VLLMAdapter("base", engine_factory=lambda m: built.append(m) or engine, enable_sleep_mode=True)
    adapter.generate("x")
    adapter.sleep()
    assert adapter.hand_off_weights(str(tmp_path)) == "reloaded"
    steps = [c[0] for c in engine.calls if c[0] != "generate"]
    assert steps == ["sleep", "wake_up", "collective_rpc", "wake_up", "reset_prefix_cache"]
    assert ("collective_rpc", [str(tmp_path)]) in engine.calls  # every worker loaded the new folder
    assert ("wake_up", ["weights"]) in engine.calls and ("sleep", 2) in engine.calls
    adapter.generate("y")
    assert built == ["base"]  # never rebuilt


def test_on_vllm_0_11_the_engine_is_rebuilt_on_the_checkpoint_and_says_so(monkeypatch, tmp_path):
    """vllm-ascend 0.11's NPUModelRunner has no reload_weights: no reload is tried, the engine is rebuilt."""
    module = load_generated("vllm-infer", monkeypatch, vllm_version="0.11.0")
    assert not hasattr(module, "_reload_weights_from_checkpoint")
    (tmp_path / "config.json").write_text("{}")
    engine = FakeEngine()
    built = []
    adapter = module.VLLMAdapter("base", engine_factory=lambda m: built.append(m) or engine)
    adapter.generate("x")
    assert adapter.hand_off_weights(str(tmp_path)) == "rebuilt"
    adapter.generate("y")
    assert built == ["base", str(tmp_path)] and not [c for c in engine.calls if c[0] == "collective_rpc"]


def test_a_failed_reload_falls_back_to_a_rebuild_on_the_checkpoint(adapter_module, tmp_path):
    (tmp_path / "config.json").write_text("{}")

    class NoRpc(FakeEngine):
        def collective_rpc(self, *args, **kwargs):
            raise AttributeError("NPUWorker has no reload_weights")

    built = []
    adapter = adapter_module.VLLMAdapter("base", engine_factory=lambda m: built.append(m) or NoRpc())
    adapter.generate("x")
    assert adapter.hand_off_weights(str(tmp_path)) == "rebuilt"
    adapter.generate("y")
    assert built == ["base", str(tmp_path)]


class ScriptedEngine(FakeEngine):
    """Replies from a script: first a hermes tool call, then an answer that uses the tool's result."""

    def __init__(self, replies):
        super().__init__()
        self.replies = list(replies)
        self.seen_tools = []

    def chat(self, messages, sampling_params=None, use_tqdm=True, tools=None):
        self.seen_tools.append(tools)
        self.calls.append(("chat", [dict(m) for m in messages]))
        return [RequestOutput("c", [Completion(self.replies.pop(0))])]


def test_agent_loop_calls_tools_and_the_evaluation_is_written(monkeypatch, tmp_path):
    module = load_generated("pipeline", monkeypatch)
    engine = ScriptedEngine(['<tool_call>{"name": "calculator", "arguments": {"expression": "12 * 7"}}</tool_call>',
                             "The answer is #### 84"])
    adapter = module.VLLMAdapter("base", engine=engine)
    tools = {"calculator": lambda expression: str(eval(expression, {"__builtins__": {}}))}  # the test's own tool
    loop = module.AgentLoop(adapter, tools, tool_schemas=[{"type": "function"}], max_turns=3)
    conversation, response = loop.run([{"role": "user", "content": "12 * 7?"}])
    assert [m["role"] for m in conversation] == ["user", "assistant", "tool", "assistant"]
    assert conversation[2]["content"] == "84" and response.endswith("#### 84")
    assert engine.seen_tools == [[{"type": "function"}]] * 2  # the schemas reach the chat template
    assert "error: no tool 'nope'" in loop.call_tool('{"name": "nope", "arguments": {}}')
    assert loop.call_tool("not json").startswith("error: not a tool call")

    reward = types.ModuleType("agent_reward")
    source = render("pipeline", schemas()["pipeline"].validate({})).companions["agent_reward.py"]
    exec(compile(source, "agent_reward.py", "exec"), reward.__dict__)
    monkeypatch.setattr(module, "load_agent_file", lambda path: reward)
    engine.replies = ["#### 84", "#### 5"]
    rows = [{"prompt": [{"role": "user", "content": "a"}], "data_source": "gsm8k",
             "reward_model": {"ground_truth": "84"}},
            {"prompt": [{"role": "user", "content": "b"}], "data_source": "gsm8k",
             "reward_model": {"ground_truth": "6"}}]
    out = tmp_path / "global_step_5" / "agent_eval.json"
    out.parent.mkdir()
    summary = module.evaluate_agent(loop, rows, str(out), module.reward_function("agent_reward.py"), "test.parquet")
    assert summary["mean_score"] == 0.5 and summary["samples"] == 2
    import json

    assert json.loads(out.read_text())["results"][0]["score"] == 1.0


def test_the_sample_tool_computes_and_refuses_code(monkeypatch):
    tools_source = render("pipeline", schemas()["pipeline"].validate({})).companions["agent_tools.py"]
    stub = types.ModuleType("verl.tools.function_tool")
    stub.function_tool = lambda fn: fn  # verl's decorator registers; here it only returns the function
    monkeypatch.setitem(sys.modules, "verl.tools.function_tool", stub)
    monkeypatch.setitem(sys.modules, "verl.tools", types.ModuleType("verl.tools"))
    module = types.ModuleType("agent_tools")
    exec(compile(tools_source, "agent_tools.py", "exec"), module.__dict__)
    assert module.TOOLS["calculator"]("(12 + 7) * 3") == "57"
    assert module.TOOLS["calculator"]("2 / 4") == "0.5"
    assert module.calculator("__import__('os').system('x')").startswith("error:")
    assert module.calculator("1 / 0").startswith("error:")


def test_the_agent_loop_runs_over_any_base_agent_adapter(monkeypatch):
    """The agent code calls the BaseAgentAdapter interface: the same loop over an OpenAI-compatible server."""
    module = load_generated("pipeline", monkeypatch)
    replies = ['<tool_call>{"name": "add", "arguments": "{\\"a\\": 2, \\"b\\": 3}"}</tool_call>', "#### 5"]
    sent = []

    def transport(path, payload):
        sent.append(payload)
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": replies.pop(0)}}]}

    server = module.OpenAIServerAdapter("http://h:8000/v1", "m", transport=transport)
    loop = module.AgentLoop(server, {"add": lambda a, b: a + b}, tool_schemas=[{"type": "function"}])
    conversation, response = loop.run([{"role": "user", "content": "2 + 3?"}])
    assert conversation[2] == {"role": "tool", "content": "5"} and response.endswith("#### 5")
    assert sent[0]["tools"] == [{"type": "function"}] and sent[1]["messages"][-1]["role"] == "tool"


def test_the_reloading_engine_may_receive_the_reload_function(monkeypatch):
    """vLLM's engine process refuses a function in collective_rpc unless VLLM_ALLOW_INSECURE_SERIALIZATION
    is set when it starts (vllm/v1/serial_utils.py): the engine built for the reload hand-off has it."""
    module = load_generated("vllm-infer", monkeypatch)
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "")  # so that teardown removes what the adapter sets
    monkeypatch.delenv("VLLM_ALLOW_INSECURE_SERIALIZATION")
    seen = {}

    class RecordingLLM:
        def __init__(self, **kwargs):
            seen.update(kwargs, env=os.environ.get("VLLM_ALLOW_INSECURE_SERIALIZATION"))

    module.LLM = RecordingLLM
    _ = module.VLLMAdapter("m", enable_sleep_mode=True).engine
    assert seen["enable_sleep_mode"] is True and seen["env"] == "1"

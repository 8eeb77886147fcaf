"""`npu-port weave --agent-loop` run on CPU: the woven VERL launcher runs for real under Hydra (its own
config folder, the command line's overrides), with the trainer and the vLLM engine injected.

`verl.trainer.main_ppo.run_ppo` is a stand-in trainer that records the config it is given and writes a
checkpoint the way VERL lays it out (latest_checkpointed_iteration.txt, global_step_N/actor/huggingface);
`vllm.LLM` is a scripted engine that records sleep / wake_up / collective_rpc; `verl.tools.function_tool`
registers tools as verl 0.9.1 does. Nothing of the real VERL or vLLM is imported.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import types
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from verl_tool_stubs import function_tool_module

from npu_port.transpiler.cli import cli
from npu_port.transpiler.generate.weave import AgentOptions, WeaveError, weave

pytest.importorskip("hydra")
pytest.importorskip("omegaconf")

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "fixtures" / "weave" / "agent_loop" / "verl_hydra_main.input.py"

# The sections of VERL's ppo_trainer.yaml the woven code reads or sets, with VERL's defaults.
CONFIG = {
    "data": {"val_files": "data/test.parquet", "return_raw_chat": False},
    "actor_rollout_ref": {
        "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"},
        "actor": {"checkpoint": {"save_contents": ["model", "optimizer", "extra"]}},
        "rollout": {"multi_turn": {"enable": False, "format": "hermes", "max_assistant_turns": None,
                                   "function_tool_path": None, "tool_config_path": None},
                    "agent": {"default_agent_loop": "single_turn_agent", "agent_loop_config_path": None}},
    },
    "reward": {"custom_reward_function": {"path": None, "name": "compute_score"}},
    "custom_reward_function": {"path": None, "name": "compute_score"},
    "trainer": {"device": "cuda", "save_freq": 2, "default_local_dir": "checkpoints/agent"},
}


class Recorder:
    def __init__(self):
        self.events = []
        self.configs = []
        self.write_checkpoint = True


def keep_env(monkeypatch) -> None:
    """What the adapter sets in os.environ before building an engine is undone after the test."""
    for name in ("VLLM_ALLOW_INSECURE_SERIALIZATION", "VLLM_WORKER_MULTIPROC_METHOD"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


class FakeLLM:
    """vllm.LLM as the adapter drives it: answers with a tool call, then with the tool's result."""

    def __init__(self, recorder, **kwargs):
        self.recorder = recorder
        recorder.events.append(("LLM", kwargs["model"], kwargs["enable_sleep_mode"]))
        # The reload hand-off's function reaches vLLM's engine process only with this set at start.
        assert os.environ.get("VLLM_ALLOW_INSECURE_SERIALIZATION") == ("1" if kwargs["enable_sleep_mode"] else None)
        self.turn = 0

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        self.recorder.events.append(("generate", list(prompts)))
        return [types.SimpleNamespace(request_id=str(i), outputs=[types.SimpleNamespace(text="84")])
                for i, _ in enumerate(prompts)]

    def chat(self, messages, sampling_params=None, use_tqdm=True, tools=None):
        self.recorder.events.append(("chat", len(messages), [t["function"]["name"] for t in tools or []]))
        self.turn += 1
        text = ('<tool_call>{"name": "calculator", "arguments": {"expression": "12 * 7"}}</tool_call>'
                if self.turn % 2 else f"#### {messages[-1]['content']}")
        return [types.SimpleNamespace(request_id="0", outputs=[types.SimpleNamespace(text=text)])]

    def sleep(self, level=1):
        self.recorder.events.append(("sleep", level))

    def wake_up(self, tags=None):
        self.recorder.events.append(("wake_up", tags))

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        loaded = []
        runner = types.SimpleNamespace(model_config=types.SimpleNamespace(model="base"),
                                       reload_weights=lambda weights_path=None: loaded.append(weights_path))
        method(types.SimpleNamespace(model_runner=runner), *args, **(kwargs or {}))
        self.recorder.events.append(("collective_rpc", loaded))
        return [None]

    def reset_prefix_cache(self):
        self.recorder.events.append(("reset_prefix_cache",))


def _stub_packages(monkeypatch, recorder):
    from omegaconf import OmegaConf

    keep_env(monkeypatch)

    def module(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, mod)
        return mod

    def run_ppo(config, task_runner_class=None):
        recorder.events.append(("run_ppo",))
        recorder.configs.append(OmegaConf.to_container(config))
        if not recorder.write_checkpoint:
            return
        root = Path(config.trainer.default_local_dir)
        hf = root / "global_step_2" / "actor" / "huggingface"
        hf.mkdir(parents=True)
        (hf / "config.json").write_text("{}")
        (root / "latest_checkpointed_iteration.txt").write_text("2")

    def read_parquet(path):
        rows = [{"prompt": [{"role": "user", "content": "84"}], "data_source": "gsm8k",
                 "reward_model": {"ground_truth": "84"}, "file": path},
                {"prompt": [{"role": "user", "content": "5"}], "data_source": "gsm8k",
                 "reward_model": {"ground_truth": "6"}, "file": path}]
        return types.SimpleNamespace(head=lambda n: types.SimpleNamespace(to_dict=lambda orient: rows[:n]))

    module("vllm", LLM=lambda **kw: FakeLLM(recorder, **kw), SamplingParams=lambda **kw: kw)
    module("ray", is_initialized=lambda: True, shutdown=lambda: recorder.events.append(("ray.shutdown",)))
    module("verl")
    module("verl.trainer")
    module("verl.trainer.main_ppo", run_ppo=run_ppo, TaskRunnerV1=object)
    module("verl.tools")
    module("verl.tools.function_tool", **function_tool_module())
    module("pandas", read_parquet=read_parquet)


def _project(tmp_path: Path, config=None, **agent) -> Path:
    """The launcher woven into tmp_path/project, with the samples and its Hydra config folder."""
    project = tmp_path / "project"
    (project / "config").mkdir(parents=True)
    result = weave(LAUNCHER.read_text(), agent=AgentOptions(**agent))
    (project / "launcher.py").write_text(result.source)
    for name, text in result.companions.items():
        (project / name).write_text(text)
    (project / "config" / "ppo_trainer.yaml").write_text(yaml.safe_dump(config or CONFIG))
    return project / "launcher.py"


def _run(monkeypatch, tmp_path, script: Path, *overrides: str) -> Recorder:
    recorder = Recorder()
    _stub_packages(monkeypatch, recorder)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "hydra.run.dir=.", "hydra.output_subdir=null", *overrides])
    runpy.run_path(str(script), run_name="__main__")
    return recorder


def test_the_agent_trains_in_the_loop_then_its_engine_reloads_and_evaluates(monkeypatch, tmp_path):
    script = _project(tmp_path)
    recorder = _run(monkeypatch, tmp_path, script, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3")
    config = recorder.configs[0]
    rollout = config["actor_rollout_ref"]["rollout"]
    # The agent inside the RL loop: VERL's tool agent loop with the tools and reward next to the script.
    assert rollout["multi_turn"]["enable"] is True and rollout["agent"]["default_agent_loop"] == "tool_agent"
    assert rollout["multi_turn"]["function_tool_path"] == str(script.parent / "agent_tools.py")
    assert config["reward"]["custom_reward_function"] == {"path": str(script.parent / "agent_reward.py"),
                                                          "name": "compute_score"}
    assert config["data"]["return_raw_chat"] is True
    assert rollout["multi_turn"]["max_assistant_turns"] == 3  # the command line's value is kept
    assert config["actor_rollout_ref"]["actor"]["checkpoint"]["save_contents"][-1] == "hf_model"
    assert config["trainer"]["device"] == "npu"  # the script's own code ran
    # The engine starts on the policy's model and sleeps through training; then it reloads the checkpoint.
    steps = [e[0] for e in recorder.events]
    assert steps[:4] == ["LLM", "sleep", "run_ppo", "ray.shutdown"]
    assert recorder.events[0] == ("LLM", "Qwen/Qwen2.5-0.5B-Instruct", True)
    weights = tmp_path / "checkpoints" / "agent" / "global_step_2" / "actor" / "huggingface"
    assert steps[4:8] == ["wake_up", "collective_rpc", "wake_up", "reset_prefix_cache"]
    assert ("collective_rpc", [str(weights)]) in recorder.events
    assert steps.count("LLM") == 1  # never rebuilt from disk
    # Evaluation by the same agent loop (the tool called, its schema offered), next to the checkpoint.
    chats = [e for e in recorder.events if e[0] == "chat"]
    assert chats[0][2] == ["calculator"] and len(chats) == 4
    result = json.loads((weights.parent.parent / "agent_eval.json").read_text())
    assert result["samples"] == 2 and result["mean_score"] == 0.5 and result["eval_files"] == "data/test.parquet"
    assert "84" in result["results"][0]["response"]  # the tool's answer is in the response


def test_a_config_with_its_own_reward_keeps_it_and_disk_hand_off(monkeypatch, tmp_path):
    config = json.loads(json.dumps(CONFIG))
    own = tmp_path / "my_reward.py"
    own.write_text("def score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    config["reward"]["custom_reward_function"] = {"path": str(own), "name": "score"}
    # A config with its own agent loops keeps its default one.
    config["actor_rollout_ref"]["rollout"]["agent"] = {"default_agent_loop": "my_agent",
                                                       "agent_loop_config_path": "agents.yaml"}
    script = _project(tmp_path, config, weight_handoff="disk", eval_files="data/held_out.parquet")
    recorder = _run(monkeypatch, tmp_path, script)
    assert recorder.configs[0]["reward"]["custom_reward_function"] == {"path": str(own), "name": "score"}
    assert recorder.configs[0]["actor_rollout_ref"]["rollout"]["agent"]["default_agent_loop"] == "my_agent"
    assert recorder.configs[0]["actor_rollout_ref"]["rollout"]["multi_turn"]["enable"] is True
    steps = [e[0] for e in recorder.events]
    assert steps.index("run_ppo") < steps.index("LLM")  # disk: the engine is built after training, on the checkpoint
    assert "sleep" not in steps and "collective_rpc" not in steps
    weights = tmp_path / "checkpoints" / "agent" / "global_step_2" / "actor" / "huggingface"
    assert recorder.events[steps.index("LLM")] == ("LLM", str(weights), False)
    result = json.loads((weights.parent.parent / "agent_eval.json").read_text())
    assert result["mean_score"] == 1.0 and result["eval_files"] == "data/held_out.parquet"


def test_save_freq_minus_one_stops_before_training(monkeypatch, tmp_path):
    script = _project(tmp_path)
    with pytest.raises(SystemExit, match=r"trainer.save_freq=-1: the trained weights reach the agent's engine"):
        _run(monkeypatch, tmp_path, script, "trainer.save_freq=-1")


def test_no_checkpoint_written_is_a_clear_error(monkeypatch, tmp_path):
    script = _project(tmp_path)
    recorder = Recorder()
    recorder.write_checkpoint = False
    _stub_packages(monkeypatch, recorder)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "hydra.run.dir=.", "hydra.output_subdir=null"])
    with pytest.raises(SystemExit, match="training wrote no checkpoint in .*checkpoints/agent"):
        runpy.run_path(str(script), run_name="__main__")
    assert ("run_ppo",) in recorder.events


# --- the command ------------------------------------------------------------------------------------------

def _weave(*args):
    return CliRunner().invoke(cli, ["weave", *map(str, args)])


def test_cli_writes_the_samples_next_to_the_output_and_keeps_edited_ones(tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER.read_text())
    out = tmp_path / "out" / "woven.py"
    out.parent.mkdir()
    result = _weave(script, "--agent-loop", "-o", out)
    assert result.exit_code == 0, result.output
    assert "1 run_ppo call(s) now train through with_agent_loop(config)" in result.output
    assert script.read_text() == LAUNCHER.read_text()  # the input is never modified
    assert {p.name for p in out.parent.iterdir()} == {"woven.py", "agent_tools.py", "agent_reward.py"}
    woven = out.read_text()
    again = _weave(out, "--agent-loop", "--in-place")
    assert again.exit_code == 0 and "unchanged" in again.output and out.read_text() == woven
    # The samples are the user's to edit: weaving again next to an edited one keeps it.
    (out.parent / "agent_tools.py").write_text("# mine\n")
    third = _weave(script, "--agent-loop", "-o", out)
    assert third.exit_code == 0 and "agent_tools.py: kept as it is" in third.output
    assert (out.parent / "agent_tools.py").read_text() == "# mine\n" and out.read_text() == woven


def test_cli_takes_the_users_own_tools_and_reward(tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER.read_text())
    (tmp_path / "agent").mkdir()
    tools = tmp_path / "agent" / "tools.py"
    tools.write_text("from verl.tools.function_tool import function_tool\n\n\n@function_tool\n"
                     "def search(query: str) -> str:\n    return query\n")
    reward = tmp_path / "agent" / "reward.py"
    reward.write_text("def judge(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n")
    out = tmp_path / "run" / "woven.py"
    out.parent.mkdir()
    result = _weave(script, "--agent-loop", "--tools", tools, "--reward", f"{reward}:judge", "-o", out,
                    "--agent-max-turns", "8")
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert f"'actor_rollout_ref.rollout.multi_turn.function_tool_path': {str(tools)!r}" in text.replace('"', "'")
    assert "REWARD_FUNCTION_NAME = 'judge'" in text and "AGENT_MAX_TURNS = 8" in text
    assert {p.name for p in out.parent.iterdir()} == {"woven.py"}  # no sample: the user's own files


def test_cli_writes_relative_paths_as_the_woven_script_sees_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("launcher.py").write_text(LAUNCHER.read_text())
    Path("agent").mkdir()
    Path("agent/tools.py").write_text("from verl.tools.function_tool import function_tool\n\n\n@function_tool\n"
                                      "def search(query: str) -> str:\n    return query\n")
    Path("run").mkdir()
    result = _weave("launcher.py", "--agent-loop", "--tools", "agent/tools.py", "-o", "run/woven.py")
    assert result.exit_code == 0, result.output
    assert "'actor_rollout_ref.rollout.multi_turn.function_tool_path': '../agent/tools.py'" in \
        Path("run/woven.py").read_text().replace('"', "'")
    assert sorted(p.name for p in Path("run").iterdir()) == ["agent_reward.py", "woven.py"]  # the reward sample only


@pytest.mark.parametrize("args,message", [
    (["--agent-loop"], "give -o FILE or --in-place"),
    (["--tools", "{tools}"], "--tools only go with --agent-loop"),
    (["--agent-loop", "--tools", "{bad_tools}", "-o", "{out}"], "no module-level @function_tool function"),
    (["--agent-loop", "--reward", "{reward}:nope", "-o", "{out}"], "no module-level function nope()"),
    (["--agent-loop", "--reward", "{missing}", "-o", "{out}"], "no such file"),
    (["--agent-loop", "--model-path", "/m", "-o", "{out}"], "--model-path: with --agent-loop"),
])
def test_cli_refusals(tmp_path, args, message):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER.read_text())
    (tmp_path / "tools.py").write_text("from verl.tools.function_tool import function_tool\n\n\n@function_tool\n"
                                       "def f(x: str) -> str:\n    return x\n")
    (tmp_path / "bad_tools.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "reward.py").write_text("def compute_score(*a):\n    return 0.0\n")
    paths = {k: tmp_path / v for k, v in (("tools", "tools.py"), ("bad_tools", "bad_tools.py"),
                                         ("reward", "reward.py"), ("missing", "missing.py"), ("out", "out.py"))}
    result = _weave(script, *[a.format(**paths) for a in args])
    assert result.exit_code != 0 and message in result.output, result.output
    assert not (tmp_path / "out.py").exists() and not (tmp_path / "agent_tools.py").exists()


def test_cli_diff_shows_the_samples_and_writes_nothing(tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER.read_text())
    result = _weave(script, "--agent-loop", "--diff")
    assert result.exit_code == 0, result.output
    assert "+    run_ppo(with_agent_loop(config), task_runner_class=TaskRunnerV1)" in result.output
    assert f"+++ b/{str(tmp_path / 'agent_tools.py').lstrip('/')}" in result.output and "+def compute_score(" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launcher.py"] and script.read_text() == LAUNCHER.read_text()


def test_a_script_woven_without_the_agent_loop_is_not_taken_for_one(tmp_path):
    plain = weave(LAUNCHER.read_text()).source
    with pytest.raises(WeaveError, match="already woven without --agent-loop"):
        weave(plain, agent=AgentOptions())
    assert weave(weave(LAUNCHER.read_text(), agent=AgentOptions()).source).changed is False


def test_cli_refuses_an_output_named_like_a_sample(tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER.read_text())
    result = _weave(script, "--agent-loop", "-o", tmp_path / "agent_tools.py")
    assert result.exit_code == 2 and "cannot take the name of a sample file" in result.output
    assert "woven vllm adapter" not in result.output and sorted(p.name for p in tmp_path.iterdir()) == ["launcher.py"]

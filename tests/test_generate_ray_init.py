"""The generated VERL scripts let VERL start Ray: every Ray setting they make reaches `ray.init`.

The generated train.py runs for real (Hydra's compose and OmegaConf on a config folder, the script's own
build_config and main), against a stand-in `verl` package written here in the shape of verl 0.9.1: a
packaged ppo_trainer.yaml with the sections run_ppo reads and a run_ppo that, like the real one, sets the
determinism and insight variables first and then calls `ray.init(**ray_kwargs.ray_init)` with the
runtime_env merged over its defaults. `ray` is a recorder. Nothing of the real VERL is imported.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from npu_port.transpiler.generate.contexts import nest
from npu_port.transpiler.generate.render import render, schemas

pytest.importorskip("hydra")
pytest.importorskip("omegaconf")

# run_ppo in the shape of verl 0.9.1's verl/trainer/main_ppo.py (what it does before and at ray.init).
MAIN_PPO = '''
import os

import ray
from omegaconf import OmegaConf


def get_ppo_ray_runtime_env(config=None):
    env_vars = {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN"}
    # verl forwards the variables run_ppo set just before (determinism) to every Ray actor.
    env_vars.update({k: v for k, v in os.environ.items() if k == "VERL_FULL_DETERMINISM"})
    return {"env_vars": env_vars}


def validate_config(config, use_reference_policy, use_critic):
    return None


def migrate_legacy_reward_impl(config):
    return config


def run_ppo(config, task_runner_class=None):
    if config.actor_rollout_ref.rollout.full_determinism:
        os.environ["VERL_FULL_DETERMINISM"] = "1"
    if "rl_insight" in (config.trainer.get("logger") or []):
        os.environ["VERL_RL_INSIGHT_ENABLE"] = "1"
    if not ray.is_initialized():
        ray_init_kwargs = config.ray_kwargs.get("ray_init", {})
        runtime_env = OmegaConf.merge(get_ppo_ray_runtime_env(config), ray_init_kwargs.get("runtime_env", {}))
        ray_init_kwargs = OmegaConf.create({**ray_init_kwargs, "runtime_env": runtime_env})
        ray.from_run_ppo = True
        ray.init(**OmegaConf.to_container(ray_init_kwargs))
    ray.task_runner = task_runner_class


class TaskRunnerV1:
    pass
'''

RAY = '''
calls = []
task_runner = None
from_run_ppo = False


def is_initialized():
    return bool(calls)


def init(**kwargs):
    calls.append(dict(kwargs, _from_run_ppo=from_run_ppo))
'''


def _fake_verl(root: Path, overrides: dict) -> None:
    """A `verl` package whose packaged ppo_trainer.yaml holds every key the script overrides."""
    config = nest(list(overrides.items()))
    config.setdefault("actor_rollout_ref", {}).setdefault("rollout", {})["full_determinism"] = False
    config["ray_kwargs"] = {"ray_init": {"num_cpus": None, "runtime_env": {"py_executable": None}},
                            "timeline_json_file": None}
    files = {
        "verl/__init__.py": "",
        "verl/trainer/__init__.py": "",
        "verl/trainer/config/__init__.py": "",
        "verl/trainer/config/ppo_trainer.yaml": yaml.safe_dump(config),
        "verl/trainer/main_ppo.py": MAIN_PPO,
        "verl/trainer/ppo/__init__.py": "",
        "verl/trainer/ppo/utils.py": "def need_critic(config):\n    return False\n\n\n"
                                     "def need_reference_policy(config):\n    return True\n",
        "ray.py": RAY,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def run_script(tmp_path, monkeypatch):
    """Render verl-train with `options`, run its main(argv) and return what reached ray.init."""
    def run(options: dict, argv: list[str]) -> tuple[dict, dict]:
        values = schemas()["verl-train"].validate(options)
        source = render("verl-train", values).main
        tree = ast.parse(source)
        overrides = next(ast.literal_eval(s.value) for s in tree.body if isinstance(s, ast.Assign)
                         and getattr(s.targets[0], "id", "") == "OVERRIDES")
        _fake_verl(tmp_path, overrides)
        monkeypatch.syspath_prepend(str(tmp_path))
        for name in [m for m in sys.modules if m == "ray" or m == "verl" or m.startswith("verl.")]:
            monkeypatch.delitem(sys.modules, name)
        namespace: dict = {"__name__": "generated_train"}
        exec(compile(source, "train.py", "exec"), namespace)
        namespace["main"](argv)
        import ray  # the recorder, imported by the script above

        assert len(ray.calls) == 1, ray.calls
        kwargs = dict(ray.calls[0])
        assert kwargs.pop("_from_run_ppo"), "Ray was started before VERL's run_ppo, which then skips its set-up"
        return kwargs, namespace
    return run


def test_every_ray_setting_reaches_ray_init(run_script, monkeypatch):
    monkeypatch.setenv("HCCL_CONNECT_TIMEOUT", "7200")  # a variable set in the shell wins
    monkeypatch.delenv("VERL_FULL_DETERMINISM", raising=False)
    kwargs, namespace = run_script({"nnodes": 1}, ["actor_rollout_ref.rollout.full_determinism=true"])
    assert kwargs["resources"] == {"NPU": 8} and "address" not in kwargs
    env = kwargs["runtime_env"]["env_vars"]
    for name, value in namespace["NPU_ENV_VARS"].items():
        assert env[name] == ("7200" if name == "HCCL_CONNECT_TIMEOUT" else value), name
    assert env["TOKENIZERS_PARALLELISM"] == "true"  # VERL's own defaults are kept, merged under ours
    assert kwargs["runtime_env"]["py_executable"] is None and kwargs["num_cpus"] is None
    # VERL's own start-up ran before Ray started: a setting that works only through run_ppo
    import os

    assert os.environ.get("VERL_FULL_DETERMINISM") == "1" and env["VERL_FULL_DETERMINISM"] == "1"
    monkeypatch.delenv("VERL_FULL_DETERMINISM")


def test_multi_node_joins_the_cluster_and_the_command_line_wins(run_script):
    kwargs, _ = run_script({"nnodes": 2}, ["trainer.total_epochs=1", "+ray_kwargs.ray_init.num_cpus=32"])
    assert kwargs["address"] == "auto"
    assert "resources" not in kwargs  # ray.init refuses resources when it joins a cluster
    assert kwargs["num_cpus"] == 32


def test_a_given_address_and_hydra_overrides(run_script):
    kwargs, _ = run_script({"nnodes": 2, "ray_address": "10.0.0.1:6379"},
                           ["++ray_kwargs.ray_init.address=10.0.0.2:6379"])
    assert kwargs["address"] == "10.0.0.2:6379"  # the command line wins over the generated value


def test_a_bad_override_is_refused(run_script):
    with pytest.raises(SystemExit, match="not a key=value override"):
        run_script({}, ["trainer.total_epochs"])


def test_legacy_trainer_also_reaches_ray_init(run_script):
    kwargs, _ = run_script({"verl_version": "0.8.0"}, [])
    assert kwargs["resources"] == {"NPU": 8}
    import ray

    assert ray.task_runner is None  # verl 0.8.0: run_ppo(config) picks its own TaskRunner


def test_the_stand_in_shape_matches_the_generated_keys():
    # The fake config must hold ray_kwargs exactly where VERL's packaged config has it.
    from npu_port.transpiler.tables import api_facts

    keys = api_facts.load("verl").config_keys("ppo_trainer")
    for key in ("ray_kwargs.ray_init", "ray_kwargs.ray_init.num_cpus", "ray_kwargs.ray_init.runtime_env",
                "actor_rollout_ref.rollout.full_determinism"):
        assert key in keys, key
    assert textwrap.dedent(MAIN_PPO).count("ray.init(") == 1

"""`generate pipeline`: every path the engines use is read from the composed config at run time, so the
Hydra overrides the script advertises (`python pipeline.py actor_rollout_ref.model.path=...`) reach the
agent's vLLM engine, VERL's actor and VERL's critic. The script runs as in test_generate_pipeline_run.py
(stand-in verl, ray and vLLM)."""

from __future__ import annotations

from omegaconf import OmegaConf
from test_generate_pipeline_run import pipeline  # noqa: F401  (the fixture)

GENERATED_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def _composed(ray) -> dict:
    """The config VERL's run_ppo got, with its interpolations resolved as VERL resolves them."""
    return OmegaConf.to_container(OmegaConf.create(ray.trained[0]), resolve=True)


def test_a_model_path_override_reaches_the_agents_engine_the_actor_and_the_critic(pipeline, tmp_path):  # noqa: F811
    mine = str(tmp_path / "models" / "mine")
    recorder, ray = pipeline({"save_freq": 5, "algorithm": "ppo"}, [f"actor_rollout_ref.model.path={mine}"])
    config = _composed(ray)
    assert config["actor_rollout_ref"]["model"]["path"] == mine
    assert config["critic"]["model"]["path"] == mine  # follows the actor's model unless given itself
    engines = [e for e in recorder.events if e[0] == "LLM"]
    assert engines and engines[0][1] == mine, engines  # the agent's engine starts on the model VERL trains
    assert all(GENERATED_MODEL not in str(e) for e in recorder.events)


def test_a_critic_override_of_its_own_wins(pipeline, tmp_path):  # noqa: F811
    critic = str(tmp_path / "models" / "critic")
    _, ray = pipeline({"save_freq": 5, "algorithm": "ppo"}, [f"critic.model.path={critic}"])
    config = _composed(ray)
    assert config["critic"]["model"]["path"] == critic
    assert config["actor_rollout_ref"]["model"]["path"] == GENERATED_MODEL


def test_without_overrides_the_generated_model_is_used_everywhere(pipeline):  # noqa: F811
    recorder, ray = pipeline({"save_freq": 5, "algorithm": "ppo"}, [])
    config = _composed(ray)
    assert config["critic"]["model"]["path"] == config["actor_rollout_ref"]["model"]["path"] == GENERATED_MODEL
    assert [e for e in recorder.events if e[0] == "LLM"][0][1] == GENERATED_MODEL


def test_the_held_out_split_is_chosen_at_run_time_too(pipeline, tmp_path):  # noqa: F811
    import json

    _, ray = pipeline({"save_freq": 5}, ["--eval-files", "data/other/test.parquet"])
    root = tmp_path / ray.trained[0]["trainer"]["default_local_dir"]
    result = json.loads((root / "global_step_3" / "agent_eval.json").read_text())
    assert result["eval_files"] == "data/other/test.parquet"


def test_a_validation_split_given_at_run_time_is_the_one_evaluated(pipeline, tmp_path):  # noqa: F811
    # `python pipeline.py data.val_files=...` names the held-out split VERL validates on; the agent's evaluation
    # after training reads the same file, not the one the script was generated with.
    import json

    _, ray = pipeline({"save_freq": 5}, ["data.val_files=data/mine/test.parquet"])
    root = tmp_path / ray.trained[0]["trainer"]["default_local_dir"]
    result = json.loads((root / "global_step_3" / "agent_eval.json").read_text())
    assert result["eval_files"] == "data/mine/test.parquet"


def test_without_eval_files_the_evaluation_reads_the_configs_validation_split(pipeline, tmp_path):  # noqa: F811
    import json

    _, ray = pipeline({"save_freq": 5, "val_files": "data/generated/val.parquet"}, [])
    root = tmp_path / ray.trained[0]["trainer"]["default_local_dir"]
    result = json.loads((root / "global_step_3" / "agent_eval.json").read_text())
    assert result["eval_files"] == "data/generated/val.parquet"

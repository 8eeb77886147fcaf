"""`check` validates VERL keys against the VERL release the project uses (issue 15): the key snapshots per
release, how the release is found (flag, config, pins, a VERL checkout), and what the findings say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.check import verl_version
from npu_port.transpiler.cli import cli
from npu_port.transpiler.tables import verl_keys

# Keys VERL 0.6 and 0.7 have and 0.8 removed (critic.model.fsdp_config moved to the engine config).
OLD_LAUNCHER = ("python3 -m verl.trainer.main_ppo critic.model.fsdp_config.param_offload=False "
                "trainer.use_legacy_worker_impl=auto trainer.n_gpus_per_node=8\n")


def project(tmp_path: Path, **files: str) -> Path:
    """A project folder (its pyproject.toml stops the search for pins there) holding `files`."""
    root = tmp_path / "proj"
    root.mkdir()
    files.setdefault("pyproject.toml", "[project]\nname = 'demo'\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def check(*args: str) -> tuple[int, dict, str]:
    result = CliRunner().invoke(cli, ["check", "--isolated", "--output-format", "json",
                                      "--select", "unknown-verl-key-sh,unknown-verl-key-yaml", *args],
                                catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout), result.stderr


def test_the_last_four_minor_releases_are_snapshotted_with_every_packaged_config():
    releases = verl_keys.releases()
    minors = sorted({verl_keys.version_key(r.version)[:2] for r in releases})
    assert len(minors) >= 4 and minors[-4:] == [(0, 6), (0, 7), (0, 8), (0, 9)]
    for r in releases:
        assert r.entry_config("verl.trainer.main_ppo") == "ppo_trainer", r.version
        assert r.entry_config("verl.trainer.sft_trainer") == "sft_trainer_engine", r.version
        assert {"ppo_trainer", "ppo_megatron_trainer", "sft_trainer_engine"} <= set(r.configs), r.version
    assert verl_keys.release("0.6.1").entry_config("verl.trainer.fsdp_sft_trainer") == "sft_trainer"


@pytest.mark.parametrize(("version", "checked"), [
    (None, "0.9.1"), ("0.7.0", "0.7.1"), ("0.8.0.dev", "0.8.0"), ("0.10.2", "0.9.1"), ("0.3.0", "0.6.1")])
def test_a_version_is_checked_against_the_snapshot_of_its_minor_release(version, checked):
    assert verl_keys.release(version).version == checked


@pytest.mark.parametrize(("name", "text", "checked"), [
    ("requirements.txt", "torch==2.6.0\nverl[vllm]==0.7.0  # pinned\n", "0.7.1"),
    ("requirements-npu.txt", "verl>=0.6,<0.8\n", "0.7.1"),
    ("requirements/base.txt", "verl ~= 0.8.0\n", "0.8.0"),
    ("pyproject.toml", "[project]\nname = 'x'\ndependencies = ['verl==0.6.1', 'ray']\n", "0.6.1"),
    ("setup.py", "from setuptools import setup\nsetup(install_requires=['verl!=0.9.0,>=0.7'])\n", "0.9.1"),
])
def test_the_project_pin_is_read_from_its_files(tmp_path, name, text, checked):
    root = project(tmp_path, **{name: text})
    found = verl_version.resolve([root / "scripts" / "run.sh"])
    assert found.version == checked
    assert name in found.where


def test_no_pin_means_the_newest_release_and_a_given_version_wins(tmp_path):
    root = project(tmp_path, **{"requirements.txt": "verl==0.7.1\n"})
    assert verl_version.resolve([tmp_path / "elsewhere.sh"]).version == verl_keys.release().version
    assert verl_version.resolve([root], given="0.8.0", given_where="command line").version == "0.8.0"


def test_findings_name_the_release_and_the_releases_that_have_the_key(tmp_path):
    root = project(tmp_path, **{"run.sh": OLD_LAUNCHER, "requirements.txt": "verl==0.9.1\n"})
    code, doc, _ = check(str(root / "run.sh"))
    assert code == 1
    messages = [(f["message"], f["hint"], f["severity"]) for f in doc["findings"]]
    assert messages[0][0] == "VERL 0.9.1's ppo_trainer config has no key `critic.model.fsdp_config`"
    assert "VERL 0.6.1 and 0.7.1 have it" in messages[0][1] and "--verl-version" in messages[0][1]
    assert messages[0][2] == "error"


def test_without_a_pin_a_key_another_release_has_is_a_warning_and_a_key_none_has_an_error(tmp_path):
    """No flag, config value, pin or checkout names the release: the newest is assumed, and a key that an
    older release has (MindSpeed-RL's launchers, written for VERL 0.6.1) is not known to be wrong."""
    root = project(tmp_path, **{"run.sh": OLD_LAUNCHER})
    code, doc, _ = check(str(root / "run.sh"))
    assert code == 0, doc
    assert {f["severity"] for f in doc["findings"]} == {"warning"}
    (root / "run.sh").write_text("python3 -m verl.trainer.main_ppo trainer.n_gpus_per_nod=8\n", encoding="utf-8")
    code, doc, _ = check(str(root / "run.sh"))
    assert code == 1 and [f["severity"] for f in doc["findings"]] == ["error"]


def test_the_pin_flag_and_config_key_each_choose_the_release(tmp_path):
    root = project(tmp_path, **{"run.sh": OLD_LAUNCHER})
    assert check("--verl-version", "0.9.1", str(root / "run.sh"))[0] == 1
    assert check("--verl-version", "0.7.1", str(root / "run.sh"))[0] == 0
    (root / "requirements.txt").write_text("verl==0.7.1\n", encoding="utf-8")
    code, _, err = check(str(root))
    assert code == 0
    # The config key, read from the project's pyproject.toml (so without --isolated).
    (root / "requirements.txt").unlink()
    (root / "pyproject.toml").write_text("[tool.npu-port]\nverl_version = \"0.7.1\"\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["check", "--select", "unknown-verl-key-sh", str(root / "run.sh")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output


def test_a_changed_pin_is_not_answered_from_the_cache(tmp_path):
    root = project(tmp_path, **{"run.sh": OLD_LAUNCHER, "requirements.txt": "verl==0.7.1\n"})
    assert check(str(root))[0] == 0
    (root / "requirements.txt").write_text("verl==0.9.1\n", encoding="utf-8")
    code, doc, err = check(str(root))
    assert code == 1 and len(doc["findings"]) == 2


def test_text_output_says_which_release_it_checked_against(tmp_path):
    root = project(tmp_path, **{"run.sh": OLD_LAUNCHER, "requirements.txt": "verl==0.8.0\n"})
    result = CliRunner().invoke(cli, ["check", "--isolated", "--select", "unknown-verl-key-sh", str(root)],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert "VERL keys checked against VERL 0.8.0, from " in result.stderr
    assert "requirements.txt:1 (verl==0.8.0)" in result.stderr


def test_a_bad_verl_version_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(cli, ["check", "--verl-version", "latest", str(tmp_path)])
    assert result.exit_code == 2 and "--verl-version" in result.output


CHECKOUT_CONFIG = """\
defaults:
  - _self_
actor_rollout_ref:
  rollout:
    name: vllm
    brand_new_knob: 1
trainer:
  n_gpus_per_node: 8
  nnodes: 1
"""


def test_a_verl_checkout_is_checked_against_its_own_config(tmp_path):
    root = project(tmp_path, **{
        "verl/version/version": "0.10.0.dev\n",
        "verl/trainer/config/ppo_trainer.yaml": CHECKOUT_CONFIG,
        "verl/trainer/main_ppo.py": "import hydra\n\n\n@hydra.main(config_path='config', config_name='ppo_trainer')\n"
                                    "def main(config):\n    pass\n",
        "examples/run.sh": "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.brand_new_knob=2 "
                           "trainer.nnodes=1 trainer.total_epochs=3\n",
    })
    found = verl_version.resolve([root])
    assert found.version == "0.10.0.dev" and "its own config" in found.where
    code, doc, _ = check(str(root / "examples"))
    assert code == 1
    assert [f["message"] for f in doc["findings"]] == [
        "VERL 0.10.0.dev's ppo_trainer config has no key `trainer.total_epochs`"]


def test_megatron_keys_given_to_the_fsdp_config_name_the_config_that_has_them(tmp_path):
    root = project(tmp_path, **{"run.sh": "python3 -m verl.trainer.main_ppo "
                                          "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2\n"})
    _, doc, _ = check(str(root / "run.sh"))
    assert "--config-name=ppo_megatron_trainer" in doc["findings"][0]["hint"]


def test_dataclass_fields_include_the_bases_and_only_dataclasses_count():
    from npu_port.transpiler.tables import verl_configs

    sources = {
        "verl/base.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass BaseConfig:\n    _target_: str = ''\n",
        "verl/cfg.py": "import dataclasses\nfrom verl.base import BaseConfig\n\n\n@dataclasses.dataclass\n"
                       "class RolloutConfig(BaseConfig):\n    name: str = 'vllm'\n    server: dict = None\n\n\n"
                       "class NotADataclass:\n    hidden: int = 0\n",
    }
    fields = verl_configs.dataclass_fields(sources.get, sources, ["verl.cfg.RolloutConfig", "verl.cfg.NotADataclass"])
    assert fields == {"verl.cfg.RolloutConfig": ["_target_", "name", "server"]}


def test_dataclass_fields_follow_bases_through_files_that_name_no_target():
    # Only the files that define a wanted class or one of its bases are parsed: a base two levels up, in
    # a module with CR line ends, a form feed before `class`, and a class statement after a decorator
    # with a comment must all still count.
    from npu_port.transpiler.tables import verl_configs

    sources = {
        "verl/a.py": "from dataclasses import dataclass\r@dataclass\rclass Root:\r    seed: int = 0\r",
        "verl/b.py": "from dataclasses import dataclass\n\n@dataclass  # shared\n\fclass Mid(Root):\n    lr: float = 0.1\n",
        "verl/c.py": "from dataclasses import dataclass\n@dataclass\nclass Leaf(Mid):\n    name: str = ''\n",
        "verl/d.py": "import dataclasses\nX = 'class Leaf(Other):'\n",
    }
    fields = verl_configs.dataclass_fields(sources.get, sources, ["verl.c.Leaf"])
    assert fields == {"verl.c.Leaf": ["lr", "name", "seed"]}


def test_a_checkout_yaml_may_use_a_field_its_dataclass_has(tmp_path):
    root = project(tmp_path, **{
        "verl/version/version": "0.10.0.dev\n",
        "verl/trainer/config/ppo_trainer.yaml": "actor_rollout_ref:\n  rollout:\n    _target_: verl.cfg.RolloutConfig\n"
                                                "    name: vllm\ntrainer:\n  nnodes: 1\n",
        "verl/cfg.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass RolloutConfig:\n    _target_: str = ''\n"
                       "    name: str = 'vllm'\n    server: dict = None\n",
        "recipe/config.yaml": "defaults:\n  - ppo_trainer\n  - _self_\nactor_rollout_ref:\n  rollout:\n"
                              "    server: {timeout: 60}\n    sever: {timeout: 60}\ntrainer:\n  nnodes: 2\n",
    })
    code, doc, _ = check(str(root / "recipe"))
    assert code == 1
    assert [(f["line"], f["severity"]) for f in doc["findings"]] == [(7, "error")]
    assert "RolloutConfig, which VERL builds `actor_rollout_ref.rollout` into, has no field `sever`" in \
        doc["findings"][0]["message"]

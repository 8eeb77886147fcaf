"""`npu-port generate`: fixtures per kind and option set, conformance of every output, options and errors.

Regenerate the expected files after an intended template change with
`NPU_PORT_UPDATE_FIXTURES=1 python -m pytest tests/test_generate.py` and review the diff.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from npu_port.transpiler.analysis.import_policy import dynamic_imports, forbidden_imports, relative_imports
from npu_port.transpiler.cli import cli
from npu_port.transpiler.generate.contexts import version_set
from npu_port.transpiler.generate.render import Rendered, render, schemas
from tools import conformance

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "skeletons"
MAIN_FILE = {"verl-train": "train.py", "msrl-train": "launch.sh", "vllm-infer": "adapter.py", "pipeline": "pipeline.py"}
# Project packages and the agent frameworks that `standalone` strips: generated code imports none of them.
FORBIDDEN_IMPORTS = ("agentic_rl", "opencode", "npu_port")
# Calls whose signature the API snapshot does not record (verl helpers re-exported by main_ppo): their
# names are verified, their arguments cannot be. Anything else unverified fails the conformance test.
KNOWN_SNAPSHOT_GAPS = {
    "verl.trainer.main_ppo.validate_config",
    "verl.trainer.main_ppo.get_ppo_ray_runtime_env",
    "verl.trainer.ppo.utils.need_critic",
    "verl.trainer.ppo.utils.need_reference_policy",
    "verl.trainer.main_ppo.migrate_legacy_reward_impl",  # verl 0.8.0
}


def option_sets() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*/*") if p.is_dir())


def case_values(case: Path) -> dict:
    kind = case.parent.name
    spec = yaml.safe_load((case / "spec.yaml").read_text()) or {}
    spec.pop("kind", None)
    return schemas()[kind].validate(spec)


def render_case(case: Path) -> Rendered:
    return render(case.parent.name, case_values(case))


def all_outputs() -> list[tuple[str, str, str]]:
    """(case id, file name, text) for every file every option set generates."""
    out = []
    for case in option_sets():
        rendered = render_case(case)
        cid = f"{case.parent.name}/{case.name}"
        out.append((cid, MAIN_FILE[rendered.kind], rendered.main))
        if rendered.config is not None:
            out.append((cid, "config.yaml", rendered.config))
        out.extend((cid, name, text) for name, text in (rendered.companions or {}).items())
    return out


def facts_of(cid: str) -> conformance.Facts:
    """The snapshots of the releases the case's version set targets."""
    values = case_values(FIXTURES / cid)
    return conformance.facts_for_set(version_set(values)) if "vllm_version" in values else conformance.api_facts.load


OUTPUTS = all_outputs()
IDS = [f"{cid}/{name}" for cid, name, _ in OUTPUTS]


def test_every_kind_has_two_or_more_option_sets():
    per_kind = {k: len(list((FIXTURES / k).iterdir())) for k in schemas()}
    assert all(n >= 2 for n in per_kind.values()), per_kind


@pytest.mark.parametrize("case", option_sets(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_render_matches_expected(case):
    rendered = render_case(case)
    files = {MAIN_FILE[rendered.kind]: rendered.main, **(rendered.companions or {})}
    if rendered.config is not None:
        files["config.yaml"] = rendered.config
    if os.environ.get("NPU_PORT_UPDATE_FIXTURES"):
        for name, text in files.items():
            (case / name).write_text(text, encoding="utf-8")
    for name, text in files.items():
        assert (case / name).read_text(encoding="utf-8") == text, f"{case}/{name} differs from the render"
    stale = {p.name for p in case.iterdir()} - set(files) - {"spec.yaml"}
    assert not stale, f"expected files nothing renders any more: {stale}"


@pytest.mark.parametrize("cid,name,text", OUTPUTS, ids=IDS)
def test_output_is_valid_and_conforms(cid, name, text):
    if name.endswith(".py"):
        tree = ast.parse(text)
        assert not forbidden_imports(tree, FORBIDDEN_IMPORTS)
        assert not relative_imports(tree)
        assert not dynamic_imports(tree)
        issues = conformance.check_python(text, facts_of(cid))
    elif name.endswith(".sh"):
        proc = subprocess.run(["bash", "-n"], input=text.encode(), capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()
        assert "python cli/train_grpo.py --config-name" in text
        issues = []
    else:
        framework = conformance.config_framework(text)
        assert framework in ("verl", "mindspeed_rl")
        issues = (conformance.check_verl_yaml(text, facts_of(cid)) if framework == "verl"
                  else conformance.check_mindspeed_yaml(text))
    errors = [str(i) for i in issues if i.severity == "error"]
    assert not errors
    unverified = {i.subject for i in issues if i.severity == "unverified"}
    assert unverified <= KNOWN_SNAPSHOT_GAPS, unverified - KNOWN_SNAPSHOT_GAPS


@pytest.mark.parametrize("cid,name,text", [o for o in OUTPUTS if o[1] == "train.py" or o[1] == "pipeline.py"],
                         ids=lambda v: v if isinstance(v, str) and "/" in v else "")
def test_script_overrides_equal_config_out(cid, name, text):
    """The script's settings (OVERRIDES, ADDED_OVERRIDES, the NPU env vars in Ray's runtime_env) and the
    --config-out YAML are the same."""
    tree = ast.parse(text)
    assigned = {s.targets[0].id: ast.literal_eval(s.value) for s in tree.body
                if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name) and s.targets[0].id.isupper()
                and isinstance(s.value, ast.Dict)}
    overrides = dict(conformance._flatten({**assigned["OVERRIDES"], **assigned["ADDED_OVERRIDES"]}))
    for env_name, value in assigned["NPU_ENV_VARS"].items():
        overrides[f"ray_kwargs.ray_init.runtime_env.env_vars.{env_name}"] = value
    config = next(t for c, n, t in OUTPUTS if c == cid and n == "config.yaml")
    data = yaml.safe_load(config)
    assert data["defaults"] == ["ppo_trainer", "_self_"]
    flat = dict(conformance._flatten({k: v for k, v in data.items() if k not in ("defaults", "hydra")}))
    assert flat == overrides


def test_npu_facts_in_verl_output():
    text = dict(((c, n), t) for c, n, t in OUTPUTS)[("verl-train/ppo_two_nodes", "train.py")]
    assert "'trainer.device': 'npu'" in text
    assert "'trainer.n_gpus_per_node': 8" in text  # the key keeps its name on NPU
    assert "'actor_rollout_ref.rollout.name': 'vllm'" in text
    assert "'ray_kwargs.ray_init.address': 'auto'" in text  # two nodes join the cluster `ray start` built
    assert "ray.init(" not in text  # VERL's run_ppo starts Ray, after its own set-up
    assert "'critic.optim.lr'" in text and "'algorithm.adv_estimator': 'gae'" in text
    for wrong in ("n_npus_per_node", "npu_memory_utilization", "num_gpus", 'device="npu"', "vllm-ascend'"):
        assert wrong not in text


# --- the command line -------------------------------------------------------------------------------------

def run_cli(*args, cwd=None):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_help_lists_every_option_with_default():
    for kind, schema in schemas().items():
        result = run_cli("generate", kind, "--help")
        assert result.exit_code == 0
        text = " ".join(result.output.split())
        for opt in schema.options.values():
            assert opt.flag in text, (kind, opt.flag)
        assert "default:" in text


def test_generate_writes_script_and_config(tmp_path):
    out, cfg = tmp_path / "train.py", tmp_path / "grpo.yaml"
    result = run_cli("generate", "verl-train", "--algorithm", "ppo", "--rollout-n", "1", "-o", str(out),
                     "--config-out", str(cfg))
    assert result.exit_code == 0, result.output
    assert "'algorithm.adv_estimator': 'gae'" in out.read_text()
    assert yaml.safe_load(cfg.read_text())["algorithm"]["adv_estimator"] == "gae"


def test_bad_value_is_a_clear_error_and_writes_nothing(tmp_path):
    out = tmp_path / "train.py"
    result = CliRunner().invoke(cli, ["generate", "verl-train", "--lr", "5", "--nnodes", "0",
                                      "--algorithm", "dpo", "-o", str(out)])
    assert result.exit_code == 2
    assert "'dpo' is not one of 'grpo', 'ppo'" in result.output
    result = CliRunner().invoke(cli, ["generate", "verl-train", "--lr", "5", "--nnodes", "0", "-o", str(out)])
    assert result.exit_code == 2
    assert "--lr: 5.0 is above the maximum 1" in result.output
    assert "--nnodes: 0 is below the minimum 1" in result.output
    assert not out.exists()


def test_constraint_across_options(tmp_path):
    result = CliRunner().invoke(cli, ["generate", "verl-train", "--train-batch-size", "100",
                                      "--ppo-mini-batch-size", "64", "-o", str(tmp_path / "t.py")])
    assert result.exit_code == 2
    assert "--ppo-mini-batch-size 64 must divide --train-batch-size 100" in result.output
    assert not (tmp_path / "t.py").exists()


def test_spec_file_yaml_and_json_and_cli_wins(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"kind": "vllm-infer", "tensor-parallel-size": 4, "model_path": "/m/a"}))
    result = run_cli("generate", "vllm-infer", "--from", str(spec), "--model-path", "/m/b", "--show-options")
    data = yaml.safe_load(result.output)
    assert data["tensor_parallel_size"] == 4 and data["model_path"] == "/m/b"
    spec_yaml = tmp_path / "spec.yaml"
    spec_yaml.write_text("kind: vllm-infer\nno_such_option: 1\n")
    result = CliRunner().invoke(cli, ["generate", "vllm-infer", "--from", str(spec_yaml)])
    assert result.exit_code == 2 and "unknown option 'no_such_option'" in result.output
    spec_yaml.write_text("kind: verl-train\n")
    result = CliRunner().invoke(cli, ["generate", "vllm-infer", "--from", str(spec_yaml)])
    assert result.exit_code == 2 and "for 'verl-train'" in result.output
    spec_yaml.write_text("- a\n- b\n")
    result = CliRunner().invoke(cli, ["generate", "vllm-infer", "--from", str(spec_yaml)])
    assert result.exit_code == 2 and "mapping" in result.output


def test_show_options_round_trips_through_from(tmp_path):
    shown = run_cli("generate", "pipeline", "--nnodes", "2", "--ray-address", "auto", "--show-options").output
    spec = tmp_path / "spec.yaml"
    spec.write_text(shown)
    assert run_cli("generate", "pipeline", "--from", str(spec), "--show-options").output == shown


def test_existing_file_needs_force(tmp_path):
    out = tmp_path / "adapter.py"
    out.write_text("keep me")
    result = CliRunner().invoke(cli, ["generate", "vllm-infer", "-o", str(out)])
    assert result.exit_code == 2 and "--force" in result.output
    assert out.read_text() == "keep me"
    assert CliRunner().invoke(cli, ["generate", "vllm-infer", "-o", str(out), "--force"]).exit_code == 0
    assert "class VLLMAdapter" in out.read_text()


def test_msrl_config_name_follows_config_out(tmp_path):
    script, cfg = tmp_path / "run.sh", tmp_path / "configs" / "grpo_x.yaml"
    result = run_cli("generate", "msrl-train", "-o", str(script), "--config-out", str(cfg))
    assert result.exit_code == 0, result.output
    text = script.read_text()
    assert "CONFIG_NAME=grpo_x" in text
    assert 'pwd)/"configs/grpo_x.yaml' in text
    assert os.access(script, os.X_OK)
    assert "megatron_training" in yaml.safe_load(cfg.read_text())
    bad = CliRunner().invoke(cli, ["generate", "msrl-train", "-o", str(tmp_path / "r2.sh"), "--config-name", "a",
                                   "--config-out", str(tmp_path / "b.yaml")])
    assert bad.exit_code == 2 and "disagree" in bad.output
    assert not (tmp_path / "r2.sh").exists()


def test_msrl_default_config_lands_next_to_script(tmp_path):
    result = run_cli("generate", "msrl-train", "-o", str(tmp_path / "run.sh"), "--nnodes", "2")
    assert result.exit_code == 0, result.output
    cfg = yaml.safe_load((tmp_path / "grpo_npu.yaml").read_text())
    assert cfg["rl_config"]["actor_resource"]["num_npus"] == 32
    assert cfg["megatron_training"]["distributed_backend"] == "nccl"
    assert cfg["generate_config"]["gpu_memory_utilization"] == 0.4


def test_config_out_on_a_kind_without_config(tmp_path):
    result = CliRunner().invoke(cli, ["generate", "vllm-infer", "--config-out", str(tmp_path / "c.yaml")])
    assert result.exit_code == 2 and "no framework config" in result.output


def test_pipeline_writes_its_agent_files_next_to_the_script(tmp_path):
    out = tmp_path / "agent" / "pipeline.py"
    out.parent.mkdir()
    result = run_cli("generate", "pipeline", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.parent.iterdir()} == {"pipeline.py", "agent_tools.py", "agent_reward.py"}
    again = CliRunner().invoke(cli, ["generate", "pipeline", "-o", str(out)])
    assert again.exit_code == 2 and "agent_tools.py" in again.output  # nothing overwritten without --force
    to_stdout = CliRunner().invoke(cli, ["generate", "pipeline"])
    assert to_stdout.exit_code == 2 and "give -o FILE" in to_stdout.output
    refused = CliRunner().invoke(cli, ["generate", "pipeline", "--save-freq", "-1", "-o", str(tmp_path / "p.py")])
    assert refused.exit_code == 2 and "VERL writes none with -1" in refused.output


@pytest.mark.parametrize("kind,files", [
    ("pipeline", {"pipeline.py", "agent_tools.py", "agent_reward.py", "config.yaml", "requirements-npu.txt"}),
    ("msrl-train", {"launch.sh", "grpo_npu.yaml"}),
    ("vllm-infer", {"adapter.py", "requirements-npu.txt"}),
])
def test_out_writes_the_whole_tree(tmp_path, kind, files):
    out = tmp_path / "project"
    result = run_cli("generate", kind, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == files
    both = CliRunner().invoke(cli, ["generate", kind, "--out", str(out), "-o", str(tmp_path / "x")])
    assert both.exit_code == 2 and "drop -o" in both.output


def test_out_with_invalid_options_creates_nothing(tmp_path):
    result = CliRunner().invoke(cli, ["generate", "pipeline", "--rollout-n", "1", "--out", str(tmp_path / "p")])
    assert result.exit_code == 2 and not (tmp_path / "p").exists()

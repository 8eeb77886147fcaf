"""One installable version set per generated file: the sets, their snapshots, --verl-version / --vllm-version,
--requirements-out, and the run-as-written defects of issue 18 (multi-node, GRPO with one response, SGLang)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.generate import versions
from npu_port.transpiler.generate.render import render, schemas
from npu_port.transpiler.generate.schema import OptionError
from npu_port.transpiler.generate.weave import MARKER, AgentOptions, weave
from tools import conformance

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def assigned(source: str, name: str):
    tree = ast.parse(source)
    return next(ast.literal_eval(s.value) for s in tree.body if isinstance(s, ast.Assign)
                and getattr(s.targets[0], "id", "") == name)


# --- the sets and their snapshots -----------------------------------------------------------------------

def test_version_options_offer_exactly_the_snapshotted_sets():
    for kind in ("verl-train", "pipeline"):
        assert sorted(schemas()[kind].options["verl_version"].choices) == sorted(versions.verl_versions())
    for kind in ("verl-train", "vllm-infer", "pipeline"):
        assert sorted(schemas()[kind].options["vllm_version"].choices) == sorted(versions.vllm_versions())


@pytest.mark.parametrize("name", sorted(versions.version_sets()))
def test_every_set_is_snapshotted_at_its_exact_releases(name):
    vs = versions.version_sets()[name]
    facts = conformance.facts_for_set(vs)
    for package in versions.SNAPSHOTTED_PACKAGES:
        assert facts(package).version == vs.versions[package], package
    pins = "\n".join(vs.all_requirements())
    for package in ("verl", "vllm-ascend", "transformers"):
        assert f"{package}=={vs.versions[package.replace('-', '_')]}" in pins
    assert f"--branch v{vs.vllm}" in vs.requirements_text()  # vLLM is built from source on Ascend


def test_default_set_pairs_vllm_with_the_vllm_ascend_of_the_same_release():
    vs = versions.default_set()
    assert vs.versions["vllm"] == vs.versions["vllm_ascend"] == "0.23.0" and vs.verl == "0.9.1"
    assert vs.trainer == "v1" and "TransferQueue==0.1.11" in vs.requirements and "cachetools" in vs.requirements


def test_version_specific_conformance_finds_what_an_older_release_lacks():
    legacy = conformance.facts_for_set(versions.choose(verl="0.8.0"))
    assert conformance.check_python("from verl.trainer.main_ppo import TaskRunnerV1", legacy)
    assert not conformance.check_python("from verl.trainer.main_ppo import TaskRunnerV1")
    assert [i.subject for i in conformance.check_verl_keys([("trainer.use_v1", True)], facts=legacy)] == [
        "trainer.use_v1"]
    assert conformance.check_verl_keys([("trainer.use_v1", True)]) == []


# --- choosing a set -------------------------------------------------------------------------------------

def test_vllm_version_picks_the_legacy_trainer_entry():
    values = schemas()["verl-train"].validate({"vllm_version": "0.11.0"})
    text = render("verl-train", values).main
    assert "Targets: verl 0.8.0, vLLM 0.11.0 + vllm-ascend 0.11.0" in text and "CANN 8.3.RC2" in text
    assert "TaskRunnerV1" not in text and "    run_ppo(config)\n" in text
    default = render("verl-train", schemas()["verl-train"].validate({})).main
    assert "run_ppo(config, task_runner_class=TaskRunnerV1)" in default and "verl 0.9.1" in default


def test_versions_that_cannot_be_installed_together_are_refused(tmp_path):
    out = tmp_path / "t.py"
    result = invoke("generate", "verl-train", "--verl-version", "0.8.0", "--vllm-version", "0.23.0", "-o", str(out))
    assert result.exit_code == 2 and "no installable set has verl 0.8.0 with vLLM 0.23.0" in result.output
    assert not out.exists()
    result = invoke("generate", "verl-train", "--vllm-version", "0.33.0")
    assert result.exit_code == 2


def test_every_generated_file_names_its_versions():
    for kind in ("verl-train", "vllm-infer", "pipeline", "msrl-train"):
        rendered = render(kind, schemas()[kind].validate({}))
        for text in filter(None, (rendered.main, rendered.config, *(rendered.companions or {}).values())):
            assert "Targets: " in text[:2000], kind
    # What weave adds to a script names the set it was checked against, right after its marker.
    launcher = (ROOT / "fixtures" / "weave" / "agent_loop" / "verl_hydra_main.input.py").read_text()
    for options in ({}, {"vllm_version": "0.11.0"}):
        result = weave(launcher, options=options, agent=AgentOptions())
        marker = result.source.index(MARKER)
        expected = "vLLM 0.11.0" if options else "vLLM 0.23.0"
        assert f"# Targets: verl {'0.8.0' if options else '0.9.1'}, {expected}" in result.source[marker:marker + 300]
        assert all("Targets: " in text[:2000] for text in result.companions.values())


def test_requirements_out_writes_the_pins(tmp_path):
    req = tmp_path / "requirements-npu.txt"
    result = invoke("generate", "pipeline", "-o", str(tmp_path / "p.py"), "--requirements-out", str(req))
    assert result.exit_code == 0, result.output
    lines = [line.split("  # index:", 1)[0] for line in req.read_text().splitlines()]
    assert "torch-npu==2.10.0.post4" in lines and "verl==0.9.1" in lines and "triton-ascend==3.2.0" in lines
    # vllm-ascend 0.23.0's metadata pins triton-ascend==3.2.2, which no index has: installed --no-deps after.
    assert "vllm-ascend==0.23.0" not in lines
    assert any(line.startswith("#   pip install --no-deps vllm-ascend==0.23.0") for line in lines)
    assert 'torch==2.10.0+cpu; platform_machine == "x86_64"' in lines
    # The extras verl 0.9.1's V1 trainer imports, and the transformers of the set.
    assert "TransferQueue==0.1.11" in lines and "cachetools" in lines and "transformers==5.5.4" in lines
    assert any("CANN 9.1.0" in line for line in lines)
    result = invoke("generate", "msrl-train", "-o", str(tmp_path / "l.sh"), "--requirements-out", str(req))
    assert result.exit_code == 2 and "drop --requirements-out" in result.output


# --- run as written -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["verl-train", "pipeline"])
def test_multi_node_without_an_address_joins_the_cluster(kind):
    text = render(kind, schemas()[kind].validate({"nnodes": 2})).main
    assert assigned(text, "ADDED_OVERRIDES")["ray_kwargs.ray_init.address"] == "auto"
    # The header says which: join a cluster started first (with the commands), or start a local Ray.
    header = ast.get_docstring(ast.parse(text)) or ""
    assert "ray start --head" in header and "ray start --address=HEAD_IP:6379" in header
    assert "joins the running cluster" in header
    single = render(kind, schemas()[kind].validate({})).main
    assert assigned(single, "ADDED_OVERRIDES") == {"ray_kwargs.ray_init.resources": {"NPU": 8}}
    assert "starts a local Ray" in (ast.get_docstring(ast.parse(single)) or "")
    given = render(kind, schemas()[kind].validate({"nnodes": 2, "ray_address": "10.0.0.1:6379"})).main
    assert assigned(given, "ADDED_OVERRIDES")["ray_kwargs.ray_init.address"] == "10.0.0.1:6379"
    assert "given with --ray-address" in (ast.get_docstring(ast.parse(given)) or "")


def test_grpo_refuses_one_response_per_prompt():
    with pytest.raises(OptionError, match="GRPO .* needs --rollout-n 2 or more"):
        schemas()["verl-train"].validate({"rollout_n": 1})
    schemas()["verl-train"].validate({"rollout_n": 1, "algorithm": "ppo"})
    with pytest.raises(OptionError):
        schemas()["pipeline"].validate({"rollout_n": 1})


def test_sglang_selects_the_ascend_attention_backend():
    text = render("verl-train", schemas()["verl-train"].validate({"rollout_engine": "sglang"})).main
    added = assigned(text, "ADDED_OVERRIDES")
    assert added["actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend"] == "ascend"
    vllm = render("verl-train", schemas()["verl-train"].validate({})).main
    assert "attention_backend" not in vllm


def test_the_reloading_engine_never_starts_ray_before_verl():
    """vLLM's Ray executor would start Ray before run_ppo, which then skips ray_kwargs.ray_init."""
    with pytest.raises(OptionError, match="--distributed-executor-backend ray with the reload hand-off"):
        schemas()["pipeline"].validate({"distributed_executor_backend": "ray"})
    schemas()["pipeline"].validate({"distributed_executor_backend": "ray", "weight_handoff": "disk"})
    # On vLLM 0.11.0 the hand-off is from disk anyway (no engine before training): nothing to refuse.
    schemas()["pipeline"].validate({"distributed_executor_backend": "ray", "vllm_version": "0.11.0"})
    launcher = (ROOT / "fixtures" / "weave" / "agent_loop" / "verl_hydra_main.input.py").read_text()
    with pytest.raises(ValueError, match="vLLM's Ray executor would start Ray before VERL does"):
        weave(launcher, options={"distributed_executor_backend": "ray"}, agent=AgentOptions())
    weave(launcher, options={"distributed_executor_backend": "ray"}, agent=AgentOptions(weight_handoff="disk"))

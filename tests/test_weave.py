"""`npu-port weave`: expected output on converted scripts, validity, conformance and idempotency."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_generate import FORBIDDEN_IMPORTS, KNOWN_SNAPSHOT_GAPS

from npu_port.transpiler.analysis.import_policy import forbidden_imports, relative_imports
from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.generate.contexts import version_set
from npu_port.transpiler.generate.weave import MARKER, AgentOptions, WeaveError, weave, weave_source
from tools import conformance

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "weave"
CASES = sorted(FIXTURES.glob("*.input.py"))


def _expected(case: Path) -> Path:
    return case.with_name(case.name.replace(".input.", ".expected."))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_weave_fixture(case):
    source = case.read_text()
    out = weave_source(source, "vllm")
    expected = _expected(case)
    if os.environ.get("NPU_PORT_UPDATE_FIXTURES") and out != source:
        expected.write_text(out)
    assert out == (expected.read_text() if expected.exists() else source)
    tree = ast.parse(out)
    assert not forbidden_imports(tree, FORBIDDEN_IMPORTS) and not relative_imports(tree)
    assert weave_source(out, "vllm") == out, "weaving twice changed the script"


@pytest.mark.parametrize("case", [c for c in CASES if _expected(c).exists()], ids=lambda p: p.name)
def test_woven_script_keeps_the_original_and_conforms(case):
    source, out = case.read_text(), _expected(case).read_text()
    # Every original line is still there, in order; only whitespace and the entry's call site may differ.
    original = [l for l in source.splitlines() if l.strip()]
    woven = iter(l for l in out.splitlines() if l.strip())
    changed = [l for l in original if l not in woven]
    assert all("run_pipeline" not in l and "(" in l for l in changed) and len(changed) <= 1, changed
    assert MARKER in out and "def run_pipeline(" in out
    issues = conformance.check_python(out)
    assert not [str(i) for i in issues if i.severity == "error"]
    # Weaving adds nothing the snapshot cannot verify (the script's own calls may be unverifiable).
    before = {i.subject for i in conformance.check_python(source) if i.severity == "unverified"}
    assert {i.subject for i in issues if i.severity == "unverified"} <= before | KNOWN_SNAPSHOT_GAPS
    # The woven script is still converted: a convert run over it changes nothing.
    result = Engine(Settings()).convert(out.encode(), case.name.replace(".expected", ""))
    assert result.output is None


def test_entry_is_called_through_run_pipeline():
    out = weave(_fixture("ddp_train")).source
    assert "    run_pipeline(parse_args())" in out
    assert "result = train(*args, **kwargs)" in out
    tree = ast.parse(out)
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert names.index("VLLMAdapter") < names.index("parse_args") < names.index("run_pipeline")


def test_existing_imports_are_reused_not_repeated():
    out = weave(_fixture("verl_custom_main")).source
    assert out.count("import os\n") == 1
    result = weave(_fixture("no_main_block"))
    assert "import os" in result.added_imports and "import json" not in result.added_imports
    assert result.entry == "fit" and result.rewired_calls == 1
    body = result.source
    assert body.index("def run_pipeline(") < body.index("run_pipeline(CONFIG)")


def test_explicit_entry_and_handoff_dir():
    out = weave(_fixture("ddp_train"), entry="parse_args", handoff_dir='out/"hf"').source
    assert "result = parse_args(*args, **kwargs)" in out
    assert "ADAPTER_HANDOFF_DIR = 'out/\"hf\"'" in out


@pytest.mark.parametrize("source,message", [
    ("def f(:\n", "does not parse"),
    ("import os\nx = 1\n", "no training entry"),
    ("def main():\n    pass\nclass SamplingSettings:\n    pass\n", "already defines SamplingSettings"),
    ("from mylib import LLM\ndef main():\n    pass\n", "binds 'LLM'"),
])
def test_weave_errors(source, message):
    with pytest.raises(WeaveError, match=message):
        weave_source(source)


def test_bad_entry_name():
    with pytest.raises(WeaveError, match="not a Python identifier"):
        weave_source("def main():\n    pass\n", entry="main()")
    with pytest.raises(WeaveError, match="no module-level function"):
        weave_source("def main():\n    pass\n", entry="train")


def test_adapter_options_reach_the_woven_code():
    out = weave(_fixture("ddp_train"), options={"model_path": "/m/x", "tensor_parallel_size": 2}).source
    assert "ADAPTER_MODEL_PATH = '/m/x'" in out and "ADAPTER_TENSOR_PARALLEL_SIZE = 2" in out


def test_weave_cli(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_fixture("ddp_train"))
    out = tmp_path / "woven.py"
    result = CliRunner().invoke(cli, ["weave", str(script), "--adapter", "vllm", "-o", str(out),
                                      "--tensor-parallel-size", "2"])
    assert result.exit_code == 0, result.output
    assert script.read_text() == _fixture("ddp_train")  # input untouched
    assert "ADAPTER_TENSOR_PARALLEL_SIZE = 2" in out.read_text()
    diff = CliRunner().invoke(cli, ["weave", str(script), "--diff"])
    assert diff.output.count("\n+class ") == 5 and "+    run_pipeline(parse_args())" in diff.output
    assert script.read_text() == _fixture("ddp_train")
    again = CliRunner().invoke(cli, ["weave", str(out), "--in-place"])
    assert again.exit_code == 0 and "unchanged" in again.output
    bad = CliRunner().invoke(cli, ["weave", str(script), "--top-p", "9"])
    assert bad.exit_code == 2 and "--top-p" in bad.output
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    failed = CliRunner().invoke(cli, ["weave", str(broken)])
    assert failed.exit_code == 1 and "does not parse" in failed.output


def _fixture(name: str) -> str:
    return (FIXTURES / f"{name}.input.py").read_text()


# The default mode's outputs (the --keep-cuda ones run on either device: nothing NPU-only to weave in).
CONVERTED_EXAMPLES = sorted(p for p in (FIXTURES.parent / "examples").rglob("*.expected.py") if ".keep-cuda." not in p.name)


@pytest.mark.parametrize("case", CONVERTED_EXAMPLES, ids=lambda p: p.name)
def test_weave_on_the_converted_examples(case):
    """The other rules' converted examples: woven, valid, stable, still converted; or a clear no-entry error."""
    source = case.read_text()
    try:
        result = weave(source)
    except WeaveError as exc:
        assert "no training entry found" in str(exc)
        assert "def " not in source or "__main__" not in source
        return
    ast.parse(result.source)
    assert weave_source(result.source) == result.source
    assert not [i for i in conformance.check_python(result.source) if i.severity == "error"]
    assert Engine(Settings()).convert(result.source.encode(), case.name.replace(".expected", "")).output is None


# --- weave --agent-loop: the agent in VERL's rollouts, the hand-off and the evaluation ------------------

AGENT_FIXTURES = FIXTURES / "agent_loop"
AGENT_CASES = sorted(AGENT_FIXTURES.glob("*.input.py"))
PIPELINE_SAMPLES = FIXTURES.parent / "skeletons" / "pipeline" / "grpo_default"


def _agent_case(case: Path) -> tuple[dict, AgentOptions]:
    """A case's weave options (NAME.spec.yaml next to it: the adapter's and the agent's); none: the defaults."""
    spec_file = case.with_name(case.name.replace(".input.py", ".spec.yaml"))
    spec = yaml.safe_load(spec_file.read_text()) if spec_file.exists() else {}
    return spec.get("options") or {}, AgentOptions(**(spec.get("agent") or {}))


@pytest.mark.parametrize("case", AGENT_CASES, ids=lambda p: p.name)
def test_agent_loop_fixture(case):
    source = case.read_text()
    options, agent = _agent_case(case)
    result = weave(source, options=options, agent=agent)
    expected = _expected(case)
    if os.environ.get("NPU_PORT_UPDATE_FIXTURES"):
        expected.write_text(result.source)
    assert result.source == expected.read_text()
    assert result.agent_calls == 1 and "run_ppo(with_agent_loop(config)" in result.source
    # Only the run_ppo call and the entry's call changed among the script's own lines.
    woven = set(result.source.splitlines())
    changed = [line for line in source.splitlines() if line.strip() and line not in woven]
    assert len(changed) == 2 and "run_ppo(config" in changed[0] and "(" in changed[1], changed
    # One template, two users: the samples are the ones `generate pipeline` writes (for the set's versions).
    samples = {name: (PIPELINE_SAMPLES / name).read_text() for name in ("agent_tools.py", "agent_reward.py")}
    if agent.tools is None and not options:
        assert result.companions == samples
    assert set(result.companions) == {n for n, given in (("agent_tools.py", agent.tools),
                                                         ("agent_reward.py", agent.reward)) if given is None}
    assert weave(result.source, options=options, agent=agent).changed is False  # weaving twice changes nothing
    assert Engine(Settings()).convert(result.source.encode(), case.name).output is None  # still converted
    facts = conformance.facts_for_set(version_set(options))
    own = {i.subject for i in conformance.check_python(source, facts) if i.severity == "error"}
    assert not [str(i) for i in conformance.check_python(result.source, facts)
                if i.severity == "error" and i.subject not in own]


@pytest.mark.parametrize("vllm_version", ["0.23.0", "0.11.0"])
def test_agent_loop_conforms_to_the_version_set(vllm_version):
    """Against the snapshots of the set the adapter targets: every verl/vllm name and every key of
    AGENT_OVERRIDES / AGENT_FILE_OVERRIDES exists in that release (conformance checks *OVERRIDES dicts)."""
    values = {"vllm_version": vllm_version}
    out = weave(_agent_fixture(), options=values, agent=AgentOptions()).source
    facts = conformance.facts_for_set(version_set(values))
    issues = conformance.check_python(out, facts)
    # The script's own names are its own (TaskRunnerV1 is verl 0.9.1's): weaving adds no error to them.
    own = {(i.severity, i.subject) for i in conformance.check_python(_agent_fixture(), facts)}
    assert not [str(i) for i in issues if i.severity == "error" and (i.severity, i.subject) not in own]
    assert {i.subject for i in issues if i.severity == "unverified"} <= KNOWN_SNAPSHOT_GAPS
    tree = ast.parse(out)
    keys = [k.value for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            and any(isinstance(t, ast.Name) and t.id.endswith("OVERRIDES") for t in node.targets)
            for k in node.value.keys if isinstance(k, ast.Constant)]
    assert "actor_rollout_ref.rollout.multi_turn.function_tool_path" in keys and len(keys) == 7
    broken = out.replace("'actor_rollout_ref.rollout.multi_turn.enable'", "'actor_rollout_ref.rollout.multi_turn.enabled'")
    assert broken != out
    assert [i for i in conformance.check_python(broken, facts) if i.severity == "error"]  # the check can fail


def _agent_fixture() -> str:
    return (AGENT_FIXTURES / "verl_hydra_main.input.py").read_text()


@pytest.mark.parametrize("source,kwargs,message", [
    (None, {"options": {"model_path": "/m"}}, "--model-path: with --agent-loop the agent's engine serves the model VERL trains"),
    (None, {"handoff_dir": "out"}, "--handoff-dir: with --agent-loop the weights come from VERL's newest checkpoint"),
    ("ddp", {}, "the script calls no verl.trainer.main_ppo.run_ppo"),
    ("from verl.trainer.main_ppo import run_ppo\ndef main(args):\n    run_ppo(*args)\n", {}, "passes no config"),
    ("def main(config):\n    pass\ndef evaluate_agent():\n    pass\n", {}, "calls no"),
    ("from verl.trainer import main_ppo\ndef main(c):\n    main_ppo.run_ppo(c)\ndef AgentLoop():\n    pass\n", {},
     "already defines AgentLoop"),
])
def test_agent_loop_refusals(source, kwargs, message):
    text = {None: _agent_fixture(), "ddp": _fixture("ddp_train")}.get(source, source)
    with pytest.raises(WeaveError, match=re.escape(message)):
        weave(text, agent=AgentOptions(), **kwargs)


def test_agent_options_are_validated():
    with pytest.raises(WeaveError, match="--agent-max-turns: 0 is below the minimum 1"):
        weave(_agent_fixture(), agent=AgentOptions(agent_max_turns=0))
    with pytest.raises(WeaveError, match="--weight-handoff"):
        weave(_agent_fixture(), agent=AgentOptions(weight_handoff="ipc"))


def test_run_ppo_through_a_module_alias_and_config_keyword():
    source = ("import verl.trainer.main_ppo as mp\n\n\ndef main(cfg):\n    mp.run_ppo(config=cfg)\n\n\n"
              "if __name__ == '__main__':\n    main(None)\n")
    out = weave(source, agent=AgentOptions()).source
    # verl 0.9.1's run_ppo(config, task_runner_class): the runner its own main() passes is added.
    assert "mp.run_ppo(config=with_agent_loop(cfg), task_runner_class=TaskRunnerV1)" in out
    assert "from verl.trainer.main_ppo import TaskRunnerV1" in out and "    run_pipeline(None)" in out


def test_requirements_out_writes_the_set_the_woven_code_targets(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_fixture("ddp_train"))
    req = tmp_path / "requirements-npu.txt"
    result = CliRunner().invoke(cli, ["weave", str(script), "-o", str(tmp_path / "woven.py"), "--vllm-version",
                                      "0.11.0", "--requirements-out", str(req)])
    assert result.exit_code == 0, result.output
    lines = [line.split("  # index:", 1)[0] for line in req.read_text().splitlines()]
    assert "vllm-ascend==0.11.0" in lines and "verl==0.8.0" in lines
    assert "# Targets: verl 0.8.0, vLLM 0.11.0 + vllm-ascend 0.11.0" in (tmp_path / "woven.py").read_text()
    diff = CliRunner().invoke(cli, ["weave", str(script), "--diff", "--requirements-out", str(tmp_path / "r2.txt")])
    assert diff.exit_code == 0 and not (tmp_path / "r2.txt").exists()  # --diff writes nothing


def test_agent_loop_leaves_a_scripts_common_names_alone():
    """Names a training script often has of its own (HERE, evaluate, hand_off, load_module) are not the
    woven agent code's, so weaving does not refuse such a script."""
    source = _agent_fixture().replace(
        "\n\n@hydra.main", "\n\nHERE = os.path.dirname(__file__)\n\n\ndef evaluate(model):\n    return model\n\n\n"
        "def hand_off(x):\n    return x\n\n\ndef load_module(name):\n    return name\n\n\n@hydra.main")
    assert "def evaluate(" in source
    assert weave(source, agent=AgentOptions()).agent_calls == 1

"""`npu-port pipeline`: standalone -> weave -> convert -> check on a GPU script inside a project."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.analysis.import_policy import forbidden_imports, relative_imports
from npu_port.transpiler.cli import cli

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "fixtures" / "pipeline" / "agent_grpo_gpu.py"
PROJECT = ROOT / "fixtures" / "standalone"


def _pipeline(src: Path, out: Path, *extra: str):
    return CliRunner().invoke(cli, ["pipeline", str(src), "--strip", "agentic_rl,opencode", "--path", str(PROJECT),
                                    "--adapter", "vllm", "-o", str(out), *extra])


def test_pipeline_builds_a_standalone_npu_script_that_passes_check(tmp_path):
    out = tmp_path / "agent_grpo_npu.py"
    report = tmp_path / "report.json"
    result = _pipeline(SCRIPT, out, "--report", str(report))
    assert result.exit_code == 0, result.output
    code = out.read_text()
    tree = ast.parse(code)
    assert not forbidden_imports(tree, ("agentic_rl", "opencode")) and not relative_imports(tree)
    for expected in ('@ray.remote(resources={"NPU": 1})', 'torch.device("npu", 0)', 'backend="hccl"',
                     "ASCEND_RT_VISIBLE_DEVICES", '"HCCL_CONNECT_TIMEOUT"', "class VLLMAdapter",
                     "run_pipeline(parser.parse_args())", "import torch_npu"):
        assert expected in code, expected
    assert "torch.cuda" not in code and "nccl\"" not in code
    doc = json.loads(report.read_text())
    assert doc["summary"]["command"] == "pipeline"
    rules = {f["rule"] for f in doc["findings"] if f["kind"] == "change"}
    assert {"ray-num-gpus", "ray-runtime-env", "nccl-backend", "env-var-names"} <= rules
    # Stable: the pipeline over its own output changes nothing.
    again = tmp_path / "again.py"
    assert _pipeline(out, again).exit_code == 0
    assert again.read_text() == code


def test_a_script_that_cannot_be_made_standalone_writes_nothing(tmp_path):
    bad = tmp_path / "dynamic.py"
    bad.write_text('import importlib\nimport torch\n\nmod = importlib.import_module("agentic_rl.config")\n\n\n'
                   'def main():\n    torch.cuda.synchronize()\n\n\nif __name__ == "__main__":\n    main()\n')
    out = tmp_path / "out.py"
    result = _pipeline(bad, out)
    assert result.exit_code == 1
    assert "standalone" in result.output and "import_module" in result.output
    assert not out.exists()


def test_folder_mode(tmp_path):
    src = tmp_path / "scripts"
    src.mkdir()
    (src / "a.py").write_text(SCRIPT.read_text())
    out = tmp_path / "out"
    result = _pipeline(src, out)
    assert result.exit_code == 0, result.output
    assert "class VLLMAdapter" in (out / "a.py").read_text()


def test_out_names_the_folder_and_output_the_file(tmp_path):
    src = tmp_path / "scripts"
    src.mkdir()
    (src / "a.py").write_text(SCRIPT.read_text())
    base = ["pipeline", "--strip", "agentic_rl,opencode", "--path", str(PROJECT)]
    result = CliRunner().invoke(cli, [*base, str(src), "--out", str(tmp_path / "tree")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "tree" / "a.py").is_file()
    result = CliRunner().invoke(cli, [*base, str(SCRIPT), "--output", str(tmp_path / "one.py")])
    assert result.exit_code == 0 and (tmp_path / "one.py").is_file()
    result = CliRunner().invoke(cli, [*base, str(SCRIPT), "-o", str(tmp_path / "x.py"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not both" in result.output
    result = CliRunner().invoke(cli, [*base, str(SCRIPT)])
    assert result.exit_code == 2 and "--out DIR" in result.output


AGENT_LAUNCHER = ROOT / "fixtures" / "pipeline" / "verl_agent_launcher_gpu.py"


def test_agent_loop_weaves_the_agent_into_a_project_launcher(tmp_path):
    out = tmp_path / "npu" / "launcher_npu.py"
    result = _pipeline(AGENT_LAUNCHER, out, "--agent-loop")
    assert result.exit_code == 0, result.output
    assert "1 script: 1 written, 0 failed" in result.output  # the samples are not counted as scripts
    code = out.read_text()
    assert "run_ppo(with_agent_loop(config))" in code and 'config.trainer.device = "npu"' in code
    assert not forbidden_imports(ast.parse(code), ("agentic_rl", "opencode"))
    assert sorted(p.name for p in out.parent.iterdir()) == ["agent_reward.py", "agent_tools.py", "launcher_npu.py"]
    # Stable: the pipeline over its own output changes nothing, and keeps an edited sample.
    (out.parent / "agent_reward.py").write_text("def compute_score(*args):\n    return 0.0\n")
    again = tmp_path / "npu" / "again.py"
    assert _pipeline(out, again, "--agent-loop").exit_code == 0
    assert again.read_text() == code and "return 0.0" in (out.parent / "agent_reward.py").read_text()


def test_agent_loop_on_a_script_without_run_ppo_writes_nothing(tmp_path):
    out = tmp_path / "out" / "agent.py"
    result = _pipeline(SCRIPT, out, "--agent-loop")
    assert result.exit_code == 1 and "weave: --agent-loop puts the agent into VERL's rollouts" in result.output
    assert not out.parent.exists() or not any(out.parent.iterdir())

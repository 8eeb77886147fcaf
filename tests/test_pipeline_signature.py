"""A VERL launcher's run_ppo call against the targeted VERL release's signature (issue 37 item 3):
`check` fails `run_ppo(config)` on verl 0.9.1 (run_ppo(config, task_runner_class)) and passes it on
0.8.0; `pipeline --agent-loop` writes the call verl 0.9.1 takes, and its own check passes it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.cli import cli

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "fixtures" / "pipeline" / "verl_agent_launcher_gpu.py"
PROJECT = ROOT / "fixtures" / "standalone"


def _check(path: Path, *args: str) -> tuple[int, list[dict]]:
    result = CliRunner().invoke(cli, ["check", "--isolated", "--output-format", "json", "--select",
                                      "verl-call-signature", *args, str(path)], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)["findings"]


def test_check_fails_run_ppo_config_against_verl_091():
    code, findings = _check(LAUNCHER, "--verl-version", "0.9.1")
    assert code == 1
    assert [(f["rule"], f["severity"]) for f in findings] == [("verl-call-signature", "error")]
    assert "task_runner_class" in findings[0]["message"] and "0.9.1" in findings[0]["message"]
    code, findings = _check(LAUNCHER, "--verl-version", "0.8.0")  # run_ppo(config, task_runner_class=None)
    assert code == 0 and findings == []


def test_the_woven_launcher_passes_the_signature_check(tmp_path):
    out = tmp_path / "npu" / "launcher.py"
    result = CliRunner().invoke(cli, ["pipeline", str(LAUNCHER), "--strip", "agentic_rl,opencode", "--path",
                                      str(PROJECT), "--agent-loop", "-o", str(out)])
    assert result.exit_code == 0, result.output
    code = out.read_text()
    assert "run_ppo(with_agent_loop(config), task_runner_class=TaskRunnerV1)" in code
    assert _check(out, "--verl-version", "0.9.1") == (0, [])


def test_a_generated_script_is_checked_against_the_release_it_declares(tmp_path):
    # No pin beside it: the script's own "Targets: verl X" line says the release (not the newest snapshot).
    for version, calls_run_ppo_with_config_alone in (("0.8.0", True), ("0.9.1", False)):
        out = tmp_path / version / "train.py"
        out.parent.mkdir()
        result = CliRunner().invoke(cli, ["generate", "verl-train", "--verl-version", version, "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert ("run_ppo(config)" in out.read_text()) == calls_run_ppo_with_config_alone
        code, findings = _check(out)
        assert code == 0 and findings == [], (version, findings)

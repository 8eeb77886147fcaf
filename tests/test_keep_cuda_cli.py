"""`convert --keep-cuda` from the command line: the mode, the torch its output needs, and the project pin."""

from __future__ import annotations

from click.testing import CliRunner

from npu_port.transpiler.analysis.project_pins import lowest_torch
from npu_port.transpiler.cli import cli

SCRIPT = "import torch\n\ntorch.cuda.synchronize()\nx = torch.zeros(2).cuda()\n"


def _convert(tmp_path, *args):
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    return CliRunner().invoke(cli, ["convert", str(tmp_path / "train.py"), *args])


def test_keep_cuda_writes_device_agnostic_code_and_says_for_which_torch(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["torch>=2.6"]\n', encoding="utf-8")
    result = _convert(tmp_path, "--keep-cuda", "--isolated")
    assert result.exit_code == 0, result.output
    assert "torch.accelerator.synchronize()" in result.stdout
    assert "x = torch.zeros(2).to(torch.accelerator.current_accelerator())" in result.stdout
    assert "torch.npu" not in result.stdout and "try:\n    import torch_npu" in result.stdout
    assert "--keep-cuda: the output must run on torch 2.6 (pyproject.toml:2 accepts it)" in result.stderr


def test_without_a_pin_the_output_runs_on_the_oldest_torch_npu_release(tmp_path):
    (tmp_path / ".git").mkdir()
    result = _convert(tmp_path, "--keep-cuda", "--isolated")
    assert '(torch.npu if hasattr(torch, "npu") else torch.cuda).synchronize()' in result.stdout
    assert "torch 2.1 (no torch, vllm or verl pin found near the inputs" in result.stderr


def test_an_older_torch_pin_gets_the_explicit_form(tmp_path):
    (tmp_path / "requirements.txt").write_text("numpy\n# torch==2.9.0 (old)\ntorch==2.1.0\n", encoding="utf-8")
    result = _convert(tmp_path, "--keep-cuda", "--isolated")
    assert result.exit_code == 0, result.output
    assert '(torch.npu if hasattr(torch, "npu") else torch.cuda).synchronize()' in result.stdout
    assert "torch 2.1 (requirements.txt:3 accepts it), older than torch 2.6" in result.stderr


def test_torch_version_wins_over_the_pin_and_is_checked(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch>=2.1,<2.8\n", encoding="utf-8")
    result = _convert(tmp_path, "--keep-cuda", "--torch-version", "2.6", "--isolated")
    assert "torch.accelerator.synchronize()" in result.stdout and "torch 2.6 (as asked)" in result.stderr
    bad = _convert(tmp_path, "--keep-cuda", "--torch-version", "latest")
    assert bad.exit_code == 2 and "not a release number" in bad.output


def test_the_project_config_makes_it_the_default_and_the_flag_turns_it_off(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.npu-port]\nkeep-cuda = true\ntorch-version = "2.7"\n',
                                             encoding="utf-8")
    kept = _convert(tmp_path)
    assert "torch.accelerator.synchronize()" in kept.stdout and "torch 2.7 (as asked)" in kept.stderr
    hard = _convert(tmp_path, "--no-keep-cuda")
    assert "torch.npu.synchronize()" in hard.stdout and "--keep-cuda" not in hard.stderr


def test_the_lowest_pin_of_torch_or_torch_npu_counts(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["torch>=2.6", "transformers"]\n',
                                             encoding="utf-8")
    (tmp_path / "requirements-npu.txt").write_text("torch-npu==2.5.1.post1\n", encoding="utf-8")
    pin = lowest_torch([tmp_path / "src" / "x.py"])
    assert pin is not None and (pin.version, pin.where) == ("2.5.1", "requirements-npu.txt:1")


def test_the_walk_up_stops_at_a_git_root(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch==2.1.0\n", encoding="utf-8")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    assert lowest_torch([tmp_path / "repo" / "train.py"]) is None


def test_no_pin_without_a_requirement_naming_torch(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("torchvision==0.20\ntorchmetrics>=1\n", encoding="utf-8")
    assert lowest_torch([tmp_path]) is None


def test_verl_helpers_only_where_the_projects_verl_has_them(tmp_path):
    script = "import torch\nfrom verl import DataProto\n\nx = torch.zeros(2, device='cuda')\n"
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("verl==0.8.0\n", encoding="utf-8")
    new = CliRunner().invoke(cli, ["convert", str(tmp_path / "train.py"), "--keep-cuda", "--isolated"])
    assert "device=get_device_id()" in new.stdout and "from verl.utils.device import get_device_id" in new.stdout
    (tmp_path / "requirements.txt").write_text("verl==0.4.1\n", encoding="utf-8")
    old = CliRunner().invoke(cli, ["convert", str(tmp_path / "train.py"), "--keep-cuda", "--isolated"])
    assert "verl.utils" not in old.stdout and 'device="npu" if hasattr(torch, "npu") else "cuda"' in old.stdout


def test_the_projects_verl_pin_decides_which_npu_settings_a_launcher_gets(tmp_path):
    launcher = "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.n_gpus_per_node=8\n"
    (tmp_path / "run.sh").write_text(launcher, encoding="utf-8")
    runs = {}
    for pin in ("0.6.1", "0.9.1"):
        (tmp_path / "requirements.txt").write_text(f"verl=={pin}\n", encoding="utf-8")
        result = CliRunner().invoke(cli, ["convert", str(tmp_path / "run.sh"), "--extras", "--isolated", "--no-cache"])
        assert result.exit_code == 0, result.output
        runs[pin] = result.stdout
    assert "trainer.device=npu" in runs["0.6.1"] and "trainer.device=npu" not in runs["0.9.1"]


def test_the_report_says_which_torch_and_why(tmp_path):
    import json

    (tmp_path / "requirements.txt").write_text("vllm>=0.7.3\n", encoding="utf-8")
    result = _convert(tmp_path, "--keep-cuda", "--isolated", "--diff", "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["summary"]
    assert summary["keep_cuda_torch"] == {
        "torch": "2.5", "why": "--keep-cuda: the output must run on torch 2.5 (requirements.txt:1 accepts vllm 0.7.3, "
                               "which requires torch 2.5), older than torch 2.6 (torch.accelerator): the explicit "
                               "form `... if hasattr(torch, \"npu\") else ...` is written instead"}
    plain = _convert(tmp_path, "--isolated", "--diff", "--report", str(tmp_path / "d.json"))
    assert plain.exit_code == 0 and "keep_cuda_torch" not in json.loads((tmp_path / "d.json").read_text())["summary"]

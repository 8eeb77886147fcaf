"""The convert command as a user runs it: output modes, exit codes, selection, reports, ignore comments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler import __version__
from npu_port.transpiler.cli import cli

SRC = 'import torch\n\ndef f(x):\n    torch.cuda.synchronize()\n    return x.to("cuda")\n'


def _file(tmp_path: Path, text: str = SRC, name: str = "train.py") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_version_and_help():
    assert __version__ in run("--version").output
    assert "convert" in run("--help").output


def test_single_file_prints_converted_source_and_keeps_input(tmp_path):
    p = _file(tmp_path)
    result = run("convert", str(p))
    assert result.exit_code == 0
    assert 'torch.npu.synchronize()' in result.stdout and 'x.to("npu")' in result.stdout
    assert p.read_text() == SRC
    assert "1 converted" in result.stderr


def test_diff_writes_nothing(tmp_path):
    p = _file(tmp_path)
    result = run("convert", str(p), "--diff")
    assert "-    torch.cuda.synchronize()" in result.stdout and "+    torch.npu.synchronize()" in result.stdout
    assert p.read_text() == SRC


def test_out_and_in_place(tmp_path):
    p = _file(tmp_path)
    out = tmp_path / "out.py"
    assert run("convert", str(p), "--out", str(out)).exit_code == 0
    assert "torch.npu" in out.read_text() and p.read_text() == SRC
    assert run("convert", str(p), "--in-place").exit_code == 1  # outside git: no copy to restore
    assert p.read_text() == SRC
    assert run("convert", str(p), "--in-place", "--force").exit_code == 0
    assert p.read_text() == out.read_text()


def test_check_exit_code(tmp_path):
    p = _file(tmp_path)
    assert run("convert", str(p), "--check").exit_code == 3
    clean = _file(tmp_path, "import torch\n", "clean.py")
    assert run("convert", str(clean), "--check").exit_code == 0


def test_select_and_ignore(tmp_path):
    p = _file(tmp_path)
    only_devices = run("convert", str(p), "--select", "device-string").stdout
    assert 'x.to("npu")' in only_devices and "torch.cuda.synchronize" in only_devices
    no_devices = run("convert", str(p), "--ignore", "device-string").stdout
    assert 'x.to("cuda")' in no_devices and "torch.npu.synchronize" in no_devices
    assert run("convert", str(p), "--select", "no-such-rule").exit_code == 2


def test_ignore_comments(tmp_path):
    text = ('import torch\n'
            'torch.cuda.synchronize()  # npu-port: ignore\n'
            'x = y.to("cuda")  # npu-port: ignore[tensor-cuda-method]\n')
    out = run("convert", str(_file(tmp_path, text))).stdout
    assert "torch.cuda.synchronize()  # npu-port: ignore" in out
    assert 'y.to("npu")' in out


def test_report_json(tmp_path):
    p = _file(tmp_path, SRC + "torch.cuda.get_arch_list()\n")
    report = tmp_path / "r.json"
    assert run("convert", str(p), "--report", str(report)).exit_code == 0
    doc = json.loads(report.read_text())
    rules = {(f["rule"], f["kind"]) for f in doc["findings"]}
    assert ("torch-cuda-api", "change") in rules and ("device-string", "change") in rules
    finding = next(f for f in doc["findings"] if f["kind"] == "finding")
    assert finding["line"] == 6 and finding["severity"] == "warning" and finding["hint"]
    assert set(finding) >= {"file", "line", "col", "rule", "severity", "message"}


def test_stdin(tmp_path):
    result = run("convert", "-", input=SRC)
    assert "torch.npu.synchronize()" in result.stdout


def test_missing_path_is_usage_error(tmp_path):
    assert run("convert", str(tmp_path / "nope.py")).exit_code == 2


def test_rules_lists_every_rule():
    out = run("rules", "--json").output
    ids = {r["id"] for r in json.loads(out)}
    assert {"torch-cuda-api", "device-string", "nccl-backend", "torch-npu-import"} <= ids


@pytest.mark.parametrize("columns", ["80", "200"])
def test_the_rules_table_shows_every_id_whole_at_any_width(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    ids = [r["id"] for r in json.loads(run("rules", "--json").output)]
    table = run("rules").output
    assert "…" not in table
    assert all(f"│ {i} " in table for i in ids)


def test_every_command_is_found_under_its_own_name():
    import click

    from npu_port.transpiler.cli import COMMANDS, cli

    ctx = click.Context(cli)
    assert [cli.get_command(ctx, name).name for name in COMMANDS] == list(COMMANDS)

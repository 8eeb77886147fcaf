"""What a new user hits first (issue 17), typed as a user types it: `--out DIR/`, `-q`, `--check`'s words,
stdin as any kind of file, failures on stdout, the output and exclude flags, the JSON summary, and a
shell file bash itself rejects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli

CUDA = "import torch\n\ndef f(x):\n    torch.cuda.synchronize()\n    return x.to(\"cuda\")\n"
BROKEN = "import torch\ndef (:\n    torch.cuda.synchronize()\n"
TEMPLATE = "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=<GPU_IDS>\n"


def run(*args: str, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(CUDA)
    return tmp_path


# -- --out names a folder when it can only be one ---------------------------------------------------

def test_out_with_a_trailing_slash_is_a_folder_created_with_the_report_in_it(here):
    r = run("convert", "train.py", "--out", "out/", "--report", "out/report.json")
    assert r.exit_code == 0, r.output
    assert (here / "out").is_dir() and "torch.npu.synchronize()" in (here / "out/train.py").read_text()
    assert json.loads((here / "out/report.json").read_text())["summary"]["converted"] == 1


def test_several_inputs_or_a_folder_make_a_missing_out_folder(here):
    (here / "src").mkdir()
    (here / "src/model.py").write_text(CUDA)
    assert run("convert", "train.py", "src", "--out", "new/deeper").exit_code == 0
    assert (here / "new/deeper/train.py").is_file() and (here / "new/deeper/src/model.py").is_file()
    assert run("convert", "src", "--out", "tree").exit_code == 0
    assert (here / "tree/model.py").is_file()
    assert run("convert", "train.py", "--out", "plain").exit_code == 0  # one file, no slash: that file
    assert (here / "plain").is_file()


def test_out_slash_over_an_existing_file_is_refused(here):
    (here / "taken").write_text("x\n")
    r = run("convert", "train.py", "--out", "taken/")
    assert r.exit_code == 2 and "exists and is not a folder" in r.stderr
    assert (here / "taken").read_text() == "x\n"


# -- -q hides the summary, never a failure ----------------------------------------------------------

def test_quiet_still_names_every_failure(here):
    (here / "src").mkdir()
    (here / "src/ok.py").write_text(CUDA)
    (here / "src/broken.py").write_text(BROKEN)
    r = run("convert", "src", "--out", "X", "-q", "--no-cache")
    assert r.exit_code == 1
    assert "src/broken.py: syntax error at line 2" in r.stderr
    assert "files:" not in r.stderr and "ok.py" not in r.stderr  # no summary, nothing that went well


# -- dry runs say "would" -------------------------------------------------------------------------------

def test_check_and_diff_say_would_convert(here):
    r = run("convert", "train.py", "--check")
    assert r.exit_code == 3 and "1 would convert" in r.stderr and "converted" not in r.stderr
    assert r.stdout == ""
    assert "1 would convert" in run("convert", "train.py", "--diff").stderr
    assert "1 converted" in run("convert", "train.py", "--out", "o.py").stderr


# -- stdin as any kind of file --------------------------------------------------------------------

def test_stdin_filename_picks_the_language(here):
    r = run("convert", "-", "--stdin-filename", "launch.sh", input="export CUDA_VISIBLE_DEVICES=0\n")
    assert r.exit_code == 0 and r.stdout == "export ASCEND_RT_VISIBLE_DEVICES=0\n"
    yaml = 'env_vars:\n  CUDA_VISIBLE_DEVICES: "0"\n'
    r = run("convert", "-", "--stdin-filename", "conf/runtime_env.yaml", input=yaml)
    assert r.exit_code == 0 and r.stdout == yaml.replace("CUDA_VISIBLE", "ASCEND_RT_VISIBLE")
    r = run("convert", "-", "--stdin-filename", "conf/runtime_env.yaml", "--diff", input=yaml)
    assert r.stdout.startswith("--- a/conf/runtime_env.yaml\n")  # reports name the file stdin stands for
    # without a name stdin is Python, as before
    r = run("convert", "-", input="export CUDA_VISIBLE_DEVICES=0\n")
    assert r.exit_code == 1 and "syntax error" in r.stderr


def test_stdin_filename_gets_the_per_file_settings(here):
    (here / "npu-port.toml").write_text('exclude = ["vendor"]\n[per-file-ignores]\n"legacy/*" = ["device-string"]\n')
    r = run("convert", "-", "--stdin-filename", "legacy/old.py", input=CUDA)
    assert 'x.to("cuda")' in r.stdout and "torch.npu.synchronize()" in r.stdout
    r = run("convert", "-", "--stdin-filename", "vendor/lib.py", input=CUDA)
    assert r.exit_code == 0 and r.stdout == CUDA and "excluded" in r.stderr
    assert run("convert", "train.py", "--stdin-filename", "x.py").exit_code == 2  # only with '-'


def test_a_failure_on_stdout_writes_the_input_unchanged_as_stdin_does(here):
    (here / "broken.py").write_text(BROKEN)
    from_file = run("convert", "broken.py")
    from_stdin = run("convert", "-", input=BROKEN)
    for r in (from_file, from_stdin):
        assert r.exit_code == 1 and r.stdout == BROKEN and "syntax error at line 2" in r.stderr
    too_big = run("convert", "-", "--max-bytes", "10", input=CUDA)
    assert too_big.exit_code == 1 and too_big.stdout == CUDA and "more than 10 bytes" in too_big.stderr


# -- one spelling for the output flags; --exclude and --exit-zero ------------------------------------

def test_check_writes_its_report_with_o_output_and_the_old_spelling(here):
    for flag in ("-o", "--output", "--output-file"):
        r = run("check", "--isolated", "train.py", flag, "report.txt")
        assert r.exit_code == 1 and "torch-cuda-api" in (here / "report.txt").read_text(), flag
    help_text = run("check", "--help").output
    assert "-o, --output FILE" in help_text and "--output-file" not in help_text
    r = run("check", "--isolated", "train.py", "-o", "a.txt", "--output-file", "b.txt")
    assert r.exit_code == 2


def test_check_exit_zero(here):
    r = run("check", "--isolated", "train.py", "--exit-zero", "--output-format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["summary"]["exit_code"] == 0
    assert json.loads(r.stdout)["summary"]["errors"] > 0
    assert run("check", "--isolated", "nope.py", "--exit-zero").exit_code == 2  # usage errors stay


def test_convert_exclude(here):
    (here / "src/vendor").mkdir(parents=True)
    (here / "src/vendor/lib.py").write_text(CUDA)
    (here / "src/model.py").write_text(CUDA)
    r = run("convert", "src", "--out", "out", "--exclude", "vendor", "--no-cache")
    assert r.exit_code == 0 and (here / "out/model.py").is_file() and not (here / "out/vendor").exists()
    r = run("convert", "train.py", "--exclude", "train.py")  # named on the command line too, as pre-commit does
    assert r.exit_code == 0 and r.stdout == CUDA and "excluded" in r.stderr


# -- the JSON report holds the counts and each change's new text ------------------------------------

def test_report_summary_has_the_text_summarys_counts_and_changes_their_fix(here):
    (here / "src").mkdir()
    (here / "src/model.py").write_text(CUDA + "torch.cuda.get_arch_list()\n")
    (here / "src/broken.py").write_text(BROKEN)
    (here / "src/notes.md").write_text("# notes\n")
    r = run("convert", "src", "--check", "--report", "r.json", "--no-cache")
    assert r.exit_code == 1
    doc = json.loads((here / "r.json").read_text())
    summary = doc["summary"]
    assert summary["command"] == "convert" and summary["dry_run"] is True and summary["exit_code"] == 1
    assert (summary["files"], summary["converted"], summary["files_failed"], summary["copied"]) == (3, 1, 1, 1)
    assert summary["changes"] == sum(summary["changes_per_rule"].values()) >= 3
    assert summary["changes_per_rule"]["device-string"] == 1
    assert summary["warnings"] == summary["needs_human"] == 1
    fixes = {f["rule"]: f["fix"] for f in doc["findings"] if f["kind"] == "change"}
    assert fixes["device-string"] == 'becomes: return x.to("npu")'
    assert "1 would convert" in r.stderr and "1 failed" in r.stderr


# -- a shell file bash rejects --------------------------------------------------------------------

def test_a_shell_template_fails_saying_it_is_not_bash_and_how_to_exclude_it(here):
    (here / "run.sh").write_text(TEMPLATE)
    r = run("convert", "run.sh")
    assert r.exit_code == 1 and r.stdout == TEMPLATE
    assert "run.sh: not valid bash: line 2:" in r.stderr and "--exclude" in r.stderr
    assert "[tool.npu-port]" in r.stderr
    assert run("convert", "run.sh", "--exclude", "run.sh").exit_code == 0


def test_an_import_added_next_to_a_rewritten_line_gets_its_own_fix(here):
    (here / "sync.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    assert run("convert", "sync.py", "--report", "r.json").exit_code == 0
    fixes = {f["rule"]: f["fix"] for f in json.loads((here / "r.json").read_text())["findings"]}
    assert fixes == {"torch-npu-import": "insert after line 1: import torch_npu",
                     "torch-cuda-api": "becomes: torch.npu.synchronize()"}
    out = run("check", "--isolated", "sync.py").stdout
    assert "fix: insert after line 1: import torch_npu" in out and "fix: becomes: torch.npu.synchronize()" in out

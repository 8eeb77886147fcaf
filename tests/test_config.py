"""Configuration: discovery, precedence (flags > npu-port.toml > pyproject.toml > defaults), per-file
ignores, excludes, `npu-port config`, and clear errors for a bad file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.config import ConfigError, find_config_file, load_config

BAD_SERVE = "from vllm import LLM\nllm = LLM(model='m', npu_memory_utilization=0.8)\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def config_json(*args: str) -> dict:
    result = invoke("config", "--json", *args)
    assert result.exit_code == 0, result.output
    return {row["key"]: row for row in json.loads(result.stdout)["settings"]}


def test_found_by_walking_up_and_npu_port_toml_wins(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.npu-port]\nforbid = ["agentic_rl"]\n')
    sub = tmp_path / "pkg" / "deep"
    write(sub / "m.py", "x = 1\n")
    assert find_config_file([sub / "m.py"]) == tmp_path / "pyproject.toml"
    write(tmp_path / "pkg" / "npu-port.toml", 'forbid = ["opencode"]\n')
    assert find_config_file([sub / "m.py"]) == tmp_path / "pkg" / "npu-port.toml"
    assert load_config([sub])["forbid"] == ["opencode"]


def test_pyproject_without_the_table_is_skipped(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.npu-port]\nextras = true\n')
    write(tmp_path / "a" / "pyproject.toml", '[project]\nname = "a"\n')
    assert find_config_file([tmp_path / "a"]) == tmp_path / "pyproject.toml"


def test_precedence_and_sources(tmp_path):
    cfg = write(tmp_path / "pyproject.toml", '[tool.npu-port]\nselect = ["unknown-framework-arg"]\n'
                                             'forbid = ["agentic_rl"]\nstrict = true\n')
    rows = config_json(str(tmp_path), "--forbid", "opencode")
    assert rows["forbid"]["value"] == ["opencode"] and rows["forbid"]["source"] == "command line"
    assert rows["select"]["value"] == ["unknown-framework-arg"] and rows["select"]["source"] == f"{cfg}:2"
    assert rows["strict"]["source"] == f"{cfg}:4"
    assert rows["target"] == {**rows["target"], "value": "ascend", "source": "default"}
    isolated = config_json(str(tmp_path), "--isolated")
    assert isolated["forbid"]["value"] == [] and isolated["forbid"]["source"] == "default"


def test_config_command_text_names_the_file(tmp_path):
    cfg = write(tmp_path / "npu-port.toml", 'no-relative = true\n')
    result = invoke("config", str(tmp_path))
    assert result.exit_code == 0
    assert str(cfg) in result.stdout and "no-relative" in result.stdout


def test_config_drives_check_and_flags_override_it(tmp_path):
    write(tmp_path / "npu-port.toml", 'forbid = ["agentic_rl"]\nno-relative = true\n')
    src = write(tmp_path / "m.py", "from . import x\nimport agentic_rl\n")
    result = invoke("check", "--output-format", "json", str(src))
    assert result.exit_code == 1
    assert [f["rule"] for f in json.loads(result.stdout)["findings"]] == ["relative-import", "forbidden-import"]
    result = invoke("check", "--output-format", "json", "--forbid", "opencode", str(src))
    assert [f["rule"] for f in json.loads(result.stdout)["findings"]] == ["relative-import"]
    assert invoke("check", "--isolated", str(src)).exit_code == 0


def test_strict_from_config(tmp_path):
    write(tmp_path / "npu-port.toml", "strict = true\n")
    cfg = load_config([tmp_path])
    assert cfg["strict"] is True and str(cfg.sources["strict"]).endswith("npu-port.toml:1")


def test_per_file_ignores_and_exclude(tmp_path):
    write(tmp_path / "npu-port.toml", 'exclude = ["vendor"]\n\n[per-file-ignores]\n'
                                      '"tests/*" = ["unknown-framework-arg"]\n')
    write(tmp_path / "vendor" / "serve.py", BAD_SERVE)
    write(tmp_path / "tests" / "test_serve.py", BAD_SERVE)
    write(tmp_path / "src" / "serve.py", BAD_SERVE)
    result = invoke("check", "--output-format", "json", str(tmp_path))
    doc = json.loads(result.stdout)
    assert {f["file"] for f in doc["findings"]} == {str(tmp_path / "src" / "serve.py")}
    assert doc["summary"]["files"] == 3  # npu-port.toml, tests/..., src/...: vendor/ is excluded
    # an excluded file named explicitly (as pre-commit does) is still skipped
    result = invoke("check", "--output-format", "json", str(tmp_path / "vendor" / "serve.py"))
    assert result.exit_code == 0 and json.loads(result.stdout)["summary"]["files"] == 0


def test_per_file_ignores_apply_to_convert(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.npu-port.per-file-ignores]\n"keep_*.py" = ["torch-cuda-api"]\n')
    code = "import torch\nimport torch_npu\ntorch.cuda.synchronize()\n"
    keep = write(tmp_path / "keep_me.py", code)
    port = write(tmp_path / "port_me.py", code)
    out = tmp_path / "out"
    result = invoke("convert", str(keep), str(port), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert (out / "keep_me.py").read_text() == code
    assert "torch.npu.synchronize()" in (out / "port_me.py").read_text()


@pytest.mark.parametrize("name,text,line,needle", [
    ("pyproject.toml", '[project]\nname = "x"\n\n[tool.npu-port]\ntarget = "ascend"\nforbidd = ["a"]\n', 6,
     "unknown key 'forbidd'"),
    ("pyproject.toml", '[tool.npu-port]\n\nforbid = "agentic_rl"\n', 3,
     "forbid: expected a list of strings, got 'agentic_rl'"),
    ("npu-port.toml", 'extras = "yes"\n', 1, "extras: expected true or false"),
    ("npu-port.toml", 'target = "cuda"\n', 1, "target: expected one of ascend"),
    ("npu-port.toml", 'select = ["no-such-rule"]\n', 1, "select: unknown rule or group 'no-such-rule'"),
    ("npu-port.toml", 'strict = true\n[per-file-ignores]\n"a.py" = "rule"\n', 2, "per-file-ignores"),
    ("npu-port.toml", 'forbid = ["a"\nstrict = true\n', 2, "not valid TOML"),
])
def test_bad_config_file_names_the_key_and_line(tmp_path, name, text, line, needle):
    cfg = write(tmp_path / name, text)
    result = invoke("check", str(tmp_path))
    assert result.exit_code == 2
    assert needle in result.stderr, result.stderr
    assert f"{cfg}:{line}" in result.stderr or f"line {line}" in result.stderr, result.stderr


def test_load_config_raises_config_error(tmp_path):
    write(tmp_path / "npu-port.toml", "jobs = 4\n")
    with pytest.raises(ConfigError, match=r"npu-port.toml:1: unknown key 'jobs'"):
        load_config([tmp_path])


def test_explicit_config_file(tmp_path):
    other = write(tmp_path / "ci" / "npu-port.toml", 'forbid = ["opencode"]\n')
    write(tmp_path / "npu-port.toml", 'forbid = ["agentic_rl"]\n')
    rows = config_json(str(tmp_path), "--config", str(other))
    assert rows["forbid"]["value"] == ["opencode"] and rows["forbid"]["source"] == f"{other}:1"

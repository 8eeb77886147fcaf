"""`--rules FILE.yaml` values land in converted files: an environment-variable name reaches Python strings,
shell and YAML, a dotted name reaches Python code. A value that is not valid where it lands, and a rules
file that is not a rules file at all, stop the run with `FILE:LINE: what is wrong` (exit 2), never a
traceback and never a converted file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.files import yaml_too_deep
from npu_port.transpiler.tables.user_tables import table_schema

SHELL = "#!/bin/bash\nexport MY_CUDA_CACHE=/tmp/c\npython train.py\n"
PYTHON = 'import os\ncache = os.environ["MY_CUDA_CACHE"]\n'
YAML_CONFIG = "env_vars:\n  MY_CUDA_CACHE: /tmp/c\n"
TORCH = "import torch\nimport torch_npu\nprint(torch.cuda.get_arch_list())\n"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    write(src / "run.sh", SHELL)
    write(src / "env.py", PYTHON)
    write(src / "conf.yaml", YAML_CONFIG)
    write(src / "arch.py", TORCH)
    return src


def assert_refused(result, rules: Path, line: int | None, needle: str) -> None:
    where = f"{rules.resolve()}:{line}: " if line is not None else f"{rules.resolve()}:"
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output  # a usage error, not a crash
    assert f"Error: {where}" in result.stderr, result.stderr
    assert needle in result.stderr, result.stderr


@pytest.mark.parametrize("npu", ["$(touch PWNED)", "X=1; touch PWNED", "`touch PWNED`", "A B", "A-B", "A.B",
                                 'A"]; import os; os.system("touch PWNED"); x = ["', "1ABC", "class", "Ä"])
@pytest.mark.parametrize("command", ["convert", "check"])
def test_an_env_rename_must_be_a_variable_name(tmp_path, npu, command):
    src = project(tmp_path)
    rules = write(tmp_path / "rules.yaml", "# mine\nenv_vars:\n"
                                           f"  - {{cuda: MY_CUDA_CACHE, npu: '{npu.replace(chr(39), chr(39) * 2)}', "
                                           "status: rename}\n")
    out = tmp_path / "out"
    args = [command, "--isolated", "--rules", str(rules), str(src)]
    result = invoke(*(args + ["--out", str(out)] if command == "convert" else args))
    assert_refused(result, rules, 3, "env_vars row 1: npu: ")
    assert "environment-variable name" in result.stderr or "keyword" in result.stderr
    assert not out.exists()
    assert not list(tmp_path.rglob("PWNED"))


@pytest.mark.parametrize("row,key,needle", [
    ("{cuda: 'MY CUDA', npu: MY_NPU, status: rename}", "cuda", "is not an environment-variable name"),
    ("{cuda: 'MY_*_X', status: unsupported}", "cuda", "or a prefix ending in *"),
    ("{cuda: MY_CUDA, status: unsupported, hint: \"see \\e[2J here\"}", "hint", "control character U+001B"),
    ("{cuda: MY_CUDA, status: unsupported, note: \"\\u202eevil\"}", "note", "control character U+202E"),
])
def test_env_names_and_texts_are_checked(tmp_path, row, key, needle):
    src = project(tmp_path)
    rules = write(tmp_path / "rules.yaml", f"env_vars:\n  - {row}\n")
    result = invoke("convert", "--isolated", "--rules", str(rules), str(src), "--out", str(tmp_path / "o"))
    assert_refused(result, rules, 2, f"env_vars row 1: {key}: ")
    assert needle in result.stderr


@pytest.mark.parametrize("npu,needle", [
    ('os.system("touch PWNED")', "is not a dotted Python name"),
    ("torch.npu.x; import os", "is not a dotted Python name"),
    ("mylib.import.x", "'import' is a keyword"),
    ("mylib..x", "is not a dotted Python name"),
    ("mylib.x.", "is not a dotted Python name"),
    ("mylib.1x", "is not a dotted Python name"),
])
def test_a_torch_cuda_name_must_be_a_dotted_python_name(tmp_path, npu, needle):
    src = project(tmp_path)
    rules = write(tmp_path / "rules.yaml", f"torch_cuda:\n  rows:\n    - cuda: torch.cuda.get_arch_list\n"
                                           f"      npu: '{npu}'\n      status: analogue\n")
    result = invoke("convert", "--isolated", "--rules", str(rules), str(src / "arch.py"))
    assert_refused(result, rules, 4, f"torch_cuda row 1: npu: {npu!r}")
    assert needle in result.stderr
    assert "PWNED" not in result.stdout


def test_valid_names_still_reach_python_shell_and_yaml(tmp_path):
    src = project(tmp_path)
    rules = write(tmp_path / "rules.yaml", "env_vars:\n  - {cuda: MY_CUDA_CACHE, npu: _My_Npu_Cache2, status: rename}\n"
                                           "  - {cuda: 'OTHER_*', status: unsupported, hint: \"tune it\\tby hand\"}\n"
                                           "torch_cuda:\n  - {cuda: torch.cuda.get_arch_list, "
                                           "npu: torch.npu.get_device_name, status: analogue}\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", "--isolated", "--rules", str(rules), str(src), "--out", str(out),
                                      "-j", "1", "--no-cache"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "export _My_Npu_Cache2=/tmp/c" in (out / "run.sh").read_text()
    assert 'os.environ["_My_Npu_Cache2"]' in (out / "env.py").read_text()
    assert "torch.npu.get_device_name()" in (out / "arch.py").read_text()


def test_the_kinds_come_from_the_builtin_tables():
    assert table_schema("ascend", "env_vars").kind_of("npu") == ("env", False)
    assert table_schema("ascend", "env_vars").kind_of("cuda") == ("env", True)
    assert table_schema("ascend", "torch_cuda").kind_of("npu") == ("dotted", False)
    assert table_schema("ascend", "backends").kind_of("cuda") == ("dotted", True)


HOSTILE = [
    # (name, content, line or None for a whole-file error, what the message says)
    ("a list", "- {cuda: A}\n", 1, "expected a mapping of table names"),
    ("a scalar", "just text\n", 1, "expected a mapping of table names"),
    ("a null table name", "~: [a]\n", 1, "unknown table None"),
    ("a list as table name", "? [a, b]\n: 1\n", 1, "unknown table ('a', 'b')"),
    ("a null row key", "env_vars:\n  - {~: A, npu: B, status: rename}\n", 2, "unknown key None"),
    ("a number as table", "env_vars: 3\n", 1, "expected a list of rows"),
    ("a set as table", "env_vars: !!set {a, b}\n", 1, "expected a list of rows"),
    ("a list as row", "env_vars:\n  - [a, b]\n", 2, "expected a mapping such as"),
    ("a recursive alias", "env_vars: &a [*a]\n", 1, "expected a mapping such as"),
    ("bytes as a name", "env_vars:\n  - {cuda: !!binary aGVsbG8=, npu: B, status: rename}\n", 2,
     "expected a non-empty string, got b'hello'"),
    ("a date as a name", "env_vars:\n  - {cuda: 2020-01-01, npu: B, status: rename}\n", 2,
     "expected a non-empty string"),
    ("an impossible date", "env_vars:\n  - {cuda: 2020-13-45, npu: B, status: rename}\n", 2, "not valid YAML"),
    ("a 5000-digit number", "\nenv_vars: " + "9" * 5000 + "\n", 2, "not valid YAML"),
    ("a nested list value", "env_vars:\n  - {cuda: " + "[" * 150 + "]" * 150 + ", npu: B, status: rename}\n", 2,
     "expected a non-empty string, got [[["),
    ("deep flow nesting", "[" * 5000 + "]" * 5000, None, "nested too deeply"),
    ("deep block nesting", "".join("  " * i + "a:\n" for i in range(900)), None, "nested too deeply"),
    ("a duplicate table", "env_vars: []\nenv_vars: []\n", 2, "duplicate key"),
    ("a bad merge", "env_vars:\n  - {<<: 3, npu: B, status: rename}\n", 2, "not valid YAML"),
    ("two documents", "env_vars: []\n---\nenv_vars: []\n", 2, "not valid YAML"),
    ("a tab indent", "env_vars:\n\t- a\n", 2, "not valid YAML"),
    ("a control character", "env_vars: []\nx: \x07\n", 2, "not valid YAML: unacceptable character"),
    ("binary garbage", b"env_vars: []\n\x89PNG\r\n\x1a\n\x00\xff\xfe", 2, "not UTF-8 text"),
    ("a NUL byte", b"env_vars: [\x00]\n", 1, "not valid YAML"),
    ("an unclosed flow", "env_vars:\n  - {cuda: A, npu: B, status: rename\n  - {cuda: C}\n", 3, "not valid YAML"),
]


@pytest.mark.parametrize("name,content,line,needle", HOSTILE, ids=[h[0] for h in HOSTILE])
@pytest.mark.parametrize("command", ["convert", "check"])
def test_a_hostile_rules_file_is_a_clean_usage_error(tmp_path, name, content, line, needle, command):
    src = project(tmp_path)
    rules = write(tmp_path / "rules.yaml", content)
    result = invoke(command, "--isolated", "--rules", str(rules), str(src / "env.py"))
    assert_refused(result, rules, line, needle)
    if line is None:
        assert re.search(rf"Error: {re.escape(str(rules.resolve()))}: \S", result.stderr), result.stderr


def test_yaml_nested_beyond_what_a_parser_accepts_is_told_without_parsing_it():
    """libyaml's nesting limit (1000) answers in milliseconds what ruamel's and PyYAML's parsers find only
    after seconds (a RecursionError a few hundred levels down); what they accept is never refused."""
    yaml = pytest.importorskip("yaml")
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml: the parsers decide alone")
    assert yaml_too_deep("[" * 5000 + "]" * 5000)
    assert yaml_too_deep("[" * 5000)  # unclosed: still too deep first
    assert yaml_too_deep("".join("  " * i + "a:\n" for i in range(1100)))
    assert not yaml_too_deep("[" * 600 + "]" * 600)  # left to the parser (its own RecursionError)
    assert not yaml_too_deep("env_vars: [" + "A, " * 3000 + "]\n")  # wide, not deep
    assert not yaml_too_deep("env_vars:\n" + "  - {cuda: A, npu: B, status: rename}\n" * 2000)
    assert not yaml_too_deep("a: b: c\n" + "[" * 5000 + "]" * 5000)  # another error comes first


def test_a_rules_file_that_is_not_a_regular_file_or_is_huge(tmp_path):
    src = project(tmp_path)
    fifo = tmp_path / "rules.yaml"
    os.mkfifo(fifo)  # reading it would block for ever
    assert_refused(invoke("check", "--isolated", "--rules", str(fifo), str(src)), fifo, None, "not a regular file")
    big = write(tmp_path / "big.yaml", "env_vars: []\n" + "#" * (6 * 1024 * 1024) + "\n")
    assert_refused(invoke("check", "--isolated", "--rules", str(big), str(src)), big, None, "too large")
    missing = tmp_path / "missing.yaml"
    assert_refused(invoke("check", "--isolated", "--rules", str(missing), str(src)), missing, None, "cannot read")


def test_a_bad_value_in_a_rules_file_named_by_the_config(tmp_path):
    src = project(tmp_path)
    write(tmp_path / "npu-port.toml", 'rules = ["rules.yaml"]\n')
    rules = write(tmp_path / "rules.yaml", "env_vars:\n  - {cuda: MY_CUDA_CACHE, npu: 'X=1; touch x', status: rename}\n")
    before = (src / "run.sh").read_text()
    result = invoke("convert", str(src / "run.sh"))
    assert_refused(result, rules, 2, "env_vars row 1: npu: 'X=1; touch x' is not an environment-variable name")
    assert result.stdout == "" and (src / "run.sh").read_text() == before

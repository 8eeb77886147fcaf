"""Custom mapping rows (`--rules FILE.yaml`): they take effect in convert and check, and a bad file
gets a clear error naming the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.tables.user_tables import TableError, load_user_tables

GOOD = """\
# our cluster's own mapping
torch_cuda:
  rows:
    - {cuda: torch.cuda.get_arch_list, npu: torch.npu.get_device_name, status: analogue,
       hint: "we only log the device name"}
env_vars:
  - {cuda: MY_CUDA_CACHE, npu: MY_NPU_CACHE, status: rename}
"""

SOURCE = "import torch\nimport torch_npu\nprint(torch.cuda.get_arch_list())\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_file_loads_and_changes_convert(tmp_path):
    rules = write(tmp_path / "my_rules.yaml", GOOD)
    tables = load_user_tables(rules, "ascend")
    assert tables["env_vars"] == [{"cuda": "MY_CUDA_CACHE", "npu": "MY_NPU_CACHE", "status": "rename"}]
    src = write(tmp_path / "app.py", SOURCE)
    runner = CliRunner()
    plain = runner.invoke(cli, ["convert", "--isolated", str(src)], catch_exceptions=False)
    assert "torch.cuda.get_arch_list()" in plain.stdout  # built-in table: unsupported, left alone
    custom = runner.invoke(cli, ["convert", "--isolated", "--rules", str(rules), str(src)], catch_exceptions=False)
    assert custom.exit_code == 0, custom.output
    assert "print(torch.npu.get_device_name())" in custom.stdout
    # and check counts it as CUDA left over once the user's mapping says how to port it
    result = runner.invoke(cli, ["check", "--isolated", "--rules", str(rules), "--output-format", "github",
                                 str(src)], catch_exceptions=False)
    assert result.exit_code == 1 and "title=torch-cuda-api::CUDA left over" in result.stdout


def test_rules_file_from_config_is_relative_to_it(tmp_path):
    (tmp_path / "cfg").mkdir()
    write(tmp_path / "cfg" / "my_rules.yaml", GOOD)
    write(tmp_path / "npu-port.toml", 'rules = ["cfg/my_rules.yaml"]\n')
    src = write(tmp_path / "app.py", SOURCE)
    result = CliRunner().invoke(cli, ["convert", str(src)], catch_exceptions=False)
    assert "torch.npu.get_device_name()" in result.stdout


@pytest.mark.parametrize("text,line,needle", [
    ("env_vars:\n  - {cuda: A, npu: B, status: rename}\n  - {cuda: C, npux: D, status: rename}\n", 3,
     "env_vars row 2: unknown key 'npux'"),
    ("env_vars:\n  - cuda: A\n    npu: B\n    status: renamed\n", 4,
     "env_vars row 1: status: 'renamed' is not one of keep, rename, unsupported"),
    ("env_vars:\n  - {cuda: A, status: rename}\n", 2, "env_vars row 1: status 'rename' needs an 'npu' name"),
    ("env_vars:\n  - {npu: B, status: rename}\n", 2, "env_vars row 1: missing key 'cuda'"),
    ("env_vars:\n  - {cuda: 7, npu: B, status: rename}\n", 2, "env_vars row 1: cuda: expected a non-empty string"),
    ("torch_cuda:\n  rows:\n    - {cuda: torch.cuda.foo, npu: torch.npu.synchronise, status: analogue}\n", 3,
     "npu: 'torch.npu.synchronise' does not exist in torch_npu"),
    ("\n\ncuda_tables:\n  - {cuda: A}\n", 3, "unknown table 'cuda_tables'"),
    ("env_vars:\n  rows:\n    - {cuda: A, npu: B, status: rename}\n  extra: 1\n", 4, "env_vars: unknown key 'extra'"),
    ("env_vars:\n  - {cuda: A, npu: B, status: rename\n  - {cuda: C}\n", 3, "not valid YAML"),
    ("env_vars: {cuda: A}\n", 1, "env_vars: unknown key 'cuda' (a table holds `rows:`)"),
    ("env_vars: 3\n", 1, "env_vars: expected a list of rows"),
    ("- {cuda: A}\n", 1, "expected a mapping of table names"),
])
def test_bad_rules_file_names_the_key_and_line(tmp_path, text, line, needle):
    rules = write(tmp_path / "bad_rules.yaml", text)
    with pytest.raises(TableError) as err:
        load_user_tables(rules, "ascend")
    assert str(err.value).startswith(f"{rules.resolve()}:{line}: "), str(err.value)
    assert needle in str(err.value)
    # on the command line it is a usage error (exit 2) with the same message
    src = write(tmp_path / "app.py", SOURCE)
    result = CliRunner().invoke(cli, ["check", "--isolated", "--rules", str(rules), str(src)])
    assert result.exit_code == 2 and needle in result.stderr


def test_user_env_rows_reach_python_and_shell(tmp_path):
    rules = write(tmp_path / "my_rules.yaml", GOOD)
    py = write(tmp_path / "env.py", 'import os\ncache = os.environ["MY_CUDA_CACHE"]\n')
    sh = write(tmp_path / "run.sh", "#!/bin/bash\nexport MY_CUDA_CACHE=/tmp/c\npython train.py\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", "--isolated", "--rules", str(rules), str(py), str(sh),
                                      "--out", str(out), "-j", "1"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert 'os.environ["MY_NPU_CACHE"]' in (out / "env.py").read_text()
    assert "export MY_NPU_CACHE=/tmp/c" in (out / "run.sh").read_text()

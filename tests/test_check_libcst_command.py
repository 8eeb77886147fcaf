"""npu-port's rules as a LibCST codemod command, driven through LibCST's own codemod runner API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from libcst.codemod import (
    CodemodContext,
    TransformFailure,
    TransformSkip,
    TransformSuccess,
    parallel_exec_transform_with_prettyprint,
    transform_module,
)

from npu_port.transpiler.core.libcst_command import PortToNpu
from npu_port.transpiler.core.registry import UnknownRuleError

ROOT = Path(__file__).resolve().parent.parent
GPU = "import torch\n\ntorch.cuda.synchronize()\nprint(torch.cuda.get_arch_list())\n"


def test_transform_module_ports_and_warns():
    result = transform_module(PortToNpu(CodemodContext(filename="train.py")), GPU)
    assert isinstance(result, TransformSuccess)
    assert result.code == ("import torch\nimport torch_npu\n\ntorch.npu.synchronize()\n"
                           "print(torch.cuda.get_arch_list())\n")
    assert any("torch-cuda-api" in w and "get_arch_list" in w for w in result.warning_messages)
    again = transform_module(PortToNpu(CodemodContext(filename="train.py")), result.code)
    assert isinstance(again, TransformSuccess) and again.code == result.code


def test_select_and_unknown_rule():
    result = transform_module(PortToNpu(CodemodContext(), select="torch-npu-import"), GPU)
    assert isinstance(result, TransformSuccess) and "torch.cuda.synchronize()" in result.code
    with pytest.raises(UnknownRuleError):
        PortToNpu(CodemodContext(), select="no-such-rule")


def test_unparsable_module_fails_in_libcst_not_in_us():
    result = transform_module(PortToNpu(CodemodContext()), "def f(:\n")
    assert isinstance(result, (TransformFailure, TransformSkip))


def test_parallel_runner_rewrites_files(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(GPU, encoding="utf-8")
    untouched = tmp_path / "plain.py"
    untouched.write_text("x = 1\n", encoding="utf-8")
    result = parallel_exec_transform_with_prettyprint(
        PortToNpu, [str(path), str(untouched)], jobs=1, format_code=False, hide_progress=True,
        repo_root=str(tmp_path), codemod_args={"target": "ascend", "select": "", "ignore": "", "extras": False})
    assert (result.successes, result.failures) == (2, 0)
    assert "torch.npu.synchronize()" in path.read_text(encoding="utf-8")
    assert untouched.read_text(encoding="utf-8") == "x = 1\n"


def test_libcst_tool_command_line(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(GPU, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "libcst.tool", "codemod", "-x", "npu_port.transpiler.core.libcst_command.PortToNpu",
                           "--no-format", "--hide-progress", "--select", "torch-cuda-api", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert path.read_text(encoding="utf-8") == GPU.replace("torch.cuda.synchronize", "torch.npu.synchronize")


def test_the_command_lives_beside_the_engine_and_defines_no_rule():
    import npu_port.transpiler.core.libcst_command as module
    from npu_port.transpiler.core.rules import Rule

    assert not module.__name__.startswith("npu_port.codemods")
    assert not [o for o in vars(module).values() if isinstance(o, type) and issubclass(o, Rule)]

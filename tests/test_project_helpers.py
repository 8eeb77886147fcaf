"""--keep-cuda uses a framework's own device helpers only where the converted project has them: a VERL
fork (or an old release) without verl/utils/device.py gets torch's own forms, never an import of a module
it lacks (issue 35 item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.analysis.project_modules import project_defines
from npu_port.transpiler.cli import cli

WORKER = ("import torch\n\n\nclass Worker:\n    def init(self, rank):\n        torch.cuda.set_device(rank)\n"
          "        x = torch.zeros(2, device=\"cuda\")\n        return x.sum().item()\n")
HELPERS = ("import torch\n\n\ndef is_npu_available():\n    return hasattr(torch, 'npu')\n\n\n"
           "def get_device_name():\n    return 'npu' if is_npu_available() else 'cuda'\n\n\n"
           "def get_torch_device():\n    return getattr(torch, get_device_name())\n\n\n"
           "def get_device_id():\n    return get_torch_device().current_device()\n\n\n"
           "def get_nccl_backend():\n    return 'hccl' if is_npu_available() else 'nccl'\n")


def _fork(root: Path, with_helpers: bool) -> Path:
    for folder in ("verl", "verl/utils", "verl/workers"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    (root / "verl" / "workers" / "worker.py").write_text(WORKER)
    if with_helpers:
        (root / "verl" / "utils" / "device.py").write_text(HELPERS)
    return root


@pytest.mark.parametrize("with_helpers", [False, True])
def test_keep_cuda_imports_verl_helpers_only_where_the_tree_has_them(tmp_path, with_helpers):
    src = _fork(tmp_path / "fork", with_helpers)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(src), "--keep-cuda", "--out", str(out), "--no-cache",
                                      "--isolated", "--torch-version", "2.6"])
    assert result.exit_code == 0, result.output
    worker = (out / "verl" / "workers" / "worker.py").read_text()
    assert ("from verl.utils.device import" in worker) == with_helpers, worker
    assert "torch.cuda.set_device" not in worker


def test_project_defines_reads_the_tree(tmp_path):
    src = _fork(tmp_path / "fork", with_helpers=True)
    path = str(src / "verl" / "workers" / "worker.py")
    assert project_defines(path, "verl.utils.device", ("get_device_id", "get_torch_device")) is True
    assert project_defines(path, "verl.utils.device", ("get_resource_name",)) is False
    assert project_defines(path, "verl.utils.platform", ("x",)) is False
    assert project_defines(str(tmp_path / "elsewhere.py"), "verl.utils.device", ("get_device_id",)) is None

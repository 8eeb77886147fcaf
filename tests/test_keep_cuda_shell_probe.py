"""The launcher's --keep-cuda device probe (transpiler/text/shell.PROBE_LINES) run by bash on a stand-in of
each kind of host: a PATH with the Ascend driver's npu-smi, and one with NVIDIA's nvidia-smi."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.text.shell import PROBE_LINES

bash = shutil.which("bash")
pytestmark = pytest.mark.skipif(bash is None, reason="no bash")

LAUNCHER = b"""#!/bin/bash
set -euo pipefail
if ! command -v nvidia-smi >/dev/null 2>&1; then exit 3; fi
nvidia-smi
ray start --head --num-gpus=8
torchrun --nproc_per_node=8 train.py --device cuda --dist-backend nccl
"""


def _host(tmp_path, tool: str) -> dict[str, str]:
    stubs = tmp_path / tool
    stubs.mkdir()
    for name in (tool, "ray", "torchrun"):
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*"\n', encoding="utf-8")
        stub.chmod(0o755)
    return {"PATH": f"{stubs}:/usr/bin:/bin"}


@pytest.mark.parametrize(("tool", "device", "backend"), [("npu-smi", "npu", "hccl"), ("nvidia-smi", "cuda", "nccl")])
def test_probe_lines_pick_the_host(tmp_path, tool, device, backend):
    script = "\n".join(PROBE_LINES.values()) + '\necho "$DEVICE $DIST_BACKEND $SMI"\ndevice_smi\n'
    out = subprocess.run([bash, "-c", script], env=_host(tmp_path, tool), capture_output=True, text=True, check=True)
    status = "npu-smi info" if device == "npu" else "nvidia-smi "
    assert out.stdout.splitlines() == [f"{device} {backend} {tool}", status]


@pytest.mark.parametrize(("tool", "expected"), [
    ("npu-smi", ['npu-smi info', 'ray start --head --resources={"NPU": 8}',
                 "torchrun --nproc_per_node=8 train.py --device npu --dist-backend hccl"]),
    ("nvidia-smi", ["nvidia-smi ", "ray start --head --num-gpus=8",
                    "torchrun --nproc_per_node=8 train.py --device cuda --dist-backend nccl"]),
])
def test_converted_launcher_runs_on_both_hosts(tmp_path, tool, expected):
    engine = Engine(Settings(select=("shell-nvidia-smi", "shell-ray-start", "shell-device-args"), keep_cuda=True))
    out = engine.convert(LAUNCHER, "run.sh").output
    assert out is not None and b"--num-gpus=8" in out
    (tmp_path / "run.sh").write_bytes(out)
    done = subprocess.run([bash, str(tmp_path / "run.sh")], env=_host(tmp_path, tool), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected


def test_probe_lines_are_looked_for_once_per_script_not_per_word(monkeypatch):
    # shell-nvidia-smi asks, for every command word, whether it sits on a probe line: searching the text
    # each time made vllm-ascend's 68 KB install script cost 3 s of CPU. The search is per script now.
    from npu_port.transpiler.text import shell

    calls = []
    real = shell._probe_line_span
    monkeypatch.setattr(shell, "_probe_line_span", lambda text, name: calls.append(name) or real(text, name))
    script = b"#!/bin/bash\n" + b"".join(b"echo step %d\nnvidia-smi -L\n" % i for i in range(300))
    for keep_cuda in (False, True):
        calls.clear()
        Engine(Settings(select=("shell-nvidia-smi",), keep_cuda=keep_cuda)).convert(script, "run.sh")
        assert len(calls) <= 4 * len(PROBE_LINES)

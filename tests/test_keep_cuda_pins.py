"""`convert --keep-cuda` on projects that pin torch 2.1, 2.4, 2.6 (through vLLM 0.8) and 2.9, and on a VERL fork
without verl.utils.device (tests/data/keep_cuda_pins): every torch name the output gains must exist in that
torch release and in the torch-npu release paired with it, as the wheels say (torch_device_api.json), and
every module it imports must be there (issue 35).

The check reads the output's syntax tree: `torch.accelerator.X` (and, for its memory functions, an NPU
allocator they reach), `torch.amp.X`, `torch.get_device_module`, torch's top-level device names, `torch.npu.X`
(the NPU side of an explicit choice), and `from verl.utils.device import ...`. `torch.cuda.X` is the input's
own (a GPU host runs it as before). Nothing here runs the converted code.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.tables import api_facts

DATA = Path(__file__).parent / "data" / "keep_cuda_pins"
SNAPSHOT = json.loads((api_facts.SNAPSHOT_DIR / "torch_device_api.json").read_text(encoding="utf-8"))


def _convert(tmp_path: Path, project: str) -> tuple[dict[str, str], str]:
    """The project's files with the common script beside them, converted with --keep-cuda: the outputs by
    relative path, and stderr (the line that says which torch)."""
    tree = tmp_path / project
    shutil.copytree(DATA / project, tree)
    if project != "verl_fork":
        shutil.copy(DATA / "common" / "train.py", tree / "train.py")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(tree), "--keep-cuda", "--isolated", "--no-cache", "--out",
                                      str(out), "-q"])
    assert result.exit_code == 0, result.output
    texts = {p.relative_to(out).as_posix(): p.read_text(encoding="utf-8") for p in out.rglob("*.py")}
    line = CliRunner().invoke(cli, ["convert", str(tree / next(iter(sorted(texts)))), "--keep-cuda", "--isolated",
                                    "--diff"]).stderr
    return texts, line


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _choice_npu_side(node: ast.AST) -> bool:
    """`(torch.npu if hasattr(torch, "npu") else torch.cuda)`: the value of an attribute read."""
    return isinstance(node, ast.IfExp) and _dotted(node.body) == "torch.npu" and _dotted(node.orelse) == "torch.cuda"


def missing_names(code: str, minor: str) -> list[str]:
    """The torch names in `code` that torch `minor` (or its torch-npu) lacks."""
    torch = SNAPSHOT["torch"][minor]
    npu = SNAPSHOT["torch_npu"].get(minor)
    accelerator = torch["accelerator"] or {}
    missing = []
    tree = ast.parse(code)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # `torch.accelerator` of `...X`
    for node in ast.walk(tree):
        if id(node) in inner:
            continue
        if isinstance(node, ast.Attribute) and _choice_npu_side(node.value):
            if npu is not None and node.attr not in npu["npu_names"]:
                missing.append(f"torch.npu.{node.attr}")
            continue
        name = _dotted(node) if isinstance(node, ast.Attribute) else None
        if name is None or not name.startswith("torch.") or isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        head, _, rest = name[len("torch."):].partition(".")
        first = rest.split(".")[0]
        if head == "accelerator" and first:
            record = accelerator.get(first)
            if record is None:
                missing.append(name)
            elif record.get("defined_in") == "torch.accelerator.memory" and torch["accelerator_memory_needs_device_allocator"] \
                    and npu is not None and npu["allocator_base"] != "c10::DeviceAllocator":
                missing.append(f"{name} (the NPU allocator of torch-npu {minor} is no DeviceAllocator)")
        elif head == "accelerator" and not accelerator:
            missing.append(name)
        elif head == "amp" and first and first in torch["amp"] and torch["amp"][first] is None:
            missing.append(name)
        elif head == "get_device_module" and not (torch["get_device_module"] or {}).get("no_argument_is_current_accelerator"):
            missing.append(name)
        elif head in torch["top_level"] and not rest and not torch["top_level"][head]:
            missing.append(name)
        elif head == "npu" and first and npu is not None and first not in npu["npu_names"]:
            missing.append(name)
    return missing


def test_the_check_can_fail():
    assert missing_names("import torch\ntorch.accelerator.synchronize()\n", "2.4") == ["torch.accelerator.synchronize"]
    assert missing_names("import torch\ntorch.accelerator.memory_allocated()\n", "2.9")
    assert missing_names("import torch\ntorch.get_device_module().manual_seed(0)\n", "2.1")
    assert missing_names('import torch\n(torch.npu if hasattr(torch, "npu") else torch.cuda).ExternalStream(1)\n', "2.9")
    assert not missing_names("import torch\ntorch.accelerator.synchronize()\n", "2.6")


@pytest.mark.parametrize(("project", "minor", "why"), [
    ("torch21", "2.1", "requirements.txt:2 accepts it"),
    ("torch24", "2.4", "pyproject.toml:4 accepts it"),
    ("torch26", "2.6", "setup.py:3 accepts vllm 0.8.0, which requires torch 2.6"),
    ("torch29", "2.9", "setup.cfg:7 accepts it"),
])
def test_every_emitted_torch_name_exists_at_the_pinned_torch(tmp_path, project, minor, why):
    texts, said = _convert(tmp_path, project)
    assert f"torch {minor} ({why})" in said
    code = texts["train.py"]
    kept = [line.strip() for line in code.splitlines() if line.lstrip().startswith("torch.cuda.") or "= torch.cuda." in line]
    # torch.npu.ipc_collect is missing from torch-npu 2.3-2.5: below 2.6 the line stays CUDA's (with a warning).
    assert kept == (["torch.cuda.ipc_collect()"] if minor in ("2.1", "2.4") else [])
    assert missing_names(code, minor) == []
    assert "get_device_module" not in code  # torch.cpu on a host without an accelerator lacks manual_seed_all
    assert ("torch.accelerator." in code) == (minor >= "2.6" and len(minor) == 3)
    assert ".current_stream()" in code and "torch.accelerator.current_stream" not in code  # .cuda_stream is read


def test_a_verl_fork_without_verl_utils_device_gets_torchs_own_forms(tmp_path):
    texts, said = _convert(tmp_path, "verl_fork")
    assert "torch 2.6 (requirements.txt:1 accepts vllm 0.8.5, which requires torch 2.6)" in said
    code = texts["verl/workers/fsdp_worker.py"]
    assert "torch.cuda.set_device" not in code
    assert "verl.utils.device" not in code and "get_torch_device" not in code
    for path, text in texts.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("verl."):
                assert (tmp_path / "out" / (node.module.replace(".", "/") + ".py")).exists() or \
                    (tmp_path / "out" / node.module.replace(".", "/") / "__init__.py").exists(), (path, node.module)
    assert missing_names(code, "2.6") == []


def test_no_pin_means_the_oldest_torch_npu_release(tmp_path):
    (tmp_path / ".git").mkdir()
    shutil.copy(DATA / "common" / "train.py", tmp_path / "train.py")
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "train.py"), "--keep-cuda", "--isolated"])
    assert result.exit_code == 0, result.output
    assert "torch 2.1 (no torch, vllm or verl pin found near the inputs" in result.stderr
    assert missing_names(result.stdout, "2.1") == [] and "torch.accelerator" not in result.stdout


def test_the_forks_tests_outside_its_package_read_the_forks_verl(tmp_path):
    # tests/ lies beside the fork's verl/, not in it: the fork's tree still decides (no verl.utils.device).
    texts, _ = _convert(tmp_path, "verl_fork")
    assert "verl.utils.device" not in texts["tests/worker_check.py"]
    assert "torch.cuda.synchronize()" not in texts["tests/worker_check.py"]


def test_a_cuda_call_left_as_is_keeps_its_device_argument(tmp_path):
    (tmp_path / ".git").mkdir()
    source = "import torch\n\n\ndef place(m):\n    m.cuda(torch.cuda.current_device())\n"
    (tmp_path / "place.py").write_text(source)
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "place.py"), "--keep-cuda", "--isolated",
                                      "--torch-version", "2.4"])
    assert result.exit_code == 0, result.output
    assert "m.cuda(torch.cuda.current_device())" in result.stdout
    assert "left whole: this `.cuda(...)` stays" in result.stderr

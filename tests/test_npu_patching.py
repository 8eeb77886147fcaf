"""NPU code already, project-wide (issue 34: no false errors on MindSpeed-RL, vllm-ascend): a module that runs
after `torch_npu.contrib.transfer_to_npu` / MindSpeed's `megatron_adaptor` patched torch.cuda onto the NPU
(imported by it, by one of its packages' __init__.py, or by a module its own module-level imports run), and a
test or tool of an NPU framework whose package is the project's. `convert` leaves such files and `check` flags
nothing in them: both read FileDispatch.npu_framework (analysis/dispatch.npu_framework_reason)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.analysis.dispatch import npu_framework_reason
from npu_port.transpiler.analysis.npu_patching import patched_by
from npu_port.transpiler.analysis.project_modules import recording_reads
from npu_port.transpiler.cli import cli

CUDA_BODY = "import torch\n\n\ndef run(x):\n    torch.cuda.synchronize()\n    return x.cuda()\n"


def _write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "setup.py").write_text("from setuptools import setup\nsetup(name='demo')\n")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# MindSpeed-RL's shape: the package's __init__ imports a subpackage whose __init__ re-exports the module
# that imports transfer_to_npu; every module of the package, and a script importing the package, run after it.
PATCHED_PROJECT = {
    "rl/__init__.py": "from .models import Engine\n",
    "rl/models/__init__.py": "from .engine import Engine\n",
    "rl/models/engine.py": "import torch\nfrom torch_npu.contrib import transfer_to_npu\n\n\nclass Engine:\n    pass\n",
    "rl/utils/__init__.py": "",
    "rl/utils/memory.py": CUDA_BODY,
    "cli/train.py": "from rl.utils.memory import run\n" + CUDA_BODY,
    "tools/standalone.py": CUDA_BODY,
}


def test_modules_run_after_the_patching_import_are_npu_code(tmp_path):
    root = _write(tmp_path, PATCHED_PROJECT)
    memory = root / "rl/utils/memory.py"
    with recording_reads() as reads:
        why = patched_by(str(memory), memory.read_text())
    assert why == "importing it runs torch_npu.contrib.transfer_to_npu first, in rl/models/engine.py"
    assert str(root / "rl" / "models" / "engine.py") in reads  # what a cached result depends on
    script = root / "cli/train.py"
    assert "transfer_to_npu" in patched_by(str(script), script.read_text())
    # A module nothing patched runs before (it imports nothing of the package) is converted as before.
    loose = root / "tools/standalone.py"
    assert patched_by(str(loose), loose.read_text()) == ""
    assert npu_framework_reason(str(loose), loose.read_text()) == ""


def test_the_import_itself_and_megatron_adaptor_count_where_they_run_unconditionally():
    assert patched_by("<m>", "import torch_npu\nfrom torch_npu.contrib import transfer_to_npu\n") \
        == "it imports torch_npu.contrib.transfer_to_npu"
    assert patched_by("<m>", "from mindspeed import megatron_adaptor\n") == "it imports mindspeed.megatron_adaptor"
    assert patched_by("<m>", "import mindspeed_llm.megatron_adaptor\n") == "it imports mindspeed_llm.megatron_adaptor"
    # Inside a function, an `if` or a `try`, the code also runs where it is not imported: not NPU code already.
    for text in ("def f():\n    from torch_npu.contrib import transfer_to_npu\n",
                 "try:\n    from torch_npu.contrib import transfer_to_npu\nexcept ImportError:\n    pass\n",
                 "import torch_npu\n# from torch_npu.contrib import transfer_to_npu\n"):
        assert patched_by("<m>", text) == "", text


def test_an_import_inside_a_function_of_the_package_patches_nothing_for_its_siblings(tmp_path):
    files = dict(PATCHED_PROJECT)
    files["rl/models/engine.py"] = "def load():\n    from torch_npu.contrib import transfer_to_npu\n"
    root = _write(tmp_path, files)
    memory = root / "rl/utils/memory.py"
    assert patched_by(str(memory), memory.read_text()) == ""


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def test_convert_leaves_and_check_passes_what_runs_after_the_patch(tmp_path):
    root = _write(tmp_path / "src", PATCHED_PROJECT)
    out = tmp_path / "out"
    code, _ = _run("convert", str(root), "--out", str(out), "-q", "-j", "1", "--no-cache")
    assert code in (0, 1)
    for rel in ("rl/utils/memory.py", "cli/train.py", "rl/models/engine.py"):
        assert (out / rel).read_text() == (root / rel).read_text(), rel
    assert "torch.npu.synchronize()" in (out / "tools/standalone.py").read_text()  # nothing patched it
    code, text = _run("check", "--isolated", "--no-cache", "--output-format", "json", str(root))
    errors = {Path(f["file"]).relative_to(root).as_posix() for f in json.loads(text)["findings"]
              if f["severity"] == "error"}
    assert errors == {"tools/standalone.py"}, errors


def test_a_test_of_the_projects_npu_framework_package_is_npu_code(tmp_path):
    """vllm-ascend's tests/ut/patch/.../test_patch_distributed.py loads vllm_ascend's modules by path and
    passes backend="nccl" to test the non-HCCL path: a module of the framework's own project naming it."""
    root = _write(tmp_path / "proj", {"fw_ascend/__init__.py": "", "plugin_npu/__init__.py": "",
                             "plugin_npu/patch.py": 'import torch\nif torch.cuda.is_available():\n    pass\n'})
    test = 'PATH = "fw_ascend/patch/distributed.py"\n\n\ndef test_non_hccl():\n    make(backend="nccl")\n'
    assert npu_framework_reason(str(root / "tests/test_patch.py"), test) \
        == "a module of fw_ascend's project that names it"
    # A test that does not name the package, or a project without such a package, is not.
    assert npu_framework_reason(str(root / "tests/test_other.py"), 'make(backend="nccl")\n') == ""
    assert npu_framework_reason(str(tmp_path / "elsewhere" / "t.py"), test) == ""
    # A package named for the NPU (verl_npu, a plugin loaded on NPU hosts) is NPU code by its path.
    assert npu_framework_reason(str(root / "plugin_npu/patch.py"), "") == "it is part of plugin_npu"

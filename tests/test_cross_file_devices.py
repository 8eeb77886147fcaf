"""Device facts that cross files (issue 39 item 1): a device constant or resolver defined in one module and
compared in another is dispatch; a device value passed to the project's own function flows into the
positions that function's body uses it in, or stays where that function dispatches on it. The whole
project is converted by fixtures/projects/cross_file_devices (test_projects); these tests pin the parts."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.analysis.project_devices import imported_npu_values, project_function
from npu_port.transpiler.analysis.project_modules import recording_reads
from npu_port.transpiler.cli import cli

PROJECT = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "cross_file_devices" / "input"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_imported_values_follow_relative_absolute_and_re_exported_names(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from .dev import DEVICE as DEV\n",
        "pkg/dev.py": "def name():\n    return 'npu' if has_npu() else 'cuda'\n\n\nDEVICE = name()\nOTHER = 3\n",
        "pkg/loader.py": "def load():\n    if is_torch_npu_available():\n        pass\n    return object()\n",
        "pkg/use.py": ("from pkg import DEV\nfrom .dev import name as n, OTHER\nfrom . import dev\n"
                       "import pkg.dev as d\nfrom pkg.loader import load\nimport torch\n"),
    })
    text = (tmp_path / "pkg/use.py").read_text()
    with recording_reads() as reads:
        found = imported_npu_values(str(tmp_path / "pkg/use.py"), text)
    assert found == {"DEV", "n", "dev.name", "dev.DEVICE", "d.name", "d.DEVICE"}
    assert str(tmp_path / "pkg" / "dev.py") in reads  # what a cached result depends on
    # a file outside any package, and a library import, are no project values
    (tmp_path / "loose.py").write_text("from torch import cuda\n")
    assert imported_npu_values(str(tmp_path / "loose.py"), "from torch import cuda\n") == frozenset()


def test_project_function_follows_a_package_re_export(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "from .mesh import build as make\n",
                      "pkg/mesh.py": "def build(device_type):\n    return device_type\n",
                      "pkg/run.py": "from pkg import make\n"})
    found = project_function(str(tmp_path / "pkg/run.py"), "from pkg import make\n", "make")
    assert found is not None and found[0] == str(tmp_path / "pkg" / "mesh.py") and found[2] == "build"


def _convert(src: Path, out: Path, cache: Path) -> str:
    result = CliRunner().invoke(cli, ["convert", str(src), "--out", str(out), "--force", "-q", "-j", "1",
                                      "--cache-dir", str(cache)])
    assert result.exit_code in (0, 1), result.output
    return (out / "devkit" / "train.py").read_text()


def test_a_cached_result_is_not_used_once_a_file_it_read_changes(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(PROJECT, src)
    first = _convert(src, tmp_path / "out", tmp_path / "cache")
    assert 'if DEVICE_TYPE == "cuda":\n        torch.cuda.reset_peak_memory_stats()' in first
    # The helper module stops naming the NPU: its constant is now a single-device one, converted with it.
    (src / "devkit" / "device.py").write_text('DEVICE_TYPE = "cuda"\n\n\ndef get_device_name():\n    return DEVICE_TYPE\n')
    second = _convert(src, tmp_path / "out", tmp_path / "cache")
    assert 'if DEVICE_TYPE == "npu":\n        torch.npu.reset_peak_memory_stats()' in second
    fresh = _convert(src, tmp_path / "fresh", tmp_path / "cache2")
    assert second == fresh


def test_a_tests_mirror_of_the_package_name_finds_the_package_beside_it(tmp_path):
    # tests/pkg/ (a package named like the project's) must not hide pkg/ from the test's imports.
    _write(tmp_path, {
        "pyproject.toml": "",
        "pkg/__init__.py": "",
        "pkg/dev.py": "def name():\n    return 'npu' if is_npu_available() else 'cuda'\n",
        "tests/__init__.py": "",
        "tests/pkg/__init__.py": "",
        "tests/pkg/test_dev.py": "from pkg.dev import name\n",
    })
    test = tmp_path / "tests" / "pkg" / "test_dev.py"
    assert imported_npu_values(str(test), test.read_text()) == {"name"}


def test_code_for_a_vllm_release_before_vllm_ascend_is_left_whole(tmp_path):
    from npu_port.codemods._cuda_packages import package_rows
    from npu_port.transpiler.analysis.dispatch import FIRST_ASCEND_VLLM
    from npu_port.transpiler.analysis.project_pins import release

    row = next(r for r in package_rows("ascend") if r.name == "vllm")
    assert release(row.ascend_from) == FIRST_ASCEND_VLLM  # one fact, read by the pin rule and the adapters
    worker = "import torch\n\n\ndef init(rank):\n    torch.cuda.set_device(rank)\n"
    _write(tmp_path, {"verl/third_party/vllm/vllm_v_0_6_3/worker.py": worker,
                      "verl/third_party/vllm/vllm_v_0_7_3/worker.py": worker})
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "verl"), "--out", str(out), "-j", "1", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert (out / "third_party/vllm/vllm_v_0_6_3/worker.py").read_text() == worker
    assert "torch.npu.set_device" in (out / "third_party/vllm/vllm_v_0_7_3/worker.py").read_text()
    assert "written for vLLM 0.6.3" in result.output

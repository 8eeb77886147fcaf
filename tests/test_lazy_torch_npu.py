"""A library that loads torch_npu only where it is installed (accelerate's `is_npu_available()`, ms-swift's NPU
patches) must keep importing on GPU and CPU hosts: the modules a port changes get the guarded import, and a
script outside the package the plain one (issue 39)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.cli import cli

MODULE = "import torch\n\n\ndef batch(data):\n    return data.to(torch.cuda.current_device())\n"
LOADER = ("import importlib.util\n\n\ndef is_npu_available():\n    if importlib.util.find_spec('torch') is None:\n"
          "        return False\n    try:\n        import torch_npu  # noqa: F401\n    except ImportError:\n"
          "        return False\n    return True\n")
GUARDED = "try:\n    import torch_npu"


def _project(root: Path, loader: bool) -> Path:
    (root / "lib" / "utils").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text("")
    (root / "lib" / "utils" / "__init__.py").write_text("")
    (root / "lib" / "utils" / "megatron.py").write_text(MODULE)
    (root / "train.py").write_text(MODULE)
    if loader:
        (root / "lib" / "imports.py").write_text(LOADER)
    return root


def _convert(src: Path, out: Path, cache: Path) -> tuple[str, str]:
    result = CliRunner().invoke(cli, ["convert", str(src), "--out", str(out), "--force", "-q", "-j", "1",
                                      "--isolated", "--cache-dir", str(cache)])
    assert result.exit_code in (0, 1), result.output
    return (out / "lib" / "utils" / "megatron.py").read_text(), (out / "train.py").read_text()


def test_a_package_that_loads_torch_npu_lazily_gets_the_guarded_import(tmp_path):
    module, script = _convert(_project(tmp_path / "src", loader=True), tmp_path / "out", tmp_path / "cache")
    assert GUARDED in module and "torch.npu.current_device()" in module
    assert "\nimport torch_npu\n" in script and GUARDED not in script


def test_without_such_a_loader_the_import_is_plain(tmp_path):
    module, _ = _convert(_project(tmp_path / "src", loader=False), tmp_path / "out", tmp_path / "cache")
    assert "\nimport torch_npu\n" in module and GUARDED not in module


def test_a_loader_added_later_is_seen_through_the_cache(tmp_path):
    src = _project(tmp_path / "src", loader=False)
    first, _ = _convert(src, tmp_path / "out", tmp_path / "cache")
    assert GUARDED not in first
    (src / "lib" / "imports.py").write_text(LOADER)  # a new module: the package's listing changed
    second, _ = _convert(src, tmp_path / "out", tmp_path / "cache")
    assert GUARDED in second

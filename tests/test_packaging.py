"""The wheel holds one import namespace, npu_port, with every sub-package; no maintainer tool ships."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"npu_port.transpiler": "transpiler", "npu_port.codemods": "codemods", "npu_port.skeletons": "skeletons"}


def _declared() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def test_every_sub_package_of_the_checkout_is_declared():
    on_disk = {"npu_port"}
    for name, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join([name, *rel.parts]))
    assert on_disk == _declared()


@pytest.mark.slow
@pytest.mark.network  # the build backend comes from the package index
def test_the_wheel_installs_one_namespace_and_no_tool(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    wheel = next(tmp_path.glob("npu_port-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert top == {"npu_port"}
    assert not [n for n in names if n.startswith("npu_port/tools/") or n.startswith("tools/")]
    assert "npu_port/codemods/data/ascend/torch_cuda.yaml" in names
    assert any(n.startswith("npu_port/skeletons/") and n.endswith(".j2") for n in names)

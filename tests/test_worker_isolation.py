"""No process the tool starts imports code from the folder it runs in or the tree it converts.

Every module name a worker imports (its own start-up, the engine and all rules, LibCST, the standard
library) is planted as a `NAME.py` that leaves a mark when imported, in the current folder and at the
top of the tree being converted; the CLI then runs there as a user types it, with worker processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# What a worker process imports to convert files with every rule, the fork server's start-up included.
_LIST_WORKER_MODULES = r"""
import sys
import multiprocessing.forkserver, multiprocessing.spawn
import npu_port.transpiler.bulk.worker, npu_port.transpiler.bulk.worker_warmup, npu_port.transpiler.bulk.executors
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
engine = Engine(Settings())
for name, text, language in [("a.py", "import torch\nx = torch.ones(1).cuda()\n", "python"),
                             ("a.sh", "export CUDA_VISIBLE_DEVICES=0\n", "shell"),
                             ("a.yaml", "trainer:\n  device: cuda\n", "yaml")]:
    engine.convert(text.encode(), name, language)
print("\n".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _worker_module_names() -> list[str]:
    out = subprocess.run([sys.executable, "-c", _LIST_WORKER_MODULES], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    names = [n for n in out if n.isidentifier() and n not in ("__main__", "sys", "builtins")]
    assert {"json", "shutil", "tempfile", "typing", "re", "libcst", "npu_port", "yaml"} <= set(names)
    return names


def _cli() -> list[str]:
    """The installed console script, as a user runs it (its folder, not the current one, is on the path)."""
    script = Path(sys.executable).with_name("npu-port")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; sys.path[:] = [p for p in sys.path if p]; "
                                  "from npu_port.transpiler.cli import main; main()"]


def _plant(folder: Path, names: list[str], marks: Path) -> None:
    for name in names:
        (folder / f"{name}.py").write_text(f"open({str(marks / name)!r}, 'w').close()\n")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    base = tmp_path_factory.mktemp("planted")
    marks = base / "marks"
    marks.mkdir()
    here = base / "here"
    src = here / "src"
    src.mkdir(parents=True)
    names = _worker_module_names()
    _plant(here, names, marks)
    _plant(src, names, marks)
    for i in range(4):
        (src / f"train_{i}.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    (src / "run.sh").write_text("export CUDA_VISIBLE_DEVICES=0,1\n")
    return here, marks, len(names)


def _run(here: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    return subprocess.run([*_cli(), *args], cwd=here, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow  # the CLI as a subprocess, its workers importing 100+ planted names
@pytest.mark.parametrize("args, code", [
    (["convert", "src", "--out", "out", "-j", "2", "--no-cache"], 0),
    (["convert", "src", "--check", "-j", "2"], 3),
    (["check", "src", "-j", "2", "--select", "ALL"], 1),
])
def test_workers_import_nothing_from_the_current_folder_or_the_input_tree(planted, args, code):
    here, marks, count = planted
    proc = _run(here, *args)
    assert count > 100
    assert sorted(p.name for p in marks.iterdir()) == [], proc.stderr
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    if args[0] == "convert" and "--out" in args:
        assert ".npu()" in (here / "out" / "train_0.py").read_text()


@pytest.mark.slow  # the CLI starts its own Ray instance
def test_ray_workers_import_nothing_from_the_current_folder(planted):
    pytest.importorskip("ray")
    here, marks, _ = planted
    proc = _run(here, "convert", "src", "--out", "out-ray", "--executor", "ray", "-j", "2", "--no-cache",
                "--report", "report.json")
    assert sorted(p.name for p in marks.iterdir()) == [], proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert json.loads((here / "report.json").read_text())["errors"] == []
    assert ".npu()" in (here / "out-ray" / "train_3.py").read_text()



def test_a_virtualenv_inside_the_tree_being_converted_stays_on_the_workers_path(tmp_path, monkeypatch):
    """`repo/.venv/bin/npu-port convert repo`: the interpreter's own site-packages lie inside the input
    tree and must stay, or no worker can import its dependencies; the repository's own folders go."""
    from npu_port.transpiler.bulk.isolation import worker_sys_path

    repo = tmp_path / "repo"
    site = repo / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (repo / "src").mkdir()
    monkeypatch.setattr(sys, "prefix", str(repo / ".venv"))
    monkeypatch.setattr(sys, "path", [str(site), str(repo / "src"), str(repo), *sys.path])
    monkeypatch.chdir(tmp_path)
    path = worker_sys_path([str(repo)])
    assert str(site) in path
    assert str(repo / "src") not in path and str(repo) not in path

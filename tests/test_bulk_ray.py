"""`--executor ray` on a local Ray instance: the same tree as the local executor, hazards included."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from bulk_support import HAZARD_FAILURES, SMALL_MAX_BYTES, HazardRule, build_tree, tree_digest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core import registry

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a local Ray instance starts for the module

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def local_ray():
    # The workers must import the project and this folder (the hazard rule travels by reference).
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


@pytest.fixture
def with_hazard_rule(monkeypatch):
    from npu_port.transpiler.bulk import runner

    real = registry.all_rules()
    monkeypatch.setattr(registry, "all_rules", lambda: {**real, HazardRule.ID: HazardRule})
    monkeypatch.setattr(runner, "INLINE_MAX_BYTES", 0)  # local workers even for this small tree: a crash costs one


def _convert(src: Path, out: Path, report: Path, executor: str, *extra: str):
    r = CliRunner().invoke(cli, ["convert", str(src), "--out", str(out), "--executor", executor, "-j", "2",
                                 "--no-cache", "--report", str(report), *extra], catch_exceptions=False)
    errors = {Path(e["file"]).name: e["error"] for e in json.loads(report.read_text())["errors"]}
    return r, errors


def test_ray_executor_writes_the_same_tree_as_local_processes(tmp_path, local_ray, with_hazard_rule):
    src = build_tree(tmp_path, copies=10)
    (src / "hang.py").unlink()  # timeouts have their own test: here they would only cost time
    before = tree_digest(src)
    trees, errors = {}, {}
    for executor in ("local", "ray"):
        out = tmp_path / executor
        r, errors[executor] = _convert(src, out, tmp_path / f"{executor}.json", executor,
                                       "--max-bytes", str(SMALL_MAX_BYTES))
        assert r.exit_code == 1, r.output
        trees[executor] = tree_digest(out)
    assert tree_digest(src) == before
    assert trees["ray"] == trees["local"]
    assert set(errors["ray"]) == set(errors["local"]) >= HAZARD_FAILURES - {"hang.py"}
    assert "ValueError: a rule bug" in errors["ray"]["raises.py"]
    assert "crashed" in errors["ray"]["crash.py"]
    assert ".npu()" in (tmp_path / "ray" / "pkg" / "model_3.py").read_text()


def test_ray_executor_times_out_a_hanging_file(tmp_path, local_ray, with_hazard_rule):
    src = tmp_path / "repo"
    src.mkdir()
    (src / "hang.py").write_text("import torch\nHANG_HERE = torch.ones(1).cuda()\n")
    (src / "ok.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    r, errors = _convert(src, tmp_path / "out", tmp_path / "r.json", "ray", "--timeout", "1",
                         "--select", f"tensor-cuda-method,{HazardRule.ID}")
    assert r.exit_code == 1, r.output
    # The hang sleeps: no CPU time, so the wall-clock allowance (four times --timeout) ends it.
    assert set(errors) == {"hang.py"} and "timed out: no result after 4s" in errors["hang.py"]
    assert (tmp_path / "out" / "ok.py").read_text() == "import torch\nx = torch.ones(1).npu()\n"

"""The Ray resource set of a project is one decision (issue 39 item 3): the sites that ask Ray for GPUs in a
way no rule converts block every other Ray "GPU" rewrite of the project. The whole project is converted by
fixtures/projects/ray_resource_plan (test_projects); these tests pin which sites block."""

from __future__ import annotations

import shutil
from pathlib import Path

from npu_port.codemods._ray_project import ray_resource_blockers

ACTOR = "import ray\n\n\n@ray.remote(num_gpus=1)\nclass A:\n    pass\n"


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root / "pkg" / "actor.py"


def _blockers(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, str]]:
    here = _write(tmp_path, {"pkg/__init__.py": "", "pkg/actor.py": ACTOR, **files})
    return [(b.shown, b.kind) for b in ray_resource_blockers(str(here), "ascend")]


def test_num_gpus_spread_into_options_blocks_in_any_module_of_the_package(tmp_path):
    spread = ("def make(cls, n, pg):\n    options = {'scheduling_strategy': pg}\n    if n:\n"
              "        options['num_gpus'] = n\n    return cls.options(**options).remote()\n")
    assert _blockers(tmp_path, {"pkg/sub/__init__.py": "", "pkg/sub/pool.py": spread}) == [
        ("pkg/sub/pool.py:4", "spread")]


def test_dispatch_on_the_device_and_actor_constructor_kwargs_do_not_block(tmp_path):
    dispatch = ("def make(cls, n, device):\n    options = {}\n    if device == 'cuda':\n"
                "        options['num_gpus'] = n\n    if device == 'npu':\n"
                "        options['resources'] = {'NPU': n}\n    return cls.options(**options).remote()\n")
    # OpenRLHF: the keywords of `.remote(**kw)` go to the actor's constructor (vLLM's own num_gpus).
    ctor = ("def make(cls, hybrid):\n    kw = {'model': 'm', 'num_gpus': 0.2 if hybrid else 1}\n"
            "    return cls.options(num_gpus=1).remote(**kw)\n")
    assert _blockers(tmp_path, {"pkg/verl_pool.py": dispatch, "pkg/engine.py": ctor}) == []


def test_a_bundle_placed_in_its_own_module_does_not_block_one_placed_elsewhere_does(tmp_path):
    placed = ("from ray.util.placement_group import placement_group\n\n\ndef pg(n):\n"
              "    bundles = [{'GPU': 1, 'CPU': 1} for _ in range(n)]\n    return placement_group(bundles)\n")
    plan = "def plan(n):\n    return [{'GPU': 1, 'CPU': 4}] * n\n"
    user_dict = "STATS = {'GPU': 'util', 'RAM': 'gb'}\n"  # not bundle-shaped: no "CPU" key
    assert _blockers(tmp_path, {"pkg/placed.py": placed, "pkg/stats.py": user_dict}) == []
    assert _blockers(tmp_path, {"pkg/plan.py": plan}) == [("pkg/plan.py:2", "bundle")]


def test_outside_a_package_only_the_folder_of_the_file_is_the_project(tmp_path):
    (tmp_path / "deeper").mkdir()
    (tmp_path / "deeper" / "plan.py").write_text("B = [{'GPU': 1, 'CPU': 4}]\n")
    (tmp_path / "run.py").write_text(ACTOR)
    assert ray_resource_blockers(str(tmp_path / "run.py"), "ascend") == ()
    assert ray_resource_blockers("<stdin>", "ascend") == ()


def test_a_cached_result_is_not_used_once_the_blocking_site_changes(tmp_path):
    from click.testing import CliRunner

    from npu_port.transpiler.cli import cli

    project = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "ray_resource_plan" / "input"
    src = tmp_path / "src"
    shutil.copytree(project, src)

    def convert(out: str, cache: str) -> str:
        result = CliRunner().invoke(cli, ["convert", str(src), "--out", str(tmp_path / out), "--force", "-q",
                                          "-j", "1", "--cache-dir", str(tmp_path / cache)])
        assert result.exit_code in (0, 1), result.output
        return (tmp_path / out / "rlkit" / "launch.py").read_text()

    assert "@ray.remote(num_gpus=1)" in convert("out", "cache")
    # The plan stops building the bundles (the launcher no longer places them): nothing blocks any more.
    (src / "rlkit" / "resource_plan.py").write_text("def build_requirements(nodes, engines):\n    return {}\n\n\n"
                                                    "def shortfalls(requirements, cluster):\n    return []\n")
    second = convert("out", "cache")
    assert '@ray.remote(resources={"NPU": 1})' in second and 'get("NPU", 0)' in second
    assert second == convert("fresh", "cache2")

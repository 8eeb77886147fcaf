"""`npu-port standalone` on the fixture project: each script behaves the same once made standalone.

The original runs with the fixture project on PYTHONPATH; the standalone version runs alone (`python -I`)
in an empty temporary folder; their stdout must match byte for byte.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npu_port.transpiler.analysis.import_policy import dynamic_imports, forbidden_imports, relative_imports
from npu_port.transpiler.standalone import make_standalone

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "standalone"
SCRIPTS = sorted((PROJECT / "scripts").glob("*.py"))
STRIP = ("agentic_rl", "opencode")


def _run(args, cwd, pythonpath=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, timeout=60)


def test_there_are_a_dozen_scripts():
    assert len(SCRIPTS) >= 12


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_standalone_script_runs_alone_with_the_same_output(script, tmp_path):
    original = _run([str(script)], cwd=script.parent, pythonpath=PROJECT)
    assert original.returncode == 0, original.stderr.decode()

    result = make_standalone(script, STRIP, [PROJECT])
    assert result.changed and result.modules
    alone = tmp_path / "alone"
    alone.mkdir()
    out = alone / script.name
    out.write_text(result.code, encoding="utf-8")
    ran = _run(["-I", out.name], cwd=alone)
    assert ran.returncode == 0, ran.stderr.decode()
    assert ran.stdout == original.stdout

    tree = ast.parse(result.code)
    assert forbidden_imports(tree, STRIP) == []
    assert relative_imports(tree) == []
    assert all(not arg.strip("'\"").startswith(STRIP) for _, _, arg in dynamic_imports(tree))
    # Never shadow silently: each top-level def/class name is defined once.
    defs = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert len(defs) == len(set(defs))
    # A second run on the result changes nothing.
    again = make_standalone(out, STRIP, [PROJECT])
    assert again.code == result.code and not again.changed


def _code(name: str) -> str:
    return make_standalone(PROJECT / "scripts" / name, STRIP, [PROJECT]).code


def test_only_reached_definitions_are_inlined():
    code = _code("s02_import_alias.py")
    assert "def banner(" in code and "def _pad(" in code  # banner's helper comes along
    assert "not_exported" not in code and "seeded" not in code and "TrainConfig" not in code
    tools = _code("s13_tool_registry.py")
    assert "def echo(" in tools and "def add(" in tools  # registered at import: must still register
    assert "not_a_tool" not in tools


def test_blocks_are_labelled_and_ordered_like_python_runs_them():
    code = _code("s06_registry_side_effects.py")
    labels = [line for line in code.splitlines() if line.startswith("# from ")]
    assert labels == ["# from agentic_rl.config", "# from agentic_rl.registry", "# from agentic_rl",
                      "# from agentic_rl.envs.base",
                      "# from agentic_rl.envs.math_env", "# from agentic_rl.envs.code_env"]
    assert "MAX_TURNS = 4" in code and "TrainConfig" not in code and "LR =" not in code
    assert code.index("class MathEnv") < code.index('EVENTS.append("code_env loaded")') < code.index(
        "class CodeEnv")


def test_a_module_split_by_its_imports_is_labelled_continued():
    code = _code("s18_import_order.py")
    labels = [line for line in code.splitlines() if line.startswith("# from ")]
    assert labels == ["# from agentic_rl.registry", "# from agentic_rl", "# from agentic_rl.agents",
                      "# from agentic_rl.agents.memory", "# from agentic_rl.agents.planner",
                      "# from agentic_rl.agents, continued", "# from agentic_rl.agents.coder",
                      "# from agentic_rl.agents, continued"]
    result = make_standalone(PROJECT / "scripts" / "s18_import_order.py", STRIP, [PROJECT])
    assert result.modules == ["agentic_rl.registry", "agentic_rl", "agentic_rl.agents", "agentic_rl.agents.memory",
                              "agentic_rl.agents.planner", "agentic_rl.agents.coder"]  # each named once


def test_header_and_main_guard_keep_their_places():
    code = _code("s14_trainer_main.py")
    lines = code.splitlines()
    assert lines[0] == "#!/usr/bin/env python"
    assert lines[1].startswith('"""The usual shape')
    assert code.index("from __future__ import annotations") < code.index("import argparse") < code.index(
        "from dataclasses import dataclass, field") < code.index("# from agentic_rl.config")
    assert code.rstrip().endswith('if __name__ == "__main__":\n    main()')
    assert code.index("# from ") < code.index("def main()")


def test_collisions_are_renamed_and_every_use_rewritten():
    code = _code("s09_name_collisions.py")
    tree = ast.parse(code)
    defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    # The script keeps its own `helper`; the local `helper_trainer` in report() is not shadowed.
    assert defs == ["_named", "helper_trainer_2", "helper_text", "helper", "report"]
    # ... and a renamed function gets its own name back at run time (__name__, __qualname__).
    assert 'helper_trainer_2 = _named(helper_trainer_2, "helper")' in code
    assert "return helper_text(f\"{helper_trainer_2(values)} {helper_trainer}\")" in code


def test_relative_and_module_alias_uses_are_rewritten():
    code = _code("s10_circular_imports.py")
    assert "buffer.Buffer" not in code and "worker.Worker" not in code and "F.banner" not in code
    assert "self.buffer = Buffer(capacity=3)" in code and "return Worker(name)" in code


def test_output_is_deterministic_across_hash_seeds(tmp_path):
    outs = []
    for seed in ("1", "2"):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-m", "npu_port.transpiler", "standalone",
                               str(PROJECT / "scripts" / "s11_annotations.py"), "--strip", "agentic_rl,opencode",
                               "--path", str(PROJECT)], cwd=tmp_path, env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        outs.append(proc.stdout)
    assert outs[0] == outs[1]


def test_script_without_stripped_imports_is_unchanged(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import os\n\nprint(os.sep)\n", encoding="utf-8")
    result = make_standalone(script, STRIP, [PROJECT])
    assert not result.changed and result.code == script.read_text()

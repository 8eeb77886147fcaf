"""`npu-port standalone` keeps the original's observable behaviour where import timing and module state
matter: a module imported inside a function (or after other code) runs there, once, in the original order;
each module keeps its own globals. Each case runs as a user types it and the result runs alone (`python -I`)
in an empty folder; the expected output is the original's (tests/test_standalone.py compares it with the
original run for every bench script)."""

from __future__ import annotations

import ast
import os
import random
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.cli import cli

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "standalone"
SCRIPTS = PROJECT / "scripts"
BASE = ["--strip", "agentic_rl,opencode", "--path", str(PROJECT)]


def _standalone(script: Path, tmp_path: Path, *args: str) -> tuple[str, str]:
    """Made standalone with -o, then run alone: (the code, its stdout)."""
    alone = tmp_path / "alone"
    alone.mkdir(exist_ok=True)
    out = alone / script.name
    result = CliRunner().invoke(cli, ["standalone", str(script), *args, "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    ran = subprocess.run([sys.executable, "-I", out.name], cwd=alone, env=env, capture_output=True, timeout=60)
    assert ran.returncode == 0, ran.stderr.decode()
    return out.read_text(encoding="utf-8"), ran.stdout.decode()


def _top_level_names(code: str) -> set[str]:
    tree = ast.parse(code)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_a_tool_imported_in_a_method_registers_on_first_use_only(tmp_path):
    code, stdout = _standalone(SCRIPTS / "s15_lazy_tool_imports.py", tmp_path, *BASE)
    assert stdout == (
        "start ['add', 'echo']\n"
        "[opencode] hello\n"
        "before search ['add', 'echo']\n"  # the lazily imported tool is not registered yet
        "opencode.tools.budget: ready\n"  # web imports budget first: its print comes first
        "opencode.tools.web: registering fetch\n"
        "<html>example.org</html>\n"
        "after search ['add', 'echo', 'fetch']\n"
        "<html>example.org</html> 4\n"  # the second import runs nothing again; budget keeps its state
        '{"body": "[opencode] body", "title": "format"}\n'
        "(['add', 'echo', 'fetch'], 'fetch')\n")
    # Readable: the lazy module is a loader function, its import a call of it; eager code stays at the top.
    assert "def _import_opencode_tools_web():" in code
    assert "fetch" not in _top_level_names(code)  # defined inside its loader
    assert "def tool(" in code and "tool" in _top_level_names(code)
    assert "            _import_opencode_tools_web()  # a lazy import" in code
    assert code.index("def _import_opencode_tools_budget") < code.index("def _import_opencode_tools_web")


def test_a_plugin_package_runs_first_and_an_import_cycle_keeps_its_order(tmp_path):
    code, stdout = _standalone(SCRIPTS / "s17_lazy_plugins.py", tmp_path, *BASE)
    assert stdout == ("['add', 'echo']\n"
                      "opencode.plugins: 2 tools before plugins\n"
                      "['git', 'diff']\n"
                      "['git', 'diff']\n"
                      "['add', 'echo', 'git_status'] clean (2 plugins, git=git_status)\n")
    assert '@_import_once("opencode.plugins.git", _import_opencode_plugins)\ndef _import_opencode_plugins_git():' \
        in code  # the package's loader runs first
    assert "import threading\n" in code  # a lazy import is thread-safe, as `import` is
    # importlib.import_module with a constant name, as a statement, is inlined like `import`.
    assert 'importlib.import_module("opencode.plugins.diff")' not in code
    assert "        _import_opencode_plugins_diff()\n" in code


def test_each_module_keeps_its_own_counter(tmp_path):
    code, stdout = _standalone(SCRIPTS / "s16_shared_counters.py", tmp_path, *BASE)
    assert stdout == ("ep-1 rollout-2 1001 1002\n"
                      "0 1002\n"  # `from m import _counter` took a copy before the bumps
                      "1001 ep-3\n"
                      "7 128 7\n")  # a store into config is seen live, not through an importer's copy
    assert "global _counter\n" in code and "global _counter_ids\n" in code  # colliding names, one state each
    assert "first_seen = _counter\n" in code
    assert "    global DEFAULT_STEPS\n    DEFAULT_STEPS = steps" in code
    assert "DEFAULT_STEPS_ids = DEFAULT_STEPS" in code


def test_quiet_lazy_imports_are_inlined_at_the_top(tmp_path):
    """A function-level import of definitions and constants only: no loader, nothing to tell apart."""
    code, stdout = _standalone(SCRIPTS / "s08_function_level_import.py", tmp_path, *BASE)
    assert stdout == "[opencode] no args\n128\n"
    assert "_import_once" not in code and "def _import_" not in code and "threading" not in code


def test_an_import_after_other_code_runs_where_it_was(tmp_path):
    pkg = tmp_path / "proj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mode.py").write_text('import os\n\nprint("mode sees", os.environ.get("RUN_MODE"))\n'
                                 'MODE = os.environ.get("RUN_MODE", "slow")\n')
    script = tmp_path / "late.py"
    script.write_text('import os\n\nos.environ["RUN_MODE"] = "fast"\nprint("start")\n\n'
                      "from proj.mode import MODE  # noqa: E402\n\nprint(MODE)\n")
    code, stdout = _standalone(script, tmp_path, "--strip", "proj")
    assert stdout == "start\nmode sees fast\nfast\n"
    assert "_import_proj_mode()  # noqa: E402" in code


def test_a_module_imported_lazily_and_eagerly_runs_once_at_the_top(tmp_path):
    pkg = tmp_path / "proj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "reg.py").write_text('SEEN = []\nprint("reg runs")\n\n\ndef note(x):\n    SEEN.append(x)\n')
    script = tmp_path / "both.py"
    script.write_text("from proj.reg import SEEN\n\n\ndef later():\n    from proj.reg import note\n\n"
                      '    note("x")\n    return SEEN\n\n\nprint("start")\nprint(later(), later())\n')
    code, stdout = _standalone(script, tmp_path, "--strip", "proj")
    assert stdout == "reg runs\nstart\n['x', 'x'] ['x', 'x']\n"
    assert "def _import_" not in code


def test_a_script_that_rebinds_an_imported_name_gets_its_copy_after_the_inlined_code(tmp_path):
    """`from m import LR` then `global LR; LR = ...` in the script: the import becomes `LR = LR_config`,
    which must come after the inlined definition it reads (it used to come first: a NameError)."""
    script = tmp_path / "rebinds.py"
    script.write_text("from agentic_rl.config import LR\n\n\ndef double():\n    global LR\n    LR = LR * 2\n\n\n"
                      "double()\nprint(LR)\n")
    code, stdout = _standalone(script, tmp_path, *BASE)
    assert stdout == "0.0006\n"
    assert code.index("LR_config = 3e-4") < code.index("LR = LR_config") < code.index("def double")


def test_a_registry_that_fills_itself_through_its_base_class_keeps_every_entry(tmp_path):
    """Subclasses of a base with __init_subclass__ (and classes of a project metaclass) register when their
    module runs: they are kept although the script never names them (they used to be left out)."""
    code, stdout = _standalone(SCRIPTS / "s19_subclass_registry.py", tmp_path, *BASE)
    assert stdout == ("['format', 'strict_format'] ['Judge']\n"
                      "[1.0, 1.0]\n"
                      "['format', 'length', 'strict_format']\n")
    assert "class StrictFormatReward(FormatReward):" in code
    assert "def _import_agentic_rl_rewards_length_reward():" in code  # registers on first use only


def test_a_project_decorator_that_prints_keeps_a_lazy_module_lazy(tmp_path):
    pkg = tmp_path / "proj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "timing.py").write_text('def timed(fn):\n    print("wrapping", fn.__name__)\n    return fn\n')
    (pkg / "work.py").write_text("from proj.timing import timed\n\n\n@timed\ndef work():\n    return 42\n")
    script = tmp_path / "deco.py"
    script.write_text('def run():\n    from proj.work import work\n\n    return work()\n\n\nprint("start")\n'
                      "print(run())\n")
    code, stdout = _standalone(script, tmp_path, "--strip", "proj")
    assert stdout == "start\nwrapping work\n42\n"
    assert "def _import_proj_work():" in code


def test_an_assignment_whose_call_has_an_effect_runs_though_nobody_reads_it(tmp_path):
    code, stdout = _standalone(SCRIPTS / "s20_seed_at_import.py", tmp_path, *BASE)
    assert "SEED = seed_everything(1234)" in code  # left out before: the numbers differed
    rng = random.Random(1234)  # what random.seed(1234) gives the module-level functions
    assert stdout == f"{[rng.randint(0, 9) for _ in range(8)]}\n"


def test_a_loader_whose_code_raises_runs_again_on_the_next_import(tmp_path):
    pkg = tmp_path / "proj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "flaky.py").write_text('import os\n\nprint("flaky runs")\nif os.environ.get("FAIL") == "1":\n'
                                  '    os.environ["FAIL"] = "0"\n    raise ImportError("first time")\n'
                                  'VALUE = 7\n')
    script = tmp_path / "retry.py"
    script.write_text('import os\n\n\ndef get():\n    from proj.flaky import VALUE\n\n    return VALUE\n\n\n'
                      'os.environ["FAIL"] = "1"\ntry:\n    get()\nexcept ImportError as exc:\n    print("failed:", exc)\n'
                      "print(get(), get())\n")
    code, stdout = _standalone(script, tmp_path, "--strip", "proj")
    assert stdout == "flaky runs\nfailed: first time\nflaky runs\n7 7\n"

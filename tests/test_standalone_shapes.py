"""The script shapes of issue 36, each with the output the original prints (tests/test_standalone.py also
compares every bench script with its original run): a lazily imported package whose `__init__` only has an
effect, colliding class and function names, `match` bindings, imports kept for their effects, and the
imports of a module under a name bound another way too, which are refused with a clear `file:line` error."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from npu_port.transpiler.standalone import StandaloneError, make_standalone

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "standalone"
SCRIPTS = PROJECT / "scripts"
ERRORS = PROJECT / "errors"
STRIP = ("agentic_rl", "opencode")


def _alone(code: str, tmp_path: Path) -> str:
    folder = tmp_path / "alone"
    folder.mkdir(exist_ok=True)
    (folder / "script.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    ran = subprocess.run([sys.executable, "-I", "script.py"], cwd=folder, env=env, capture_output=True, timeout=60)
    assert ran.returncode == 0, ran.stderr.decode()
    return ran.stdout.decode()


def _standalone(name: str, tmp_path: Path) -> tuple[str, str]:
    code = make_standalone(SCRIPTS / name, STRIP, [PROJECT]).code
    return code, _alone(code, tmp_path)


def test_a_lazily_imported_package_with_only_an_effect_gets_a_loader(tmp_path):
    code, stdout = _standalone("s21_lazy_effect_only_package.py", tmp_path)
    assert stdout == "start\nopencode.announce: loaded\nhello a\nhello b\n"
    assert '@_import_once("opencode.announce")\ndef _import_opencode_announce():\n' \
           '    print("opencode.announce: loaded")\n' in code


def test_a_renamed_class_or_function_keeps_its_own_name_at_run_time(tmp_path):
    code, stdout = _standalone("s22_same_class_two_packages.py", tmp_path)
    assert stdout == ("Shape(radius=1.0) Shape(sides=3)\n"
                      "Shape Shape Shape Shape\n"
                      "Shape of radius 1.0 Shape with 3 sides Shape.kind\n"
                      "3.14 30 area area area\n"
                      "['Shape']\n")
    # The module's global is renamed; the object is not, and its decorators run after its name is back.
    assert 'Shape_shapes = dataclass(_named(Shape_shapes, "Shape"))' in code
    assert 'area_shapes = _named(area_shapes, "area")' in code


def test_a_decorator_that_records_the_name_sees_the_original_one(tmp_path):
    """`@remember` stores cls.__name__ when applied: applied after the name is given back."""
    pkg = tmp_path / "proj"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
        (pkg / sub / "defs.py").write_text(
            "NAMES = []\n\n\ndef remember(tag):\n    def deco(obj):\n        NAMES.append((tag, obj.__name__))\n"
            f"        return obj\n\n    return deco\n\n\n@remember('{sub}')\nclass Thing:\n    def who(self):\n"
            f"        return '{sub}', type(self).__qualname__, Thing.who.__qualname__\n")
    (pkg / "__init__.py").write_text("")
    script = tmp_path / "two_things.py"
    script.write_text("from proj.a.defs import NAMES as A, Thing as AThing\nfrom proj.b.defs import NAMES as B, "
                      "Thing as BThing\n\nprint(A, B, AThing().who(), BThing().who())\n")
    code = make_standalone(script, ("proj",)).code
    assert _alone(code, tmp_path) == ("[('a', 'Thing')] [('b', 'Thing')] ('a', 'Thing', 'Thing.who') "
                                      "('b', 'Thing', 'Thing.who')\n")
    assert "_decorator = remember_defs('b')" in code  # a decorator call still runs before its class


def test_match_pattern_captures_are_bindings(tmp_path):
    _, stdout = _standalone("s23_match_patterns.py", tmp_path)
    assert stdout.splitlines() == [
        "log ['level']", "call: 1 then [2, 3]", "scored 0.5", "scored 2", "empty idle", "pair 1,2", "pair 3,4",
        "text 'hi'", "other float", "final ['ok', 'steps']", "train {'workers': 4, 'seed': 1}", "[0, 1, 2] 2"]


def test_imports_kept_for_their_effects(tmp_path):
    code, stdout = _standalone("s24_import_for_effects.py", tmp_path)
    rng = random.Random(2024)
    assert stdout == (f"offline {[rng.randint(0, 9) for _ in range(5)]}\n"
                      "INFO opencode.steps: step 1\n2\n")
    assert "random.seed(2024)" in code and 'os.environ["OPENCODE_MODE"] = "offline"' in code
    assert "logging.basicConfig(" in code


def test_a_top_level_package_imported_only_for_its_init(tmp_path):
    pkg = tmp_path / "proj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('import os\nimport random\n\nrandom.seed(5)\nos.environ["PROJ_READY"] = "1"\n'
                                     'print("proj ready")\n')
    script = tmp_path / "effects.py"
    script.write_text('import os\nimport random\n\nimport proj  # noqa: F401\n\n'
                      'print(os.environ.get("PROJ_READY"), random.random())\n')
    result = make_standalone(script, ("proj",))
    assert result.modules == ["proj"]  # said as "inlined 1 module (proj)", not "uses nothing from proj"
    assert _alone(result.code, tmp_path) == f"proj ready\n1 {random.Random(5).random()}\n"


@pytest.mark.parametrize("name, expected", [
    ("e07_optional_module_import.py",
     ["e07_optional_module_import.py:2:5: error: import agentic_rl.config as cfg: binds 'cfg' to the module "
      "agentic_rl.config, and 'cfg' is bound another way too (line 4)"]),
    ("e08_branch_module_import.py",
     ["e08_branch_module_import.py:4:5: error: import opencode.text as text: binds 'text' to the module "
      "opencode.text, and 'text' is bound another way too (line 6)",
      "e08_branch_module_import.py:6:5: error: import agentic_rl.trainer as text: binds 'text' to the module "
      "agentic_rl.trainer, and 'text' is bound another way too (line 4)"]),
])
def test_a_name_that_may_hold_a_module_is_refused_with_both_lines(name, expected):
    with pytest.raises(StandaloneError) as caught:
        make_standalone(ERRORS / name, STRIP, [PROJECT])
    text = str(caught.value)
    for line in expected:
        assert line in text
    assert "hint: import the names you use instead" in text

"""The `npu-port standalone` command: errors name the construct and line, exit 1 and write nothing;
--allow-unresolved, folders, --convert, the pipe into `convert -`, -o/--output and a script with nothing
to inline."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "standalone"
ERRORS = PROJECT / "errors"
BASE = ["--strip", "agentic_rl,opencode", "--path", str(PROJECT)]


def _invoke(*args, input=None):
    return CliRunner().invoke(cli, ["standalone", *map(str, args)], input=input, catch_exceptions=False)


@pytest.mark.parametrize("name, expected", [
    ("e01_dynamic_import.py", ['e01_dynamic_import.py:3:14: error: importlib.import_module("agentic_rl.envs.'
                               'math_env"): dynamic import of the stripped package agentic_rl',
                               'e01_dynamic_import.py:4:9: error: __import__("opencode.tools")']),
    ("e02_undefined_name.py", ["agentic_rl/broken.py:2:12: error: missing_helper: name 'missing_helper' is not "
                               "defined in agentic_rl.broken"]),
    ("e03_missing_name.py", ["e03_missing_name.py:3:11: error: NO_SUCH_SETTING: module agentic_rl.config has no "
                             "name 'NO_SUCH_SETTING'"]),
    ("e04_missing_module.py", ["e04_missing_module.py:1:1: error: from agentic_rl.nowhere import thing: cannot "
                               "find the source of module agentic_rl.nowhere"]),
    ("e05_module_as_value.py", ["e05_module_as_value.py:4:19: error: cfg: the module object agentic_rl.config is "
                                "used as a value"]),
    ("e06_package_location.py", ["agentic_rl/paths.py:3:41: error: __file__: refers to the location of "
                                 "agentic_rl.paths"]),
])
def test_unresolvable_constructs_are_errors_and_nothing_is_written(name, expected, tmp_path):
    out = tmp_path / "out.py"
    result = _invoke(ERRORS / name, *BASE, "-o", out)
    assert result.exit_code == 1
    for text in expected:
        assert text in result.stderr
    assert "nothing written" in result.stderr
    assert not out.exists()


def test_c_extension_is_an_error(tmp_path):
    pkg = tmp_path / "agentic_rl"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_native.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    script = tmp_path / "uses_native.py"
    script.write_text("from agentic_rl._native import fast_sum\n\nprint(fast_sum([1, 2]))\n")
    result = _invoke(script, "--strip", "agentic_rl", "-o", tmp_path / "out.py")
    assert result.exit_code == 1
    assert "uses_native.py:1:1: error: from agentic_rl._native import fast_sum: agentic_rl._native is a compiled " \
           "extension" in result.stderr
    assert not (tmp_path / "out.py").exists()


def test_allow_unresolved_writes_a_raise_at_the_use_site(tmp_path):
    out = tmp_path / "out.py"
    result = _invoke(ERRORS / "e05_module_as_value.py", *BASE, "--allow-unresolved", "-o", out)
    assert result.exit_code == 0
    assert "warning standalone-unresolved cfg: the module object agentic_rl.config" in result.stderr
    code = out.read_text()
    assert "raise RuntimeError('npu-port standalone could not inline cfg" in code
    assert "print(LR)" in code  # the resolvable line before it still works
    ast.parse(code)


def test_folder_mode_mirrors_every_script_and_skips_the_packages(tmp_path):
    out = tmp_path / "out"
    result = _invoke(PROJECT, *BASE, "-o", out, "-q")
    assert result.exit_code == 1  # the error scripts fail, the others are written
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.py"))
    assert written == sorted(f"scripts/{p.name}" for p in (PROJECT / "scripts").glob("*.py"))
    assert not (out / "agentic_rl").exists()
    assert "nothing written" in result.stderr


def test_folder_mode_needs_out():
    result = _invoke(PROJECT / "scripts", *BASE)
    assert result.exit_code == 2 and "needs -o/--output OUT_DIR" in result.stderr


def test_sources_found_in_the_working_directory(tmp_path, monkeypatch):
    script = tmp_path / "elsewhere.py"
    script.write_text("from agentic_rl.config import BATCH\nprint(BATCH)\n")
    monkeypatch.chdir(PROJECT)
    result = _invoke(script, "--strip", "agentic_rl")
    assert result.exit_code == 0
    assert "BATCH = 32" in result.stdout


def test_convert_flag_and_pipe_into_convert(tmp_path):
    script = PROJECT / "scripts" / "s01_from_import.py"
    plain = _invoke(script, *BASE)
    assert plain.exit_code == 0
    flagged = _invoke(script, *BASE, "--convert", "--target", "ascend")
    assert flagged.exit_code == 0
    ast.parse(flagged.stdout)
    piped = CliRunner().invoke(cli, ["convert", "-", "--target", "ascend"], input=plain.stdout)
    assert piped.exit_code == 0
    assert piped.stdout == flagged.stdout
    bad = _invoke(script, *BASE, "--convert", "--select", "no-such-rule")
    assert bad.exit_code == 2


def test_output_flag_is_o_or_output_and_the_old_out_still_works(tmp_path):
    script = PROJECT / "scripts" / "s01_from_import.py"
    written = {}
    for flag in ("-o", "--output", "--out"):
        dest = tmp_path / f"{flag.strip('-')}.py"
        result = _invoke(script, *BASE, flag, dest)
        assert result.exit_code == 0, result.stderr
        assert f"-> {dest}" in result.stderr
        written[flag] = dest.read_text()
    assert written["-o"] == written["--output"] == written["--out"] == _invoke(script, *BASE).stdout
    clash = _invoke(script, *BASE, "-o", tmp_path / "a.py", "--out", tmp_path / "b.py")
    assert clash.exit_code == 2 and "give -o/--output once" in clash.stderr
    assert not (tmp_path / "a.py").exists() and not (tmp_path / "b.py").exists()


def test_help_names_the_output_flag_and_hides_the_old_spelling():
    text = _invoke("--help").output
    assert "-o, --output FILE" in text
    assert "--out " not in text and "--out\n" not in text
    assert "runs on first use" in text


def test_a_script_that_imports_nothing_stripped_says_nothing_was_inlined(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import os\n\nprint(os.sep)\n", encoding="utf-8")
    dest = tmp_path / "out.py"
    result = _invoke(script, "--strip", "agentic_rl", "-o", dest)
    assert result.exit_code == 0
    assert f"plain.py: imports nothing from agentic_rl: nothing inlined, copied unchanged -> {dest}" \
        in result.stderr
    assert dest.read_text() == script.read_text()
    # To stdout the copy is the whole stdout; the message stays on stderr, and -q hides it.
    piped = _invoke(script, "--strip", "agentic_rl,opencode")
    assert piped.stdout == script.read_text()
    assert "imports nothing from agentic_rl, opencode: nothing inlined" in piped.stderr
    assert "nothing inlined" not in _invoke(script, "--strip", "agentic_rl", "-q").stderr


def test_an_unused_stripped_import_is_removed_and_said(tmp_path):
    script = tmp_path / "unused.py"
    script.write_text("import agentic_rl.config  # noqa: F401\n\nprint(1)\n", encoding="utf-8")
    result = _invoke(script, *BASE)
    assert result.exit_code == 0
    assert "uses nothing from agentic_rl, opencode: nothing inlined, its imports removed" in result.stderr
    assert "agentic_rl" not in result.stdout


def test_folder_summary_counts_scripts_with_nothing_to_inline(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "plain.py").write_text("print(1)\n", encoding="utf-8")
    (src / "uses.py").write_text("from agentic_rl.config import LR\nprint(LR)\n", encoding="utf-8")
    result = _invoke(src, *BASE, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert "2 scripts: 2 written (1 with nothing to inline from agentic_rl, opencode), 0 failed" in result.stderr
    assert "plain.py: imports nothing" not in result.stderr  # one line for the folder, not one per script
    assert (tmp_path / "out" / "plain.py").read_text() == "print(1)\n"


def test_output_with_a_trailing_slash_is_a_folder_and_is_created(tmp_path):
    script = PROJECT / "scripts" / "s01_from_import.py"
    result = _invoke(script, *BASE, "-o", f"{tmp_path / 'new'}/")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "new" / "s01_from_import.py").read_text() == _invoke(script, *BASE).stdout
    existing = tmp_path / "existing"
    existing.mkdir()
    assert _invoke(script, *BASE, "-o", existing).exit_code == 0
    assert (existing / "s01_from_import.py").is_file()

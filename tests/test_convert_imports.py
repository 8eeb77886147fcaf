"""A one-file `convert` or `check` imports what its options need and no more: ruamel for a rules file,
rich's table for `config`, the output formats for --summary, rich's console only for a terminal, no
YAML parser for the built-in tables (benchmarks/bench_startup.py measures what that saves)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from npu_port.transpiler.core import rule_index
from npu_port.transpiler.core.rule_catalog import source_digest

# Modules a plain one-file run must not load, each imported by the option or command that uses it.
_OPTIONAL = ("ruamel.yaml", "rich.table", "html", "tomllib", "difflib", "npu_port.transpiler.output.formats",
             "npu_port.transpiler.bulk.git_copy")
# Modules no plain one-file run loads at all: rich's console and markup (output/console.py writes plain
# text itself where rich would), PyYAML (tables/builtin_tables.py holds the built-in tables),
# importlib.resources (the tables are found in the package folder) and, on convert, shutil (with bz2 and
# lzma: for copies) and tempfile (for writes; check's search for a VERL pin asks tempfile for /tmp, and
# tempfile imports shutil).
_HEAVY = ("rich.console", "rich.markup", "rich.text", "yaml", "importlib.resources", "shutil", "tempfile")

# Runs the CLI in-process in a fresh interpreter, as the console script would, then says what it imported.
_PROBE = r"""
import contextlib, io, json, sys
from npu_port.transpiler.cli import cli
optional, runs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
seen = []
for args in runs:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # convert writes bytes to stdout's buffer
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli(args, prog_name="npu-port")
        except SystemExit as exc:
            assert not exc.code, (args, exc.code)
    out.flush()
    seen.append({"out": out.buffer.getvalue().decode(), "modules": [m for m in optional if m in sys.modules]})
print(json.dumps(seen))
"""


def _probe(tmp_path: Path, *runs: list[str], modules=_OPTIONAL) -> list[dict]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(modules), json.dumps(list(runs))],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_one_file_convert_leaves_what_its_options_need_unimported(tmp_path):
    if rule_index.DIGEST != source_digest():  # a stale index imports every rule, YAML rules and ruamel too
        pytest.skip("transpiler/core/rule_index.py is stale: run python -m tools.docgen")
    (tmp_path / "tiny.py").write_text("import torch\nx = y.cuda()\n", encoding="utf-8")
    (tmp_path / "rules.yaml").write_text("env_vars:\n  rows:\n    - {cuda: MY_CUDA_VAR, npu: MY_NPU_VAR, "
                                         "status: rename}\n", encoding="utf-8")
    plain, with_rules, with_summary = _probe(
        tmp_path,
        ["convert", "tiny.py", "--isolated"],
        ["convert", "tiny.py", "--isolated", "--rules", "rules.yaml"],
        ["convert", "tiny.py", "--isolated", "--summary", "s.md"],
    )
    assert "x = y.to(\"npu\")" in plain["out"]  # the run did convert
    assert plain["modules"] == []
    assert "ruamel.yaml" in with_rules["modules"]  # the rules file is still read with ruamel
    assert "npu_port.transpiler.output.formats" in with_summary["modules"]
    assert (tmp_path / "s.md").read_text(encoding="utf-8").strip()


def test_one_file_convert_and_check_print_without_rich_or_a_yaml_parser(tmp_path):
    if rule_index.DIGEST != source_digest():
        pytest.skip("transpiler/core/rule_index.py is stale: run python -m tools.docgen")
    (tmp_path / "tiny.py").write_text("import torch\nx = y.cuda()\n", encoding="utf-8")
    (tmp_path / "clean.py").write_text("x = 1\n", encoding="utf-8")
    convert, check, clean = _probe(
        tmp_path,
        ["convert", "tiny.py", "--isolated", "--show-changes"],  # findings and the summary on stderr
        ["check", "tiny.py", "--isolated", "--exit-zero"],  # the text report on stdout
        ["check", "clean.py", "--isolated"],
        modules=_HEAVY,
    )
    assert "x = y.to(\"npu\")" in convert["out"]
    assert "tensor-cuda-method" in check["out"] and "passed" in clean["out"]
    assert convert["modules"] == []
    assert set(check["modules"]) <= {"tempfile", "shutil"} and set(clean["modules"]) <= {"tempfile", "shutil"}


def test_rich_is_imported_where_only_it_can_draw(tmp_path):
    (tmp_path / "tiny.py").write_text("x = y.cuda()\n", encoding="utf-8")
    statistics, = _probe(tmp_path, ["check", "tiny.py", "--isolated", "--exit-zero", "--statistics"],
                         modules=_HEAVY)
    assert "rich.console" in statistics["modules"]  # the table is rich's
    assert "tensor-cuda-method" in statistics["out"]

"""Commands that need no parser import none: `--version`, `--help`, `rules` and `explain` read the rules'
metadata from their source (core/rule_catalog.py) and the commands' summaries from cli.COMMANDS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

from npu_port.transpiler.cli import COMMANDS, cli
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.rule_catalog import catalog

ROOT = Path(__file__).resolve().parent.parent

# Each command runs in-process, as the console script would; then the child says what it imported.
_PROBE = r"""
import contextlib, io, json, sys
from npu_port.transpiler.cli import cli
seen = {}
for args in (["--version"], ["--help"], ["rules"], ["rules", "--json"], ["explain", "device-string"]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli(args, prog_name="npu-port")
        except SystemExit as exc:
            assert not exc.code, (args, exc.code)
    seen[" ".join(args)] = sorted(m for m in sys.modules if m == "libcst" or m.startswith(("libcst.",
                                  "npu_port.codemods.", "multiprocessing", "ruamel")))
    assert out.getvalue(), args
print(json.dumps(seen))
"""


def test_version_help_rules_and_explain_import_no_libcst_and_no_rule_module():
    proc = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {k: [] for k in ("--version", "--help", "rules", "rules --json",
                                                       "explain device-string")}


def test_the_catalog_read_from_source_is_what_the_registry_imports():
    rules = all_rules()
    found = catalog()
    assert found is not None and list(found) == list(rules)
    for rule_id, rule in rules.items():
        info = found[rule_id]
        assert (info.LANGUAGE, info.GROUP, info.SAFETY, info.description(), info.summary()) == \
            (rule.LANGUAGE, rule.GROUP, rule.SAFETY, rule.description(), rule.summary()), rule_id


def test_help_lists_each_commands_own_summary():
    ctx = click.Context(cli)
    for name, (_, _, summary) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.get_short_help_str(10**6) == summary, name

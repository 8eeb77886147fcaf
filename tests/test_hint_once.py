"""A long hint is printed in full once per rule in text output (check and convert); JSON keeps it whole."""
from __future__ import annotations

import json

from click.testing import CliRunner

from npu_port.transpiler.cli import cli

SOURCE = """from flash_attn import flash_attn_func


def attend(q, k, v):
    first = flash_attn_func(q, k, v)
    return flash_attn_func(first, k, v, causal=True)
"""
HINT_START = "hint: use torch_npu.npu_fusion_attention, which is not a 1:1 rename"


def _run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_check_text_prints_a_long_hint_once_and_json_keeps_every_one(tmp_path):
    path = tmp_path / "attn.py"
    path.write_text(SOURCE)
    text = _run("check", str(path), "--isolated", "--select", "unsupported-cuda-libs").output
    assert text.count(HINT_START) == 1
    assert text.count("hint: as for the first unsupported-cuda-libs finding above") == 2
    report = json.loads(_run("check", str(path), "--isolated", "--select", "unsupported-cuda-libs",
                             "--output-format", "json").output)
    hints = [f["hint"] for f in report["findings"]]
    assert len(hints) == 3 and len(set(hints)) == 1 and hints[0].startswith(HINT_START[len("hint: "):])


def test_convert_summary_prints_a_long_hint_once(tmp_path):
    path = tmp_path / "attn.py"
    path.write_text(SOURCE)
    result = CliRunner().invoke(cli, ["convert", str(path), "--isolated", "--select", "unsupported-cuda-libs"])
    err = result.stderr if result.stderr_bytes is not None else result.output
    assert err.count("(hint: use torch_npu.npu_fusion_attention") == 1
    assert err.count("(hint: as for the first unsupported-cuda-libs finding above)") == 2

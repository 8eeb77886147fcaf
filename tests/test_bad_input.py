"""Broken, odd and hostile inputs: a clear per-file message, the others converted, inputs untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings

GOOD = b"import torch\nx = torch.zeros(2).cuda()\n"


def _tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.py").write_bytes(GOOD)
    (src / "syntax.py").write_bytes(b"import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    (src / "py2.py").write_bytes(b"import torch\nprint 'cuda', torch.cuda.is_available()\n")
    (src / "latin1.py").write_bytes(
        "# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\nx = torch.zeros(1).cuda()\n".encode("latin-1"))
    (src / "crlf.py").write_bytes(b"import torch\r\nx = torch.zeros(1).cuda()\r\n")
    (src / "bom.py").write_bytes(b"\xef\xbb\xbfimport torch\nx = torch.zeros(1).cuda()\n")
    (src / "empty.py").write_bytes(b"")
    (src / "binary.py").write_bytes(b"\x7fELF\x00\x01\x02cuda\x00\xff\xfe")
    (src / "bad_utf8.py").write_bytes(b"import torch\ns = '\xff\xfe cuda'\n")
    return src


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_bad_files_fail_alone_and_inputs_stay(tmp_path):
    src = _tree(tmp_path)
    before = _hashes(src)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(src), "--out", str(out), "-j", "1"])
    assert result.exit_code == 1, result.output
    assert _hashes(src) == before
    for name, reason in [("syntax.py", "syntax error at line 2"), ("py2.py", "syntax error at line 2"),
                         ("binary.py", "binary file"), ("bad_utf8.py", "decode")]:
        assert name in result.output and reason in result.output, (name, result.output)
    assert (out / "good.py").read_bytes() == b"import torch\nimport torch_npu\nx = torch.zeros(2).npu()\n"
    assert (out / "crlf.py").read_bytes() == b"import torch\r\nimport torch_npu\r\nx = torch.zeros(1).npu()\r\n"
    assert (out / "bom.py").read_bytes().startswith(b"\xef\xbb\xbfimport torch\nimport torch_npu\n")
    latin = (out / "latin1.py").read_bytes()
    assert "caf\xe9".encode("latin-1") in latin and b".npu()" in latin
    assert (out / "empty.py").read_bytes() == b""


def test_engine_reports_line_of_syntax_error():
    result = Engine(Settings()).convert(b"import torch\nx = (torch.cuda\n", "broken.py")
    assert result.outcome.status == "failed"
    assert "line" in result.outcome.error


def test_nested_parentheses_are_kept_around_a_rewritten_name():
    data = b"import torch\nx = " + b"(" * 150 + b"torch.cuda" + b")" * 150 + b"\n"
    result = Engine(Settings()).convert(data, "nested.py")
    assert result.output == b"import torch\nimport torch_npu\nx = " + b"(" * 150 + b"torch.npu" + b")" * 150 + b"\n"

"""Files with old Mac line ends (a lone CR, no LF anywhere) come back with every CR, the last one too.

LibCST's native parser only takes a final "\\n" for a trailing newline, so a module parsed from a file
ending in "\\r" would print without its last CR; transpiler.python_source.parse_module keeps it.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.python_source import parse_module

CASES = [
    (b"import torch\rx = torch.zeros(1).cuda()\r",
     b"import torch\rimport torch_npu\rx = torch.zeros(1).npu()\r"),
    (b"import torch\rx = torch.zeros(1).cuda()\r\r",
     b"import torch\rimport torch_npu\rx = torch.zeros(1).npu()\r\r"),
    (b"import torch\rdef f():\r    return torch.zeros(1).cuda()\r# done\r",
     b"import torch\rimport torch_npu\rdef f():\r    return torch.zeros(1).npu()\r# done\r"),
    (b"import torch\rx = torch.zeros(1).cuda()",  # no line end at all after the last line: none added
     b"import torch\rimport torch_npu\rx = torch.zeros(1).npu()"),
]


@pytest.mark.parametrize("before,after", CASES)
def test_convert_keeps_every_cr_byte_for_byte(tmp_path, before, after):
    src = tmp_path / "mac.py"
    src.write_bytes(before)
    out = tmp_path / "out.py"
    result = CliRunner().invoke(cli, ["convert", str(src), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == after
    assert src.read_bytes() == before

    to_stdout = CliRunner().invoke(cli, ["convert", str(src)])
    assert to_stdout.exit_code == 0 and to_stdout.stdout_bytes == after

    from_stdin = CliRunner().invoke(cli, ["convert", "-"], input=before)
    assert from_stdin.exit_code == 0 and from_stdin.stdout_bytes == after


@pytest.mark.parametrize("source", [b"x = 1\r", b"x = 1\r\r", b"x = 1\n\r", b"x = 1\r\n\r", b"\r",
                                    b"if x:\r    pass\r\r", "x = 'caf\u00e9'\r"])
def test_a_parsed_module_prints_back_exactly(source):
    assert (parse_module(source).code if isinstance(source, str) else parse_module(source).bytes) == source

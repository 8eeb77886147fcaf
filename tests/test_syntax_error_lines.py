"""A syntax error is reported at the line (and column) where Python's own compiler puts it.

LibCST's native parser names the token after the mistake (the line after a missing colon or an unclosed
bracket) and line 1 for every tokenizer error; `convert`, `check` and `weave` say what `python` says.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli

BROKEN = {
    "missing_colon": "import torch\nx = 1\ndef f()\n    torch.cuda.synchronize()\n",
    "unclosed_bracket": "import torch\nx = (torch.cuda\ny = 2\n",
    "unclosed_at_end": "import torch\nx = 1\ny = [torch.cuda,\n",
    "bad_indent": "import torch\ndef f():\n    x = 1\n      torch.cuda()\n",
    "bad_dedent": "import torch\ndef f():\n    x = torch.cuda\n  y = 2\n",
    "unterminated_string": "import torch\nx = 1\ny = 'cuda\n",
    "bad_character": "import torch\nx = 1\ny = torch.cuda $ 2\n",
    "python2_print": "import torch\n\nprint 'cuda', torch.cuda.is_available()\n",
    "missing_body": "import torch\nx = torch.cuda\nif x:\n",
}


def _python_position(source: str) -> tuple[int, int]:
    try:
        compile(source, "broken.py", "exec")
    except SyntaxError as exc:
        return exc.lineno, exc.offset
    raise AssertionError("the case is meant to be broken")


def _reported_position(message: str) -> tuple[int, int]:
    m = re.search(r"syntax error at line (\d+), column (\d+)", message)
    assert m, message
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_convert_check_and_weave_report_pythons_line(tmp_path, name):
    source = BROKEN[name]
    line, column = _python_position(source)
    path = tmp_path / "broken.py"
    path.write_text(source)

    converted = CliRunner().invoke(cli, ["convert", str(path), "--out", str(tmp_path / "out.py")])
    assert converted.exit_code == 1
    assert _reported_position(converted.stderr) == (line, column), converted.stderr

    checked = CliRunner().invoke(cli, ["check", str(path), "--output-format", "json", "--isolated"])
    assert checked.exit_code == 1
    (error,) = json.loads(checked.stdout)["errors"]
    assert _reported_position(error["error"]) == (line, column)

    woven = CliRunner().invoke(cli, ["weave", str(path)])
    assert woven.exit_code == 1 and "does not parse" in woven.stderr
    assert _reported_position(woven.stderr) == (line, column), woven.stderr


def test_the_missing_colon_is_on_line_3_with_pythons_words(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(BROKEN["missing_colon"])
    result = CliRunner().invoke(cli, ["convert", str(path), "--out", str(tmp_path / "out.py")])
    assert "syntax error at line 3, column 8: expected ':'" in result.stderr


def test_valid_python_that_libcst_cannot_read_is_not_called_a_syntax_error(tmp_path):
    path = tmp_path / "strings.py"
    path.write_text("x = (" + " ".join(['"a"'] * 5000) + ")\nimport torch\ny = torch.zeros(1).cuda()\n")
    compile(path.read_text(), "strings.py", "exec")  # Python reads it
    result = CliRunner().invoke(cli, ["convert", str(path), "--out", str(tmp_path / "out.py")])
    assert result.exit_code == 1
    assert "syntax error" not in result.stderr and "valid Python that LibCST's parser cannot read" in result.stderr

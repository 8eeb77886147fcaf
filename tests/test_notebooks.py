"""Jupyter notebooks: code cells converted as one module (torch_npu imported once), IPython lines kept,
every byte outside the changed source lines kept, findings at the notebook file's own lines, and
anything that is no nbformat 4 notebook refused with a message, never a traceback."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import language_of
from npu_port.transpiler.core.settings import Settings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TRAIN = FIXTURES / "examples" / "notebook_train.input.ipynb"
MARKDOWN_ONLY = FIXTURES / "examples" / "notebook_markdown_only.input.ipynb"


def notebook(*cells, **dump) -> bytes:
    doc = {"cells": list(cells), "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    return (json.dumps(doc, **{"indent": 1, "sort_keys": True, "ensure_ascii": False, **dump}) + "\n").encode()


def code(source, n=None, outputs=()):
    lines = source.splitlines(True) if isinstance(source, str) else source
    return {"cell_type": "code", "execution_count": n, "metadata": {}, "outputs": list(outputs), "source": lines}


def markdown(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(True)}


def convert(data: bytes, name: str = "nb.ipynb", **settings):
    return Engine(Settings(**settings)).convert(data, name)


def sources(data: bytes) -> list[str]:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in json.loads(data)["cells"]]


def test_a_notebook_is_its_own_kind():
    assert language_of("a/b/Train.IPYNB") == "notebook"


def test_a_notebook_with_cuda_only_in_markdown_and_outputs_is_skipped_without_parsing(monkeypatch):
    from npu_port.transpiler.core import notebook as nb_module

    def no_parse(*args):
        raise AssertionError("a cell was parsed")

    data = MARKDOWN_ONLY.read_bytes()
    engine = Engine(Settings())
    monkeypatch.setattr(nb_module, "_prepare", no_parse)
    assert engine.needs_parse(data, "notebook", "nb.ipynb") == []
    monkeypatch.undo()
    assert engine.needs_parse(data, "notebook", "nb.ipynb") == []
    result = engine.convert(data, "nb.ipynb")
    assert result.outcome.status == "skipped" and result.output is None


def test_a_changed_notebook_differs_only_in_its_changed_source_lines():
    data = TRAIN.read_bytes()
    out = convert(data).output
    assert out is not None
    before, after = data.decode().splitlines(True), out.decode().splitlines(True)
    changed = [line for line in difflib.ndiff(before, after) if line[:1] in "+-"]
    assert changed
    for line in changed:  # each one an element of a `source` list: a JSON string on a line of its own
        assert isinstance(json.loads(line[2:].strip().rstrip(",")), str), line
    old, new = json.loads(data), json.loads(out)
    for cell_old, cell_new in zip(old["cells"], new["cells"]):
        if cell_old["source"] != cell_new["source"]:
            assert cell_old["cell_type"] == "code"
            cell_new["source"] = cell_old["source"]
    assert new == old  # outputs, metadata, markdown, execution counts: as they were


def test_nbformat_layouts_are_kept_byte_for_byte():
    """Written back in the file's own layout: indent 1 or 2, escaped or raw non-ASCII, a source as one
    string: the output is what json.dumps with the same layout writes for the converted notebook."""
    cells = [markdown("Use `.cuda()` — ünïcode"), code("import torch\nx = torch.ones(2).cuda()  # é\n", 1,
                                                       [{"output_type": "stream", "name": "stdout", "text": ["cuda"]}])]
    for dump in ({"indent": 1, "ensure_ascii": False}, {"indent": 2, "ensure_ascii": True}, {"indent": 4}):
        data = notebook(*cells, **dump)
        out = convert(data).output
        want = json.loads(data)
        want["cells"][1]["source"] = ["import torch\n", "import torch_npu\n", "x = torch.ones(2).npu()  # é\n"]
        assert out == notebook(*want["cells"], **dump), dump
    one_string = json.loads(notebook(*cells))
    one_string["cells"][1]["source"] = "import torch\nx = torch.ones(2).cuda()"
    out = convert(notebook(*one_string["cells"])).output
    one_string["cells"][1]["source"] = "import torch\nimport torch_npu\nx = torch.ones(2).npu()"
    assert out == notebook(*one_string["cells"])


def test_an_unchanged_notebook_is_the_same_bytes():
    data = notebook(code("import torch\nx = torch.ones(2)\n"), markdown("torch.cuda"))
    result = convert(data)
    assert result.output is None
    converted = convert(TRAIN.read_bytes()).output
    assert convert(converted).output is None  # a second run changes nothing


def test_torch_npu_is_imported_once_in_the_first_cell_that_imports_torch():
    data = notebook(code("import os\nprint(os.getcwd())\n"), code("import torch\n"),
                    code("import torch\nx = torch.ones(1).cuda()\n"), code("y = torch.zeros(1).cuda()\n"))
    result = convert(data)
    got = sources(result.output)
    assert got == ["import os\nprint(os.getcwd())\n", "import torch\nimport torch_npu\n",
                   "import torch\nx = torch.ones(1).npu()\n", "y = torch.zeros(1).npu()\n"]
    added = [f for f in result.outcome.findings if f.rule == "torch-npu-import"]
    assert len(added) == 1 and added[0].message.endswith("[cell 2, line 1]")


def test_ipython_lines_are_kept_and_the_python_around_them_converted():
    cell = ("%load_ext autoreload\n!pip install -q accelerate \\\n    peft\nfiles = !ls\nimport torch\n"
            "torch.cuda.synchronize?\n?torch.cuda\ndef f():\n    '''Usage:\n%run f\n    '''\n"
            "    !nvidia-smi\n    return torch.ones(1).cuda()\n")
    data = notebook(code(cell), code("%%bash\nexport CUDA_VISIBLE_DEVICES=0\n"),
                    code("%%time\nx = torch.ones(1).cuda()"))
    result = convert(data)
    assert result.outcome.status == "converted"
    got = sources(result.output)
    assert got[0] == cell.replace("import torch\n", "import torch\nimport torch_npu\n").replace(
        "torch.ones(1).cuda()", "torch.ones(1).npu()")
    assert got[1] == "%%bash\nexport CUDA_VISIBLE_DEVICES=0\n"  # not Python: left alone
    assert got[2] == "%%time\nx = torch.ones(1).npu()"
    assert not [f for f in result.outcome.findings if f.rule == "notebook-cell"]


def test_a_broken_cell_is_left_with_a_finding_and_the_others_converted():
    data = notebook(code("import torch\n"), code("def broken(:\n    torch.cuda.synchronize()\n"),
                    code("torch.cuda.synchronize()\n"))
    result = convert(data)
    got = sources(result.output)
    assert got[1] == "def broken(:\n    torch.cuda.synchronize()\n"
    assert got[2] == "torch.npu.synchronize()\n"
    (left,) = [f for f in result.outcome.findings if f.rule == "notebook-cell"]
    assert left.severity == "warning" and "cell 2 left as it is" in left.message
    text = data.decode().splitlines()
    assert '"def broken(:\\n"' in text[left.line - 1]


def test_findings_are_placed_on_the_notebook_files_own_lines():
    data = TRAIN.read_bytes()
    lines = data.decode().splitlines()
    for f in convert(data).outcome.findings:
        cell, line = f.message.rsplit("[cell ", 1)[1].rstrip("]").split(", line ")
        source = sources(data)[int(cell) - 1].splitlines(True)[int(line) - 1]
        element = json.dumps(source, ensure_ascii=False)
        assert lines[f.line - 1].strip().rstrip(",") == element, f
        assert lines[f.line - 1][f.col - 1:] != "", f


def test_column_counts_escapes_in_the_file():
    data = notebook(code('print("é\\t", torch.cuda.is_available())\nimport torch\n'), ensure_ascii=True)
    (f,) = [f for f in convert(data).outcome.findings if f.rule == "torch-cuda-api"]
    line = data.decode().splitlines()[f.line - 1]
    assert line[f.col - 1:].startswith("torch.cuda.is_available")


def test_a_future_import_in_a_later_cell_falls_back_to_cell_by_cell():
    data = notebook(code("import torch\n"), code("from __future__ import annotations\nx = torch.ones(1).cuda()\n"))
    got = sources(convert(data).output)
    assert got[1] == "from __future__ import annotations\nx = torch.ones(1).npu()\n"


def test_what_is_no_nbformat_4_notebook_is_refused_with_a_message():
    cases = {
        b'{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}': "nbformat 3",
        b'[1, 2, 3]': "without `nbformat` and `cells`",
        b'{"cells": [}': "not valid JSON",
        b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": 5}]}': "neither text nor a list",
        b'\xff\xfe': "not UTF-8",
        b'{"nbformat": 4, "cells": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}": "nested more than",
    }
    for data, why in cases.items():
        result = convert(data)
        assert result.outcome.status == "failed", data[:40]
        assert why in result.outcome.error and "Traceback" not in result.outcome.error, result.outcome.error


def test_convert_and_check_on_a_folder(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.ipynb").write_bytes(TRAIN.read_bytes())
    (src / "notes.ipynb").write_bytes(MARKDOWN_ONLY.read_bytes())
    (src / "old.ipynb").write_text('{"nbformat": 3, "worksheets": []}')
    runner = CliRunner()
    result = runner.invoke(cli, ["convert", str(src), "--out", str(tmp_path / "out"), "--no-cache"])
    assert result.exit_code == 1, result.output  # old.ipynb: named, with its reason
    assert "old.ipynb" in result.output and "nbformat 3" in result.output
    assert (tmp_path / "out" / "train.ipynb").read_bytes() == (FIXTURES / "examples" /
                                                               "notebook_train.expected.ipynb").read_bytes()
    assert (tmp_path / "out" / "notes.ipynb").read_bytes() == MARKDOWN_ONLY.read_bytes()
    (src / "old.ipynb").unlink()
    result = runner.invoke(cli, ["check", "--isolated", "--no-cache", "--output-format", "json", str(src)])
    report = json.loads(result.output)
    left = [f for f in report["findings"] if f["message"].startswith("CUDA left over")]
    assert left and all(f["file"].endswith("train.ipynb") for f in left)
    lines = TRAIN.read_text().splitlines()
    for f in left:
        assert "cuda" in lines[f["line"] - 1].lower() or f["rule"] == "torch-npu-import", f
    env = next(f for f in left if f["rule"] == "env-var-names")
    assert "ASCEND_RT_VISIBLE_DEVICES" in env["fix"]
    out = tmp_path / "out"
    result = runner.invoke(cli, ["check", "--isolated", "--no-cache", "--output-format", "json", str(out)])
    assert not [f for f in json.loads(result.output)["findings"] if f["message"].startswith("CUDA left over")]


def test_the_statement_of_a_timing_magic_is_converted():
    data = notebook(code("import torch\n%time torch.cuda.synchronize()\n%timeit -n 10 torch.ones(1).cuda()  # warm\n"
                         "%time\n%prun -s cumulative f(torch.cuda.current_device())"))
    result = convert(data)
    assert sources(result.output) == ["import torch\nimport torch_npu\n%time torch.npu.synchronize()\n"
                                      "%timeit -n 10 torch.ones(1).npu()  # warm\n%time\n"
                                      "%prun -s cumulative f(torch.npu.current_device())"]
    lines = data.decode().splitlines()
    for f in result.outcome.findings:
        if f.rule == "torch-cuda-api":
            assert lines[f.line - 1][f.col - 1:].startswith("torch.cuda."), f
    assert convert(result.output).output is None


def test_an_import_a_rule_removes_at_the_top_of_a_cell_keeps_the_cells_apart():
    """--keep-cuda removes `from torch.cuda import Event` once its uses are device-agnostic: the cell
    boundary in front of it stays, and the notebook is still converted as one module (one import)."""
    data = notebook(code("import torch\n"), code("from torch.cuda import Event\ne = Event(enable_timing=True)\n"),
                    code("x = torch.ones(1).cuda()\n"))
    got = sources(convert(data, keep_cuda=True).output)
    assert got[0].startswith("import torch\ntry:\n    import torch_npu")
    assert got[1:] == ["e = (torch.npu if hasattr(torch, \"npu\") else torch.cuda).Event(enable_timing=True)\n",
                       "x = torch.ones(1).to(torch.accelerator.current_accelerator())\n"]


def test_a_broken_cell_alone_with_cuda_is_reported():
    result = convert(notebook(code("import torch\nx = torch.ones(1).cuda() + \\")))
    assert result.output is None
    assert [f.rule for f in result.outcome.findings] == ["notebook-cell"]


def test_crlf_cells_get_crlf_lines():
    data = notebook(code(["import torch\r\n", "x = torch.ones(1).cuda()\r\n"]), code(["y = x.cuda()"]),
                    code(["!nvidia-smi\r\n", "%time z = y.cuda()\r\n", "print(z)"]))
    assert sources(convert(data).output) == ["import torch\r\nimport torch_npu\r\nx = torch.ones(1).npu()\r\n",
                                             "y = x.npu()", "!nvidia-smi\r\n%time z = y.npu()\r\nprint(z)"]


def test_a_notebook_over_max_bytes_is_refused_as_any_input(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.ipynb").write_bytes(TRAIN.read_bytes())
    result = CliRunner().invoke(cli, ["convert", str(src), "--out", str(tmp_path / "out"), "--no-cache",
                                      "--max-bytes", "1000"])
    assert result.exit_code == 1 and "too large" in result.output, result.output
    assert (tmp_path / "out" / "train.ipynb").read_bytes() == TRAIN.read_bytes()  # copied unconverted

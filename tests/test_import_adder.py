"""The engine's import adder writes what LibCST's AddImportsVisitor writes (it replaced it for speed)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, ImportItem

from npu_port.transpiler.core.import_adder import add_imports

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

SHAPES = {
    "empty": "",
    "no imports": "x = 1\n",
    "docstring": '"""Doc."""\nimport os\n\nx = 1\n',
    "docstring only": '"""Doc."""\n',
    "strict flag": "__strict__ = True\nimport os\nx = 1\n",
    "comment above code": "import os\n# a comment\nx = 1\n",
    "blank above code": "import os\n\n\nx = 1\n",
    "future": "from __future__ import annotations\nimport torch\n",
    "star": "from torch import *\nx = 1\n",
    "aliased": "import torch as t\nfrom torch import cuda as c\nx = 1\n",
    "relative": "from . import torch\nfrom .torch import npu\nx = 1\n",
    "parenthesized": "from torch import (\n    nn,\n    optim,\n)\nx = 1\n",
    "two from same": "from torch import nn\nfrom torch import optim\nx = 1\n",
    "import after code": "x = 1\nimport torch\n",
    "compound first": "if True:\n    import torch\nimport os\n",
    "two on a line": "import os; import sys\nx = 1\n",
    "dotted": "import importlib.util\nx = 1\n",
    "crlf": "import os\r\n\r\nx = 1\r\n",
}

REQUESTS = [
    [("torch", None)],
    [("torch_npu", None), ("torch", None)],
    [("torch", "npu"), ("torch", "nn")],
    [("importlib.util", None), ("shutil", None)],
    [("verl.utils.device", "get_torch_device"), ("verl.utils.device", "get_device_name"), ("os", None)],
    [("__future__", "annotations"), ("torch", "cuda")],
    [("os", "path"), ("torch", "optim"), ("sys", None)],
]


def _libcst(module: cst.Module, needed: list[tuple[str, str | None]]) -> str:
    items = [ImportItem(m, obj_name=n) for m, n in needed]
    return AddImportsVisitor(CodemodContext(), items).transform_module(module).code


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_same_as_add_imports_visitor_on_every_leading_block_shape(shape: str) -> None:
    module = cst.parse_module(SHAPES[shape])
    for needed in REQUESTS:
        assert add_imports(module, needed).code == _libcst(module, needed), needed


def test_same_as_add_imports_visitor_on_the_fixture_inputs() -> None:
    files = sorted(FIXTURES.rglob("*.input.py"))
    assert len(files) > 100
    for path in files:
        module = cst.parse_module(path.read_bytes())
        # Besides the fixed requests, names from the modules the file already imports from: they join.
        own = [(cst.Module([]).code_for_node(s.body[0].module), "zz_added")
               for s in module.body[:5]
               if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.ImportFrom)
               and s.body[0].module is not None and not s.body[0].relative]
        needed = [("torch_npu", None), ("verl.utils.device", "get_torch_device"), *own]
        assert add_imports(module, needed).code == _libcst(module, needed), (path, needed)


def test_nothing_to_add_returns_the_module_itself() -> None:
    module = cst.parse_module("import torch\nfrom os import path\n")
    assert add_imports(module, [("torch", None), ("os", "path")]) is module

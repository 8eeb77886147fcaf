"""Positions generated one top-level statement at a time equal the whole module's (NodeLocations,
itself held equal to LibCST's PositionProvider by tests/test_bulk_locations.py), node by node, and a
file whose asked nodes lie in a few statements is not generated whole."""

from __future__ import annotations

import libcst as cst
import pytest
from test_bulk_locations import SOURCES

from npu_port.transpiler.analysis.locations import NodeLocations, StatementLocations
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings

MORE = [
    b"class A:\n    '''doc'''\n    x = 1; y = 2\n\n    # c\n    @property\n    def p(self):\n        return 1\n"
    b"    class B:\n        def q(self): ...\n    z = [\n  1]\n",
    b"class C: pass\nclass D:\n  if x:\n      y = 1\n  else:\n   y = 2\n",
    b"\xef\xbb\xbfimport torch\nx = 1\n",  # a BOM: the text has one character more than the code
    b"import torch; x = torch.zeros(1).cuda(); y = 2\n\n\n# c\n@a\n# between\n@b(\n  1)\nclass C: pass\n",
    b"(\n    torch.cuda\n).synchronize()\nz = 1\n",
    b"# header\n\n# more\nimport torch\nif x:\n    pass\n# trailing comment\n",
    b"x = 1\r\ny = '''a\r\nb'''\r\nz = 2\n",
    b"x = 1\ry = 2\r",  # old Mac line ends
    b"def f():\n    return 1\n\n\n\n",
    b"print(f'{x!r}')\nasync def g():\n    async with a as b:\n        await b\n",
]


class _Tops(cst.CSTVisitor):
    """The engine's maps (python_source._Dispatcher): each node to the statement it lies in (top-level,
    or in the body of such a class), and each such statement's indentation."""

    def __init__(self, module: cst.Module):
        self.top_of: dict[int, cst.CSTNode] = {}
        self.indents: dict[int, tuple[str, ...]] = {id(s): () for s in module.body}
        self.nodes: list[cst.CSTNode] = []
        self._default = module.default_indent
        self._top = None

    def on_visit(self, node):
        indents = self.indents.get(id(node))
        if indents is not None:
            self._top = node
            if isinstance(node, cst.ClassDef) and isinstance(node.body, cst.IndentedBlock):
                inner = (*indents, self._default if node.body.indent is None else node.body.indent)
                self.indents.update((id(s), inner) for s in node.body.body)
        if self._top is not None:
            self.top_of.setdefault(id(node), self._top)
        self.nodes.append(node)
        return True


@pytest.mark.parametrize("data", SOURCES + MORE, ids=range(len(SOURCES) + len(MORE)))
def test_statement_positions_equal_the_whole_modules(data):
    module = cst.parse_module(data)
    tops = _Tops(module)
    module.visit(tops)
    text = data.decode(module.encoding, errors="replace")
    whole = NodeLocations(module)
    ours = StatementLocations(module, text, tops.top_of, tops.indents)
    for node in tops.nodes:
        assert ours.get(node) == whole.get(node), (type(node).__name__, data[:60])


def test_a_node_in_one_statement_generates_that_statement_only():
    data = b"import torch\n\n\ndef f(x):\n    return x.cuda()\n\n\nclass C:\n    y = 1\n"
    module = cst.parse_module(data)
    tops = _Tops(module)
    module.visit(tops)
    call = next(n for n in tops.nodes if isinstance(n, cst.Call))
    ours = StatementLocations(module, data.decode(), tops.top_of, tops.indents)
    assert ours.get(call) == NodeLocations(module).get(call)
    assert ours._whole is None and len([p for p in ours._placed.values() if p]) == 1


def test_a_node_in_a_method_generates_that_method_only():
    data = (b"import torch\n\n\nclass Worker:\n    # a comment\n    x = 1\n\n    @staticmethod\n"
            b"    def f(t):\n        return t.cuda()\n\n  # at another indent\n    class Inner:\n"
            b"          def g(self):\n              return 2\n")
    module = cst.parse_module(data)
    tops = _Tops(module)
    module.visit(tops)
    whole = NodeLocations(module)
    ours = StatementLocations(module, data.decode(), tops.top_of, tops.indents)
    call = next(n for n in tops.nodes if isinstance(n, cst.Call))
    assert ours.get(call) == whole.get(call)
    placed = [p for p in ours._placed.values() if p]
    assert len(placed) == 1 and len(placed[0][0]) < len(whole._spans) // 2  # the method, not the class
    assert all(ours.get(n) == whole.get(n) for n in tops.nodes)


def test_the_engines_walk_gives_the_map():
    data = b"import torch\n\nx = torch.zeros(1).cuda()\n"
    result = Engine(Settings()).convert(data, "m.py")
    lines = {f.line for f in result.outcome.findings if f.rule == "tensor-cuda-method"}
    assert lines == {3}


@pytest.mark.parametrize("source", [
    b"import torch\nx = torch.zeros(1).cuda()\n",  # a change: LibCST, with positions
    b"import pynvml\nimport torch\npynvml.nvmlInit()\n",  # findings only: the ast pass
])
def test_a_converted_file_is_parsed_by_pythons_parser_once(monkeypatch, source):
    """In a worker, parse_refusal's `ast` tree serves the positions and the ast pass; neither parses the
    file again. (The driver's prefilter chose the rules, as the runner does.)"""
    import ast

    from npu_port.transpiler.bulk.worker import Task, convert_task

    rules = tuple(r.ID for r in Engine(Settings()).needs_parse(source, "python", "x.py"))
    parse, calls = ast.parse, []

    def counted(*args, **kwargs):
        calls.append(args[0])
        return parse(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", counted)
    result = convert_task(Task(0, "x.py", "x.py", "python", source, rules=rules), Settings())
    assert result.outcome.findings and len(calls) == 1

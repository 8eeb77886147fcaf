"""The fast node positions equal LibCST's PositionProvider for every node of varied sources."""

from __future__ import annotations

import libcst as cst
import pytest
from bulk_support import CUDA_MODEL
from fixture_cases import all_cases
from libcst.metadata import MetadataWrapper, PositionProvider

from npu_port.transpiler.analysis.locations import NodeLocations

SOURCES = [c.input.read_bytes() for c in all_cases() if c.input.suffix == ".py"] + [
    CUDA_MODEL.format(i=1).encode(),
    b"x = 1",  # no trailing newline
    b"",
    b"if a:\r\n    b = (1,\r\n         2)  # c\r\n\r\n@d\r\ndef f(*, k=3) -> None: ...\r\n",
    b"class C:\n\tdef m(self):\n\t\treturn f'{self!r:>{10}}'\n\n\n# tail\n",
    b"with (a as b, c):\n    pass\nmatch x:\n    case [1, *r] if r: y = lambda: (yield)\n",
]


class _Collect(cst.CSTVisitor):
    def __init__(self):
        self.nodes = []

    def on_visit(self, node):
        self.nodes.append(node)
        return True


@pytest.mark.parametrize("data", SOURCES, ids=range(len(SOURCES)))
def test_positions_equal_libcst(data):
    module = cst.parse_module(data)
    theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = NodeLocations(module)
    collect = _Collect()
    module.visit(collect)
    assert collect.nodes
    # LibCST's provider leaves out some whitespace nodes (those of a match mapping's elements): there is
    # nothing to compare there, and no rule reports at whitespace.
    compared = [node for node in collect.nodes if node in theirs]
    assert len(compared) >= 0.9 * len(collect.nodes)
    for node in compared:
        assert ours.get(node) == theirs[node], type(node).__name__

"""The engine's transform walk behaves as LibCST's `CSTNode.visit`: the same hooks in the same order and
an equal result, with removals and flattened statements; only the copying of unchanged nodes differs."""

from __future__ import annotations

import libcst as cst
import pytest
from fixture_cases import all_cases

from npu_port.transpiler.core.cst_walk import transform

SOURCES = [c.input for c in all_cases() if c.input.suffix == ".py"]


class _Recording(cst.CSTTransformer):
    """Records every hook call, renames `cuda` names, drops `pass` and splits `del a, b`."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.calls.append(("visit", type(node).__name__))
        return not isinstance(node, cst.Lambda)  # a subtree skipped on request

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        self.calls.append(("leave", type(original).__name__))
        if isinstance(updated, cst.Name) and updated.value == "cuda":
            return updated.with_changes(value="npu")
        if isinstance(updated, cst.SimpleStatementLine) and isinstance(updated.body[0], cst.Pass):
            return cst.RemovalSentinel.REMOVE if len(updated.body) == 1 else updated
        if isinstance(updated, cst.SimpleStatementLine) and isinstance(updated.body[0], cst.Del) \
                and isinstance(updated.body[0].target, cst.Tuple):
            return cst.FlattenSentinel([updated.with_changes(body=[cst.Del(target=e.value)])
                                        for e in updated.body[0].target.elements])
        return updated

    # LibCST also calls these per field; the engine's dispatcher turns them off as well.
    def on_visit_attribute(self, node, attribute):
        return None

    def on_leave_attribute(self, original_node, attribute):
        return None


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_the_walk_equals_libcsts_visit(path):
    module = cst.parse_module(path.read_bytes())
    theirs, ours = _Recording(), _Recording()
    expected = module.visit(theirs)
    got = transform(module, ours)
    assert ours.calls == theirs.calls
    assert got.code == expected.code


def test_removal_flattening_and_renames():
    module = cst.parse_module("def f(cuda):\n    pass\n    del a, b\n    return cuda.x\ng = lambda cuda: cuda\n")
    got = transform(module, _Recording())
    assert got.code == "def f(npu):\n    del a\n    del b\n    return npu.x\ng = lambda cuda: cuda\n"
    assert got.code == module.visit(_Recording()).code


def test_an_unchanged_tree_is_returned_as_it_is():
    module = cst.parse_module("import torch\nx = torch.zeros(2) + 1  # a comment\n")
    assert transform(module, cst.CSTTransformer()) is module

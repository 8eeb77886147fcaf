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


def _node_classes() -> list[type]:
    out, todo = [], [cst.CSTNode]
    while todo:
        kind = todo.pop()
        todo += kind.__subclasses__()
        if not getattr(kind, "__abstractmethods__", None):
            out.append(kind)
    return out


def test_trivia_hold_only_trivia():
    """What the engine's walk may skip (cst_walk.TRIVIA) holds no code below it: every node class
    parsed inside a trivia node in the fixtures is trivia too, and no trivia class is a statement,
    an expression or a name."""
    from npu_port.transpiler.core.cst_walk import TRIVIA

    assert cst.SimpleWhitespace in TRIVIA and cst.Comma in TRIVIA and cst.Comment in TRIVIA
    assert not any(issubclass(k, (cst.BaseStatement, cst.BaseExpression, cst.BaseSmallStatement, cst.Name))
                   for k in TRIVIA)
    assert TRIVIA <= set(_node_classes())
    for path in SOURCES:
        stack = [cst.parse_module(path.read_bytes())]
        while stack:
            node = stack.pop()
            if type(node) in TRIVIA:
                below = [node]
                while below:
                    n = below.pop()
                    assert type(n) in TRIVIA, (path.name, type(node).__name__, type(n).__name__)
                    below += n.children
            else:
                stack += node.children


class _Names(cst.CSTTransformer):
    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def on_visit(self, node):
        self.seen.append(type(node).__name__)
        return True

    def on_leave(self, original, updated):
        if isinstance(updated, cst.Name) and updated.value == "cuda":
            return updated.with_changes(value="npu")
        return updated


@pytest.mark.parametrize("path", SOURCES[:40], ids=[p.name for p in SOURCES[:40]])
def test_skipping_trivia_changes_nothing_but_the_visits(path):
    """With the trivia skipped, the walk visits the other nodes in the same order and returns an
    equal tree."""
    from npu_port.transpiler.core.cst_walk import TRIVIA

    module = cst.parse_module(path.read_bytes())
    full, skipping = _Names(), _Names()
    expected = transform(module, full)
    got = transform(module, skipping, TRIVIA)
    names = {k.__name__ for k in TRIVIA}
    assert skipping.seen == [n for n in full.seen if n not in names]
    assert got.code == expected.code

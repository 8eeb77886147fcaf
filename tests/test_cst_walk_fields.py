"""cst_walk visits a node's children in the order LibCST's own `_visit_and_replace_children` does: the
field names it reads from the method's constants are the ones its source passes to `visit_*(self,
"field", ...)`, in the same order, for every node class of the LibCST installed (tests/test_cst_walk.py compares the walks themselves)."""

from __future__ import annotations

import inspect
import re

import libcst as cst

from npu_port.transpiler.core import cst_walk

_VISITED_FIELD = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')


def _node_classes() -> list[type]:
    found: set[type] = set()
    todo = [cst.CSTNode]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return sorted((k for k in found if hasattr(k, "__dataclass_fields__") and not inspect.isabstract(k)),
                  key=lambda k: k.__qualname__)


def test_child_fields_are_the_fields_the_source_visits_in_its_order():
    kinds = _node_classes()
    assert len(kinds) > 100
    for kind in kinds:
        source = inspect.getsource(kind._visit_and_replace_children)
        assert cst_walk._child_fields(kind) == tuple(dict.fromkeys(_VISITED_FIELD.findall(source))), kind


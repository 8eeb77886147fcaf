"""Which code runs without an effect anyone could observe: building a value, defining a function or a
class. `standalone` keeps effects (and their order) and may move quiet code."""

from __future__ import annotations

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.standalone.graph import node_ids

# Calls that only build a value when a module runs, with nothing observable: code made of them may be left
# out when nothing reads it, and moved to the top when its module runs later. Any other call (a print, a
# registration, `logging.basicConfig`, a seed, a call into the project) is an effect, kept in its place.
QUIET_CALLS = frozenset({
    "field", "namedtuple", "NamedTuple", "TypedDict", "TypeVar", "NewType", "ParamSpec", "cast",
    "dict", "list", "set", "frozenset", "tuple", "object", "defaultdict", "OrderedDict", "deque", "Counter",
    "partial", "property", "staticmethod", "classmethod", "compile", "getLogger", "Path",
    # decorators that wrap, built by a call
    "dataclass", "lru_cache", "cache", "wraps", "total_ordering",
})


def decorator_ids(node: cst.CSTNode) -> set[int]:
    """Ids of the nodes of every decorator applied when `node` (a def or class) runs: its own, and those
    of the methods and classes in a class body (function bodies run later)."""
    ids: set[int] = set()
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        for deco in node.decorators:
            ids |= node_ids(deco)
    if isinstance(node, cst.ClassDef) and isinstance(node.body, cst.IndentedBlock):
        for inner in node.body.body:
            ids |= decorator_ids(inner)
    return ids


def quiet_code(node: cst.CSTNode) -> bool:
    """No call runs (lambda bodies do not run), other than the QUIET_CALLS constructors."""
    finder = _Calls()
    node.visit(finder)
    return not finder.loud


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.loud = False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Await(self, node: cst.Await) -> None:
        self.loud = True

    def visit_Yield(self, node: cst.Yield) -> None:
        self.loud = True

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted_name(node.func) or ""
        if name.rsplit(".", 1)[-1] not in QUIET_CALLS:
            self.loud = True


def quiet_definition(node: cst.CSTNode) -> bool:
    """A def whose defaults and decorators call nothing, or a class whose bases and body are quiet."""
    if isinstance(node, cst.FunctionDef):
        return all(quiet_code(d.decorator) for d in node.decorators) and quiet_code(node.params)
    if isinstance(node, cst.ClassDef):
        heads = [d.decorator for d in node.decorators] + [a.value for a in (*node.bases, *node.keywords)]
        if not all(quiet_code(h) for h in heads):
            return False
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
        return all(_quiet_class_statement(s) for s in body)
    return False


def _quiet_class_statement(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return quiet_definition(stmt)
    if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return all(isinstance(s, (cst.Pass, cst.Expr, cst.Assign, cst.AnnAssign)) and quiet_code(s)
                   for s in stmt.body)
    return False


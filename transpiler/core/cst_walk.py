"""A LibCST transform walk that rebuilds only what changed.

`CSTNode.visit` rebuilds (and revalidates) every node of the tree, changed or not: for the engine's
walk, in which rules change a few nodes of a file, that was half the cost of a conversion. `transform`
calls the same visitor hooks (`on_visit`, `on_leave`; not the per-field `on_visit_attribute`, which no
rule uses) in the same order, children in source order as LibCST's `_visit_and_replace_children`
visits them, and creates a new node only where a child changed;
untouched subtrees are shared between the old tree and the new one (nodes are immutable). About four
times faster than `CSTNode.visit` on real files.

`skip` leaves nodes of the given types (and what lies below them) out of the walk: kept as they are,
no hook called for them. The engine skips the TRIVIA no rule hooks: whitespace, comments, newlines,
punctuation, brackets and operators, about two thirds of the nodes of a real file.
"""

from __future__ import annotations

from types import CodeType
from typing import Union

import libcst as cst
from libcst._nodes import op as _op
from libcst._nodes import whitespace as _whitespace

# The child fields of a node class, in the order its `_visit_and_replace_children` visits them: that
# method passes each field through `visit_required/optional/sequence/...(self, "field", ...)`, so the
# field names are its string constants, in the order the compiler met them, which is the source's
# (tests/test_cst_walk_fields.py holds them equal to the names read from the source, for every node
# class of the LibCST installed; reading the source with inspect cost a small run about 13 ms).
_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    fields = _FIELDS.get(kind)
    if fields is None:
        names = getattr(kind, "__dataclass_fields__", {})
        found = _string_constants(kind._visit_and_replace_children.__code__)
        fields = _FIELDS[kind] = tuple(dict.fromkeys(name for name in found if name in names))
    return fields


def _string_constants(code: CodeType) -> list[str]:
    found: list[str] = []
    for const in code.co_consts:
        if isinstance(const, str):
            found.append(const)
        elif isinstance(const, CodeType):  # a comprehension or lambda inside the method
            found += _string_constants(const)
    return found


Result = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel]


def _concrete_nodes(module) -> frozenset[type]:
    return frozenset(c for c in vars(module).values() if isinstance(c, type) and issubclass(c, cst.CSTNode)
                     and c.__module__ == module.__name__ and not getattr(c, "__abstractmethods__", None))


# The tokens and layout of the code: whitespace, comments and newlines (libcst._nodes.whitespace), the
# punctuation and operators (libcst._nodes.op), brackets. A subtree of one holds only others of them
# (a comment in a trailing whitespace, whitespace around an operator), never code: no name, no
# expression, no statement (tests/test_cst_walk.py checks every node class's fields for it).
TRIVIA: frozenset[type] = _concrete_nodes(_whitespace) | _concrete_nodes(_op) | frozenset({
    cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
    cst.RightCurlyBrace})
_NOTHING: frozenset[type] = frozenset()

# Whether values of a type are nodes: `isinstance(value, cst.CSTNode)` goes through ABCMeta's
# __instancecheck__ for every field of every node (a million calls on verl, about 2% of a profiled
# run), a dict lookup by type does not. A field holds a node, a sequence, None or a MaybeSentinel.
_IS_NODE: dict[type, bool] = {}


def _is_node_type(kind: type) -> bool:
    answer = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)  # what isinstance answers (no class is registered)
    return answer


def transform(node: cst.CSTNode, visitor: cst.CSTTransformer, skip: frozenset[type] = _NOTHING) -> Result:
    """What `node.visit(visitor)` returns (equal trees), without copying unchanged subtrees; nodes whose
    type is in `skip` are neither visited nor left (they stay as they are)."""
    return _walk(node, visitor, skip)


def _walk(node: cst.CSTNode, visitor: cst.CSTTransformer, skip: frozenset[type]) -> Result:
    changes = None
    if visitor.on_visit(node):
        fields = _FIELDS.get(type(node))
        if fields is None:  # not `or`: a leaf's fields are (), which would be worked out again at every leaf
            fields = _child_fields(type(node))
        for name in fields:
            value = getattr(node, name)
            kind = type(value)
            # Sequences first: CSTNode is an ABC, and its first isinstance answer for `tuple` walks every
            # node class (about 4 ms of a one-file run).
            if kind is tuple or kind is list:
                if not value:
                    continue  # most are empty (lpar, rpar): nothing to visit, nothing to rebuild
                items = _transform_sequence(value, visitor, skip)
                if items is not None:
                    changes = changes or {}
                    changes[name] = items
            elif kind not in skip:
                is_node = _IS_NODE.get(kind)
                if is_node is None:
                    is_node = _is_node_type(kind)
                if is_node:
                    new = _walk(value, visitor, skip)
                    if new is not value:
                        changes = changes or {}
                        changes[name] = new  # a sentinel here fails validation, as LibCST's visit_required does
    updated = node.with_changes(**changes) if changes else node
    return visitor.on_leave(node, updated)


def _transform_sequence(items, visitor: cst.CSTTransformer, skip: frozenset[type]):
    """The new items (a removed item dropped, a flattened one spliced in), or None if none changed."""
    out = None
    for i, item in enumerate(items):
        new = item if type(item) in skip else _walk(item, visitor, skip)
        if new is item:
            if out is not None:
                out.append(item)
            continue
        if out is None:
            out = list(items[:i])
        if isinstance(new, cst.FlattenSentinel):
            out.extend(new.nodes)
        elif not isinstance(new, cst.RemovalSentinel):
            out.append(new)
    return tuple(out) if out is not None else None


# Per visitor class (by name: a class defined in a function is a new class at each call): the TRIVIA it
# hooks none of (a class that hooks one gets that type visited).
_SKIP_FOR: dict[tuple[str, str], frozenset[type]] = {}


def visit(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """What `node.visit(visitor)` does for a visitor that only reads (its `visit_*` / `leave_*` hooks, in
    the same order), without the tokens and layout it hooks none of, and without rebuilding the tree,
    which `CSTNode.visit` does even for a visitor that changes nothing. The analyses' own passes over a
    module (a rule's collectors) cost about a fifth of what `module.visit` does."""
    kind = type(visitor)
    key = (kind.__module__, kind.__qualname__)
    skip = _SKIP_FOR.get(key)
    if skip is None:
        hooked = {name.split("_", 1)[1] for name in dir(kind) if name.startswith(("visit_", "leave_"))}
        skip = _SKIP_FOR[key] = frozenset(t for t in TRIVIA if t.__name__ not in hooked)
    _read(node, visitor, skip)


def _read(node: cst.CSTNode, visitor: cst.CSTVisitor, skip: frozenset[type]) -> None:
    if visitor.on_visit(node):
        fields = _FIELDS.get(type(node))
        if fields is None:
            fields = _child_fields(type(node))
        for name in fields:
            value = getattr(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for item in value:
                    if type(item) not in skip:
                        _read(item, visitor, skip)
            elif kind not in skip:
                is_node = _IS_NODE.get(kind)
                if is_node is None:
                    is_node = _is_node_type(kind)
                if is_node:
                    _read(value, visitor, skip)
    visitor.on_leave(node)

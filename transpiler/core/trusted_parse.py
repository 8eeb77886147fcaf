"""LibCST's `parse_module` without LibCST re-validating the nodes its own parser builds.

Every LibCST node runs `CSTNode.__post_init__` -> `_validate()` when it is built: a check, meant for
nodes written by hand, that whitespace holds only whitespace, a name is an identifier, parentheses
pair up, and so on. The native parser builds each node of a module through that same constructor, so
a parse pays for the check on every node (about a tenth of `parse_module`'s CPU on real trees),
although what it checks is what the parser has just read from valid Python: the parser's output is
valid by construction. `parse_module` here turns the check off for the duration of the parse only.
Nodes built afterwards (a rule's replacement, `with_changes`, `cst.parse_expression`) are validated
as before, and so is everything built by another thread meanwhile.

That the trees are the same is checked, not assumed: tests/test_trusted_parse.py compares the tree
with a validated parse (`deep_equals`) and its code with the source, byte for byte, on every fixture
and on odd sources, and the five real trees convert identically with it (benchmarks/README.md).

The switch is LibCST's own hook, replaced on the class while a parse is under way and restored in a
`finally` (on a parse error too). It is used only when the installed LibCST's `__post_init__` does
nothing but call `self._validate()`; a LibCST where it does more, or has none, gets a plain
`cst.parse_module`: slower, never wrong.

Threads and re-entrancy: the replacement skips validation only for the threads that are inside a
trusted parse (a count per thread), so a parse inside a parse restores nothing early, and another
thread building nodes while one parses still has them validated. The hook is put back when the last
parse ends. The tool itself parses in one thread per process (its workers are processes; the inline
path is the main thread), so the lock is taken twice per file and never waited on.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import Optional

import libcst as cst


def _validating_hook() -> Optional[Callable[[cst.CSTNode], None]]:
    """LibCST's `CSTNode.__post_init__` where it is exactly `self._validate()` (libcst 1.x); else None."""
    hook = cst.CSTNode.__dict__.get("__post_init__")
    if not isinstance(hook, types.FunctionType):
        return None
    code = hook.__code__
    # The body reads one attribute of `self` and calls it: nothing else (no state set, no other call).
    if code.co_argcount != 1 or code.co_names != ("_validate",) or code.co_varnames[:1] != ("self",):
        return None
    return hook


_VALIDATE = _validating_hook()
_lock = threading.Lock()
_depth: dict[int, int] = {}  # thread ident -> how many trusted parses that thread is inside
_get_ident = threading.get_ident


def _validate_unless_trusted(self: cst.CSTNode) -> None:
    # Installed only while some thread parses; a node built by any other thread is checked as always.
    if _get_ident() not in _depth:
        self._validate()


def parse_module(source: bytes | str) -> cst.Module:
    """`cst.parse_module(source)`, with the same tree, errors and exceptions, without node validation."""
    if _VALIDATE is None:
        return cst.parse_module(source)
    ident = _get_ident()
    with _lock:
        if not _depth:
            cst.CSTNode.__post_init__ = _validate_unless_trusted  # type: ignore[method-assign]
        _depth[ident] = _depth.get(ident, 0) + 1
    try:
        return cst.parse_module(source)
    finally:
        with _lock:
            if _depth[ident] == 1:
                del _depth[ident]
            else:
                _depth[ident] -= 1
            if not _depth:
                cst.CSTNode.__post_init__ = _VALIDATE  # type: ignore[method-assign, assignment]

"""The scope analysis `standalone` uses binds every name CPython binds, where CPython binds it, and leaves no
read of a bound name without its binding (LibCST alone reads `match` captures as undefined names)."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import ComprehensionScope, FunctionScope, GlobalScope, MetadataWrapper

from npu_port.transpiler.standalone.scopes import BindingScopeProvider

SOURCE = '''
match event:
    case {"type": kind, **extra}: pass
    case [first, *rest, _]: pass
    case Point(x=px, y=0) | Point(x=0, y=px): pass
    case str() as text if text: pass
    case (1 | 2) as num: pass
    case other: pass
    case _: pass

def handle(ev):
    match ev:
        case {"k": k2, **more}:
            return k2, more
        case [a, *tail]:
            return a, tail
        case Point(x=qx) as whole:
            return qx, whole
    found = [(last := y) for y in ev]
    try:
        pass
    except ValueError as err:
        print(err)
    total = 0
    del total
    return found, last
'''


def _scopes():
    wrapper = MetadataWrapper(cst.parse_module(SOURCE))
    scopes = set(wrapper.resolve(BindingScopeProvider).values())
    return {type(s): s for s in scopes if s is not None}, scopes


def test_match_captures_bind_in_the_module_scope():
    by_type, _ = _scopes()
    names = {a.name for a in by_type[GlobalScope].assignments}
    assert {"kind", "extra", "first", "rest", "px", "text", "num", "other", "handle"} <= names
    assert not names & {"_", "x", "y", "Point", "event"}  # wildcard, class keywords and reads bind nothing


def test_function_captures_walrus_and_except_as_bind_in_the_function():
    by_type, _ = _scopes()
    names = {a.name for a in by_type[FunctionScope].assignments}
    assert {"k2", "more", "a", "tail", "qx", "whole", "last", "found", "err", "total", "ev"} <= names
    assert {a.name for a in by_type[ComprehensionScope].assignments} == {"y"}  # the walrus target is not here


def test_every_read_of_a_bound_name_finds_its_binding():
    _, scopes = _scopes()
    unresolved = {a.node.value for s in scopes if s is not None for a in s.accesses
                  if isinstance(a.node, cst.Name) and not a.referents}
    assert unresolved == {"event", "Point"}  # defined nowhere in this source

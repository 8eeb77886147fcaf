"""A def or class renamed to avoid a collision (`Item` -> `Item_things`) must not show the rename at run time:
`type(x).__name__`, `__qualname__`, a dataclass's repr, `functools.wraps` and registries keyed by
`cls.__name__` all read the name of the def statement.

So the statement keeps the new name (the module's global), and right after it a helper gives the object its
own name back, and its methods their own qualified names, before the decorators run: the decorators are moved
off the statement and applied after the helper, innermost first as Python does. A decorator that is a call
(`@register("x")`) is evaluated before the statement, where Python evaluates it. What cannot be given back:
the name seen by a metaclass or `__init_subclass__` while the class is created, and the `<locals>` qualified
names of functions a renamed function defines when it runs.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

NAMED_HELPER = '''\
def {named}(definition, name):
    """Give a definition renamed by npu-port (to avoid a name collision) its own name back, and the methods
    and classes defined in its body their own qualified names."""

    def requalify(obj, old, new):
        obj.__qualname__ = new
        if isinstance(obj, type):
            for value in list(vars(obj).values()):
                for inner in (value, *(getattr(value, a, None) for a in ("__func__", "fget", "fset", "fdel"))):
                    qualname = getattr(inner, "__qualname__", None)
                    if isinstance(qualname, str) and qualname.startswith(old + "."):
                        try:
                            requalify(inner, qualname, new + qualname[len(old):])
                        except (AttributeError, TypeError):
                            pass

    requalify(definition, definition.__qualname__, name)
    definition.__name__ = name
    return definition
'''


def restored(node: cst.FunctionDef | cst.ClassDef, new: str, old: str, named: str,
             temp: Callable[[], str]) -> list[cst.BaseStatement]:
    """`node` (already renamed to `new`) without its decorators, followed by `new = deco(named(new, "old"))`;
    call decorators first go into temporaries named by `temp()`, evaluated before the statement."""
    before: list[cst.BaseStatement] = []
    decorators: list[cst.BaseExpression] = []
    for deco in node.decorators:
        expr = deco.decorator
        if isinstance(expr, (cst.Name, cst.Attribute)):
            decorators.append(expr)  # reading a name has no effect: it may wait until it is applied
        else:
            name = temp()
            before.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], expr)]))
            decorators.append(cst.Name(name))
    value: cst.BaseExpression = cst.Call(cst.Name(named), [cst.Arg(cst.Name(new)),
                                                            cst.Arg(cst.SimpleString(f'"{old}"'))])
    for expr in reversed(decorators):
        value = cst.Call(expr, [cst.Arg(value)])
    out = [*before, node.with_changes(decorators=[], leading_lines=()),
           cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(new))], value)])]
    out[0] = out[0].with_changes(leading_lines=node.leading_lines)  # the comments above the def stay above
    return out

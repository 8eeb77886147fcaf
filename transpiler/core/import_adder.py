"""Add the imports a converted module needs: what LibCST's `AddImportsVisitor` writes, without its walks.

`AddImportsVisitor` only ever reads and changes the module's leading block of import statements, but it
walks the whole tree twice to get there (a gathering visit for the imports it already has, then a matcher
transform): on a VERL tree under --keep-cuda those two walks were over half the run. This reads the
leading block only and produces the same bytes, for the imports rules request (`import module` or
`from module import name`; no aliases, no relative imports): `tests/test_import_adder.py` holds it equal
to `AddImportsVisitor` on every fixture and shape of leading block.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Optional, Union, cast

import libcst as cst
from libcst.helpers import get_absolute_module_from_package_for_import

Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


def _skips_first(module: cst.Module) -> bool:
    """A docstring or a `__strict__ = ...` flag opens the module: imports never go above it."""
    if not module.body or type(module.body[0]) is not cst.SimpleStatementLine:
        return False
    small = module.body[0].body  # type: ignore[union-attr]
    if len(small) != 1:
        return False
    only = small[0]
    if type(only) is cst.Expr:
        return isinstance(only.value, cst.SimpleString)
    return (type(only) is cst.Assign and len(only.targets) == 1
            and type(only.targets[0].target) is cst.Name and only.targets[0].target.value == "__strict__")


def _import_of(statement: cst.CSTNode) -> Union[cst.Import, cst.ImportFrom, None]:
    """The import a line holds when the line is that import alone."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:  # type: ignore[attr-defined]
        return None
    only = statement.body[0]  # type: ignore[attr-defined]
    return only if isinstance(only, (cst.Import, cst.ImportFrom)) else None


def add_imports(module: cst.Module, needed: Collection[tuple[str, Optional[str]]]) -> cst.Module:
    """`module` with `import m` for each (m, None) and `from m import n` for each (m, n) it lacks: names
    for a module the leading block already imports from join that statement, the rest go after the block."""
    wanted_modules = {m for m, name in needed if name is None}
    wanted_names: dict[str, set[str]] = {}
    for m, name in needed:
        if name is not None:
            wanted_names.setdefault(m, set()).add(name)
    wanted_names = {m: wanted_names[m] for m in sorted(wanted_names)}

    start = 1 if _skips_first(module) else 0
    body = list(module.body)
    block_end = start
    had_modules: set[str] = set()
    had_names: dict[str, set[str]] = {}
    for statement in body[start:]:
        imp = _import_of(statement)
        if imp is None:
            break
        block_end += 1
        if type(imp) is cst.Import:
            had_modules.update(a.evaluated_name for a in imp.names if a.asname is None)  # type: ignore[union-attr]
            continue
        source = get_absolute_module_from_package_for_import(None, imp)  # type: ignore[arg-type]
        if source is None:
            continue  # relative: never matched, as in AddImportsVisitor
        names = imp.names  # type: ignore[union-attr]
        if isinstance(names, cst.ImportStar):
            had_names[source] = {"*"}
            continue
        plain = {a.evaluated_name for a in names if a.asname is None}
        if plain:
            had = had_names.setdefault(source, set())
            if "*" not in had:
                had.update(plain)
    wanted_modules -= had_modules
    for source, had in had_names.items():
        if source in wanted_names:
            left = set() if "*" in had else wanted_names[source] - had
            if left:
                wanted_names[source] = left
            else:
                del wanted_names[source]
    if not wanted_modules and not wanted_names:
        return module

    # Names for a module the block imports from join its first such statement, in front.
    for i in range(start, block_end):
        imp = _import_of(body[i])
        if type(imp) is not cst.ImportFrom or isinstance(imp.names, cst.ImportStar):
            continue
        source = get_absolute_module_from_package_for_import(None, imp)
        if source is None or source not in wanted_names:
            continue
        joined = imp.with_changes(names=[*(cst.ImportAlias(name=cst.Name(n)) for n in sorted(wanted_names.pop(source))),
                                         *imp.names])
        body[i] = cast(cst.SimpleStatementLine, body[i]).with_changes(body=[joined])

    if not wanted_modules and not wanted_names:
        return module.with_changes(body=body)
    after = body[block_end:]
    if after:
        first = after[0]
        if not first.leading_lines:
            after[0] = first.with_changes(leading_lines=(cst.EmptyLine(),))
        elif first.leading_lines[0].comment is not None:
            after[0] = first.with_changes(leading_lines=(cst.EmptyLine(), *first.leading_lines))
    config = module.config_for_parsing

    def from_line(source: str) -> Statement:
        return cst.parse_statement(f"from {source} import " + ", ".join(sorted(wanted_names[source])), config=config)

    return module.with_changes(body=(
        *body[:start],
        *(from_line(s) for s in wanted_names if s == "__future__"),
        *body[start:block_end],
        *(cst.parse_statement(f"import {m}", config=config) for m in sorted(wanted_modules)),
        *(from_line(s) for s in wanted_names if s != "__future__"),
        *after,
    ))


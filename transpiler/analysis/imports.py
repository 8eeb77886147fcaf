"""Which local name means which module or object, per scope, without LibCST's scope analysis.

LibCST's QualifiedNameProvider costs about ten times a parse; the rules only need to know what
`T`, `tc` or `synchronize` was imported as, so a stack of import tables is enough. Each scope is
filled by a shallow scan of its own statements when the traversal enters it, so an import placed
after its first use in the same scope still counts, and a function-local import stays local.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

_SCOPE_NODES = (cst.FunctionDef, cst.ClassDef)


# Whether a node type is an Attribute (1), a Name (2) or neither (0), answered once per type:
# dotted_name is asked about most calls, attributes and names of a file (75,000 times on verl), and
# isinstance goes through ABCMeta's __instancecheck__ (LibCST's nodes are ABCs) at every step.
_CHAIN_KIND: dict[type, int] = {}


def _chain_kind(kind: type) -> int:
    answer = _CHAIN_KIND[kind] = 1 if issubclass(kind, cst.Attribute) else 2 if issubclass(kind, cst.Name) else 0
    return answer


def dotted_name(node: cst.CSTNode) -> Optional[str]:
    """`a.b.c` as a string for a Name/Attribute chain, else None."""
    parts = []
    while True:
        kind = _CHAIN_KIND.get(type(node))
        if kind is None:
            kind = _chain_kind(type(node))
        if kind != 1:
            break
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if kind != 2:
        return None
    parts.append(node.value)  # type: ignore[attr-defined]
    return ".".join(reversed(parts))


def _module_name(node: Union[cst.Attribute, cst.Name, None]) -> Optional[str]:
    return dotted_name(node) if node is not None else None


def iter_scope_statements(body: Sequence[cst.CSTNode], nested: bool = False) -> Iterator[cst.BaseSmallStatement]:
    """Small statements of one scope, entering if/try/with/for/while blocks but not defs or classes (with
    `nested`, those too: every small statement below `body`)."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        elif isinstance(stmt, _SCOPE_NODES) and not nested:
            continue
        elif isinstance(stmt, cst.BaseCompoundStatement):
            for block in _blocks_of(stmt):
                yield from iter_scope_statements(block, nested)


def _blocks_of(stmt: cst.BaseCompoundStatement) -> Iterator[Sequence[cst.CSTNode]]:
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        yield body.body
    elif isinstance(body, cst.SimpleStatementSuite):
        yield [cst.SimpleStatementLine(body=body.body)]
    for attr in ("orelse", "finalbody"):
        extra = getattr(stmt, attr, None)
        while extra is not None:
            inner = getattr(extra, "body", None)
            if isinstance(inner, cst.IndentedBlock):
                yield inner.body
            # `elif` chains nest an If inside orelse.
            extra = getattr(extra, "orelse", None) if isinstance(extra, cst.If) else None
    for handler in getattr(stmt, "handlers", ()) or ():
        if isinstance(handler.body, cst.IndentedBlock):
            yield handler.body.body
    for case in getattr(stmt, "cases", ()) or ():
        if isinstance(case.body, cst.IndentedBlock):
            yield case.body.body


@dataclass(frozen=True)
class Binding:
    """A local name bound by an import: `import a.b as x` -> Binding("a.b", "import", True)."""

    target: str
    kind: str  # "import" | "from"
    aliased: bool


def bindings_of(stmt: cst.BaseSmallStatement) -> list[tuple[str, Binding]]:
    """(local name, binding) pairs an import statement binds. Relative imports bind nothing we resolve."""
    out: list[tuple[str, Binding]] = []
    if isinstance(stmt, cst.Import):
        for alias in stmt.names:
            full = _module_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                out.append((alias.asname.name.value, Binding(full, "import", True)))
            else:
                top = full.split(".", 1)[0]
                out.append((top, Binding(top, "import", False)))
    elif isinstance(stmt, cst.ImportFrom):
        if stmt.relative or stmt.module is None or isinstance(stmt.names, cst.ImportStar):
            return out
        module = _module_name(stmt.module)
        for alias in stmt.names:
            name = _module_name(alias.name)
            if module is None or name is None:
                continue
            asname = alias.asname.name if alias.asname is not None else None
            aliased = isinstance(asname, cst.Name)
            local = asname.value if isinstance(asname, cst.Name) else name
            out.append((local, Binding(f"{module}.{name}", "from", aliased)))
    return out


def scan_scope(body: Sequence[cst.CSTNode]) -> dict[str, Binding]:
    table: dict[str, Binding] = {}
    for small in iter_scope_statements(body):
        for local, target in bindings_of(small):
            table.setdefault(local, target)
    return table


class ImportTable:
    """A stack of per-scope import tables; the dispatcher pushes and pops it as it walks."""

    def __init__(self) -> None:
        self._scopes: list[tuple[cst.CSTNode, dict[str, Binding]]] = []

    def enter(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Module):
            self._scopes.append((node, scan_scope(node.body)))
        elif isinstance(node, _SCOPE_NODES) and isinstance(node.body, cst.IndentedBlock):
            self._scopes.append((node, scan_scope(node.body.body)))

    def leave(self, node: cst.CSTNode) -> None:
        if self._scopes and self._scopes[-1][0] is node:
            self._scopes.pop()

    def binding(self, local: str) -> Optional[Binding]:
        for _, table in reversed(self._scopes):
            found = table.get(local)
            if found is not None:
                return found
        return None

    def lookup(self, local: str) -> Optional[str]:
        found = self.binding(local)
        return found.target if found else None

    def local_for(self, qualified: str) -> Optional[tuple[str, str]]:
        """A local name whose target is `qualified` or the longest prefix of it: (local, its target)."""
        best: Optional[tuple[str, str]] = None
        for _, table in reversed(self._scopes):
            for local, b in table.items():
                t = b.target
                if (qualified == t or qualified.startswith(t + ".")) and (best is None or len(t) > len(best[1])):
                    if self.binding(local) is b:  # not shadowed by an inner scope
                        best = (local, t)
        return best

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        """The fully qualified name `node` refers to through imports, e.g. `tc.synchronize` -> `torch.cuda.synchronize`."""
        return self.resolve_dotted(dotted_name(node))

    def resolve_dotted(self, dotted: Optional[str]) -> Optional[str]:
        """resolve() for the dotted name of an expression (None: not a Name/Attribute chain)."""
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        target = self.lookup(head)
        if target is None:
            return None
        return f"{target}.{rest}" if rest else target

    def imports_module(self, prefix: str) -> bool:
        """True when any scope currently open imports `prefix` or something under it."""
        return any(
            b.target == prefix or b.target.startswith(prefix + ".")
            for _, table in self._scopes
            for b in table.values()
        )


def dotted_expr(dotted: str, like: Optional[cst.BaseExpression] = None) -> cst.BaseExpression:
    """`a.b.c` as a Name/Attribute chain; with `like`, keeping the parentheses around that expression."""
    head, *rest = dotted.split(".")
    node: cst.BaseExpression = cst.Name(head)
    for part in rest:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    if like is not None:
        node = node.with_changes(lpar=like.lpar, rpar=like.rpar)
    return node


def leftmost_name(node: cst.BaseExpression) -> Optional[cst.Name]:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None

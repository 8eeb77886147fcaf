"""LibCST's scope analysis, completed where it does not bind what CPython binds.

LibCST (1.9) treats every name in a `match` pattern as a read: `case {"type": kind, **extra}:` or
`case Point(x=px) as p:` would then be reported as undefined names. It also binds a walrus inside a
comprehension in the comprehension's own scope, where CPython binds it in the enclosing function or module
(PEP 572). This provider is LibCST's, with those binding forms recorded as assignments in the scope CPython
puts them in; everything else (class scopes, `global`/`nonlocal`, comprehensions, type parameters,
except-as, `del`) is LibCST's own answer.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst
from libcst.metadata import ComprehensionScope, ScopeProvider
from libcst.metadata.scope_provider import ScopeVisitor


class _BindingScopeVisitor(ScopeVisitor):
    def _bind(self, name: Optional[cst.Name]) -> None:
        # `_` in a pattern is the wildcard: LibCST already leaves its name None, CPython binds nothing.
        if name is not None:
            self.scope.record_assignment(name.value, name)
            self.provider.set_metadata(name, self.scope)
            self.scope._assignment_count += 1  # reads after this point see it (as LibCST does for `for`)

    def visit_MatchAs(self, node: cst.MatchAs) -> Optional[bool]:
        if node.pattern is not None:
            node.pattern.visit(self)
        self._bind(node.name)
        return False

    def visit_MatchStar(self, node: cst.MatchStar) -> Optional[bool]:
        self._bind(node.name)
        return False

    def visit_MatchMapping(self, node: cst.MatchMapping) -> Optional[bool]:
        for element in node.elements:
            element.visit(self)
        self._bind(node.rest)
        return False

    def visit_MatchKeywordElement(self, node: cst.MatchKeywordElement) -> Optional[bool]:
        # `Point(x=px)`: `x` names an attribute of the subject, neither a read nor a binding.
        node.pattern.visit(self)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> Optional[bool]:
        node.value.visit(self)
        scope = self.scope
        while isinstance(scope, ComprehensionScope):
            scope = scope.parent
        if isinstance(node.target, cst.Name):
            scope.record_assignment(node.target.value, node.target)
            self.provider.set_metadata(node.target, scope)
            scope._assignment_count += 1
        else:
            node.target.visit(self)
        return False


class BindingScopeProvider(ScopeProvider):
    """ScopeProvider with every binding form CPython has (see the module docstring)."""

    def visit_Module(self, node: cst.Module) -> Optional[bool]:
        visitor = _BindingScopeVisitor(self)
        node.visit(visitor)
        visitor.infer_accesses()
        return False

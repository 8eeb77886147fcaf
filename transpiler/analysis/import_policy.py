"""Import facts a validator needs: imports of given packages, relative imports, dynamic imports.

Uses `ast` (several times faster than a LibCST parse) because only names and positions are needed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ImportSite:
    line: int
    col: int  # 1-based
    module: str  # the module named by the statement ("" for `from . import x`)
    level: int  # 0 for absolute imports
    text: str  # how the statement reads, for messages


def import_sites(tree: ast.AST) -> list[ImportSite]:
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                sites.append(ImportSite(node.lineno, node.col_offset + 1, alias.name, 0, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            dots = "." * node.level
            names = ", ".join(a.name for a in node.names)
            sites.append(ImportSite(node.lineno, node.col_offset + 1, mod, node.level,
                                    f"from {dots}{mod} import {names}"))
    return sorted(sites, key=lambda s: (s.line, s.col))


def _is_under(module: str, packages: Iterable[str]) -> str | None:
    for pkg in packages:
        if module == pkg or module.startswith(pkg + "."):
            return pkg
    return None


def forbidden_imports(tree: ast.AST, packages: Iterable[str]) -> list[tuple[ImportSite, str]]:
    """Absolute imports of any of `packages` (or their submodules), with the package matched."""
    packages = tuple(packages)
    out = []
    for site in import_sites(tree):
        pkg = _is_under(site.module, packages) if site.level == 0 else None
        if pkg:
            out.append((site, pkg))
    return out


def relative_imports(tree: ast.AST) -> list[ImportSite]:
    return [s for s in import_sites(tree) if s.level > 0]


def dynamic_imports(tree: ast.AST) -> list[tuple[int, int, str]]:
    """`importlib.import_module(...)` and `__import__(...)` calls: (line, col, the first argument's source)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        if name in ("import_module", "__import__") and node.args:
            out.append((node.lineno, node.col_offset + 1, ast.unparse(node.args[0])))
    return out


def parse_for_imports(text: str) -> ast.Module | None:
    """`ast` tree of source another parser accepted, or None when `ast` refuses it (nothing to place)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None

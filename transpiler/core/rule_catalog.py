"""What `npu-port rules` and `explain` show, read from the rule modules' source without importing them.

Importing the rules imports LibCST (about 0.3 s of CPU, most of the commands' cost) only to read an
id, three words and a docstring. This module reads them with CPython's `ast` instead: each rule
module of `npu_port.codemods` is parsed, its classes' literal class attributes (ID, LANGUAGE, GROUP,
SAFETY) are merged along their bases (within this package, through its `from ... import` lines) and
the docstring is the class's own, as `Rule.description` reads it. Nothing is executed.

A rule whose attributes are not literals, or whose bases cannot be followed, makes `catalog()`
return None: the callers then ask the registry, which imports the rules (correct, only slower).
`tests/test_rule_catalog.py` holds the catalog equal to the registry, rule by rule.
"""

from __future__ import annotations

import ast
import inspect
import os
from dataclasses import dataclass
from functools import cache
from typing import Optional

import npu_port
from npu_port import codemods

_ATTRIBUTES = ("ID", "LANGUAGE", "GROUP", "SAFETY")
_RULE_BASE = ("npu_port.transpiler.core.rules", "Rule")


@dataclass(frozen=True)
class RuleInfo:
    """A rule as `rules` and `explain` show it: the attributes `output/rule_docs.py` reads."""

    ID: str
    LANGUAGE: str
    GROUP: str
    SAFETY: str
    doc: str

    def description(self) -> str:
        return inspect.cleandoc(self.doc)

    def summary(self) -> str:
        return self.description().split("\n", 1)[0]


class _Unreadable(Exception):
    """Something the source alone does not tell: the registry must be asked."""


@dataclass
class _Class:
    bases: list[tuple[str, str]]  # (module, name) of each base, resolved through the imports
    attributes: dict[str, object]  # literal class-level assignments
    doc: str
    unknown: set[str]  # class-level names assigned something that is not a literal


def _module_file(module: str) -> Optional[str]:
    """The source file of a module of this package, found from the package folders alone."""
    parts = module.split(".")
    if parts[0] != "npu_port" or len(parts) < 2:
        return None
    for folder in npu_port.__path__:
        base = os.path.join(folder, *parts[1:])
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


@cache
def _classes(module: str) -> dict[str, _Class]:
    path = _module_file(module)
    if path is None:
        raise _Unreadable(module)
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    package = module.rpartition(".")[0]
    names: dict[str, tuple[str, str]] = {}  # local name -> (module, name) it was imported as
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            source = node.module if node.level == 0 else ".".join(
                [*package.split(".")[:len(package.split(".")) - node.level + 1], node.module])
            for alias in node.names:
                names[alias.asname or alias.name] = (source, alias.name)
    local = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    found: dict[str, _Class] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = []
        for base in node.bases:
            if isinstance(base, ast.Name):
                # Imported, defined here, or a builtin (Exception): the last is never a rule.
                bases.append(names.get(base.id) or ((module, base.id) if base.id in local else ("?", base.id)))
            elif isinstance(base, (ast.Attribute, ast.Subscript)):
                bases.append(("?", ast.unparse(base)))  # cst.CSTVisitor, Generic[T]: never a rule
            else:
                raise _Unreadable(f"{module}.{node.name}")
        attributes: dict[str, object] = {}
        unknown: set[str] = set()
        for stmt in node.body:
            targets: list[ast.expr] = []
            value: Optional[ast.expr] = None
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            for target in targets:
                if isinstance(target, ast.Name) and target.id in _ATTRIBUTES and value is not None:
                    try:
                        attributes[target.id] = ast.literal_eval(value)
                    except ValueError:
                        unknown.add(target.id)
            if isinstance(stmt, ast.FunctionDef) and stmt.name in ("description", "summary"):
                unknown.add(stmt.name)
        found[node.name] = _Class(bases, attributes, ast.get_docstring(node, clean=False) or "", unknown)
    return found


def _resolve(module: str, name: str, seen: frozenset = frozenset()) -> Optional[tuple[dict[str, object], set[str]]]:
    """(attributes, names that are not literals) of the class along its bases, nearest first; None when
    it is not a rule class (its bases never reach Rule)."""
    if (module, name) == _RULE_BASE:
        return {"GROUP": "default"}, set()
    if module == "?" or (module, name) in seen or not module.startswith("npu_port."):
        return None
    cls = _classes(module).get(name)
    if cls is None:
        # Imported again from elsewhere (a re-export): follow it there.
        raise _Unreadable(f"{module}.{name}")
    merged: Optional[dict[str, object]] = None
    unknown: set[str] = set()
    for base in cls.bases:
        got = _resolve(*base, seen=seen | {(module, name)})
        if got is None:
            continue
        inherited, inherited_unknown = got
        merged = {**inherited, **(merged or {})}  # an earlier base wins, as in a simple MRO
        unknown |= inherited_unknown - set(merged)
    if merged is None:
        return None
    return {**merged, **cls.attributes}, (unknown | cls.unknown) - set(cls.attributes)


@cache
def catalog() -> Optional[dict[str, RuleInfo]]:
    """Every rule by id, sorted, as the registry would list them; None where the source does not tell."""
    try:
        return _read_all()
    except (_Unreadable, OSError, SyntaxError, UnicodeDecodeError):
        return None


def _read_all() -> Optional[dict[str, RuleInfo]]:
    found: dict[str, RuleInfo] = {}
    for folder in codemods.__path__:
        for file in sorted(os.listdir(folder)):
            if not file.endswith(".py") or file.startswith("_"):
                continue
            module = f"{codemods.__name__}.{file[:-3]}"
            for name, cls in _classes(module).items():
                got = _resolve(module, name)
                if got is None:
                    continue
                attributes, unknown = got
                if unknown & {*_ATTRIBUTES, "description", "summary"}:
                    return None
                if not attributes.get("ID"):
                    continue
                if any(not isinstance(attributes.get(a), str) for a in _ATTRIBUTES):
                    return None
                rule_id = str(attributes["ID"])
                if rule_id in found:
                    return None  # the registry says what is wrong
                found[rule_id] = RuleInfo(rule_id, str(attributes["LANGUAGE"]), str(attributes["GROUP"]),
                                          str(attributes["SAFETY"]), cls.doc)
    return dict(sorted(found.items()))


def rule_infos() -> dict:
    """The catalog, or the registry's rules where the catalog cannot be read from the source."""
    found = catalog()
    if found is not None:
        return found
    from npu_port.transpiler.core.registry import all_rules

    return all_rules()

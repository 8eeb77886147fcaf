"""Collections of environment-variable names used as a set: the names a process strips from, or copies out
of, the environment (`EXCLUDED = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}` and
`{k: v for k, v in os.environ.items() if k not in EXCLUDED}`; `for name in KEYS: os.environ.get(name)`).

Such a collection is a registry of names. Where env-var-names renames the reads and writes of a CUDA name
to the name the target reads, the registry must hold the target's name as well, or the worker keeps (or
loses) the very variable it was meant to lose (or keep). The CUDA entry stays: the registry still
describes the CUDA process, and adding a name to a set that is only tested for membership or iterated
over changes nothing else.

One decision per collection, made for the whole file before the walk:

- the collection is a set, list or tuple display of string literals only, each spelled like a variable
  name (`[A-Z][A-Z0-9_]*`), at least one of which the table renames; bound to a name, or to a class
  attribute used through the class (`Meta.KEYS`, `self.KEYS`, `cls.KEYS`);
- it is used as a set of variable names: written inline as the right side of `in` / `not in` or as what a
  `for` or comprehension iterates, or bound once to a name whose every use in the file is one of those;
- at least one of those uses is about the environment: the membership test's left side is a name bound
  by a loop over the environment (`os.environ`, its `.items()` / `.keys()`, a copy), or the loop over the
  collection keys the environment by its variable (`os.environ[n]`, `.get(n)`, `.pop(n)`, `os.getenv(n)`,
  `n in os.environ`).

A collection that is an environment registry by the last test but is also used otherwise (indexed,
unpacked, passed on, rebound) is left and reported: adding an element would shift positions or change
what a callee receives. So is one whose loop turns each name into another key (`f"_{key.lower()}"`,
`key.lower()`, `prefix + key`): the values are kept under keys derived from the CUDA name, and the added
name would find nothing there. env-var-names then leaves the file's reads and writes of the set's names
too, the set and its reads being one decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Union

import libcst as cst

from npu_port.codemods._env_table import EnvVarTable
from npu_port.transpiler.analysis.env_positions import KEY_METHODS, NAME_FUNCTIONS, EnvName, EnvPositions, single_index
from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.core.cst_walk import visit
from npu_port.transpiler.core.rules import PythonContext

Collection = Union[cst.Set, cst.List, cst.Tuple]
_NAME = re.compile(r"[A-Z][A-Z0-9_]*\Z")


@dataclass
class NameSet:
    node: Collection
    additions: list[tuple[int, str, str]]  # (element index, CUDA name, name to add after it)
    env_use: bool = False
    other_use: bool = False
    bindings: int = 1
    uses: list[cst.CSTNode] = field(default_factory=list)


def additions(node: cst.BaseExpression, table: EnvVarTable) -> Optional[list[tuple[int, str, str]]]:
    """The names to add to a display of variable names, or None when it is no such display."""
    if not isinstance(node, (cst.Set, cst.List, cst.Tuple)) or not node.elements:
        return None
    names = []
    for el in node.elements:
        value = string_value(el.value) if isinstance(el, cst.Element) else None
        if value is None or not _NAME.match(value):
            return None
        names.append(value)
    found: list[tuple[int, str, str]] = []
    for i, name in enumerate(names):
        row = table.lookup(name)
        if row is not None and row.status == "rename" and row.npu and row.npu not in names:
            if all(row.npu != added for _, _, added in found):
                found.append((i, name, row.npu))
    return found or None


def _names_in(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

    visit(node, Names())
    return found


def _loop_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)) and target.elements:
        first = target.elements[0].value  # `for k, v in os.environ.items()`: k is the name
        return {first.value} if isinstance(first, cst.Name) else set()
    return set()


class _Finder(cst.CSTVisitor):
    def __init__(self, positions: EnvPositions, table: EnvVarTable):
        self.positions = positions
        self.table = table
        self.by_name: dict[str, NameSet] = {}
        self.by_attribute: dict[str, NameSet] = {}  # class attributes: `keys = [...]` in a class body
        self._scopes: list[str] = []  # "class" / "function" for the enclosing definitions
        self._receivers = {"self", "cls"}  # what a class attribute is read through: these and the file's classes
        self.inline: dict[cst.CSTNode, NameSet] = {}
        self._env_loops: list[set[str]] = []  # names bound by enclosing loops over the environment
        self._targets: set[cst.CSTNode] = set()
        self._attr_names: set[cst.CSTNode] = set()
        self._judged: set[cst.CSTNode] = set()

    # -- bindings ---------------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.append("class")
        self._receivers.add(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append("function")
        self.positions.enter_def(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()
        self.positions.leave_def()

    def visit_Return(self, node: cst.Return) -> None:
        self.positions.track_return(node.value)

    def _bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        if not isinstance(target, cst.Name):
            return
        self._targets.add(target)
        found = additions(value, self.table) if value is not None else None
        table = self.by_attribute if self._scopes and self._scopes[-1] == "class" else self.by_name
        prior = table.get(target.value)
        if prior is not None:
            prior.bindings += 1
        elif found is not None:
            assert isinstance(value, (cst.Set, cst.List, cst.Tuple))
            table[target.value] = NameSet(value, found)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.positions.track_assignment([t.target for t in node.targets], node.value)
        for t in node.targets:
            self._bind(t.target, node.value if len(node.targets) == 1 else None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.positions.track_assignment([node.target], node.value)
        self._bind(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self._targets.add(node.target)
            if node.target.value in self.by_name:
                self.by_name[node.target.value].other_use = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._attr_names.add(node.attr)
        names = self._class_attribute(node)
        if names is not None and node not in self._judged and node not in self._targets:
            names.other_use = True  # a class attribute indexed, passed on, returned

    def _class_attribute(self, node: cst.Attribute) -> Optional[NameSet]:
        """The collection `Meta.KEYS`, `self.KEYS` or `cls.KEYS` reads, if a class of the file binds it."""
        if isinstance(node.value, cst.Name) and node.value.value in self._receivers:
            return self.by_attribute.get(node.attr.value)
        return None

    # -- uses -------------------------------------------------------------------------------------
    def _iterates_env(self, it: cst.BaseExpression) -> bool:
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args \
                and it.func.attr.value in ("items", "keys"):
            it = it.func.value
        return self.positions.is_env_mapping(it)

    def _keys_env_by(self, body: cst.CSTNode, names: set[str]) -> tuple[bool, bool]:
        """Whether `body` keys the environment by one of `names`, and whether it derives another key from
        one (`f"_{name.lower()}"`, `name.lower()`, `prefix + name`)."""
        hit = False
        derived = False
        positions = self.positions

        class Keys(cst.CSTVisitor):
            def visit_Attribute(self, node: cst.Attribute) -> None:
                nonlocal derived
                derived = derived or (isinstance(node.value, cst.Name) and node.value.value in names)

            def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
                nonlocal derived
                derived = derived or any(isinstance(n, cst.Name) and n.value in names for n in _names_in(node))

            def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
                nonlocal derived
                derived = derived or any(isinstance(side, cst.Name) and side.value in names
                                         for side in (node.left, node.right))

            def visit_Subscript(self, node: cst.Subscript) -> None:
                nonlocal hit
                key = single_index(node)
                if isinstance(key, cst.Name) and key.value in names and positions.is_env_mapping(node.value):
                    hit = True

            def visit_Call(self, node: cst.Call) -> None:
                nonlocal hit
                first = node.args[0].value if node.args and node.args[0].keyword is None else None
                if not (isinstance(first, cst.Name) and first.value in names):
                    return
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in KEY_METHODS \
                        and positions.is_env_mapping(func.value):
                    hit = True
                elif positions.imports.resolve(func) in NAME_FUNCTIONS:
                    hit = True

            def visit_Comparison(self, node: cst.Comparison) -> None:
                nonlocal hit
                if isinstance(node.left, cst.Name) and node.left.value in names and any(
                        isinstance(c.operator, (cst.In, cst.NotIn)) and positions.is_env_mapping(c.comparator)
                        for c in node.comparisons):
                    hit = True

        visit(body, Keys())
        return hit, derived

    def _collection(self, expr: cst.BaseExpression) -> Optional[NameSet]:
        if isinstance(expr, cst.Name):
            return self.by_name.get(expr.value)
        if isinstance(expr, cst.Attribute):
            return self._class_attribute(expr)
        found = additions(expr, self.table)
        if found is None:
            return None
        assert isinstance(expr, (cst.Set, cst.List, cst.Tuple))
        return self.inline.setdefault(expr, NameSet(expr, found))

    def _judge(self, expr: cst.BaseExpression, env: bool, derived: bool = False) -> None:
        names = self._collection(expr)
        if names is None:
            return
        self._judged.add(expr)
        names.uses.append(expr)
        names.env_use = names.env_use or env
        names.other_use = names.other_use or derived

    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        for c in node.comparisons:
            if isinstance(c.operator, (cst.In, cst.NotIn)):
                env = isinstance(left, cst.Name) and any(left.value in loop for loop in self._env_loops)
                self._judge(c.comparator, env)
            left = c.comparator

    def _loop(self, target: cst.BaseExpression, it: cst.BaseExpression, body: cst.CSTNode) -> None:
        self._judge(it, *self._keys_env_by(body, _loop_names(target)))
        self._env_loops.append(_loop_names(target) if self._iterates_env(it) else set())

    def visit_For(self, node: cst.For) -> None:
        self._loop(node.target, node.iter, node.body)

    def leave_For(self, original_node: cst.For) -> None:
        self._env_loops.pop()

    def _comprehension(self, node: Union[cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp]) -> None:
        # The loops of a comprehension enclose its element and conditions.
        part: Optional[cst.CompFor] = node.for_in
        while part is not None:
            # The conditions and inner loops derive keys as much as the element does.
            self._judge(part.iter, *self._keys_env_by(node, _loop_names(part.target)))
            self._env_loops.append(_loop_names(part.target) if self._iterates_env(part.iter) else set())
            part = part.inner_for_in

    def _leave_comprehension(self, node: Union[cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp]) -> None:
        part: Optional[cst.CompFor] = node.for_in
        while part is not None:
            self._env_loops.pop()
            part = part.inner_for_in

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._comprehension(node)

    def leave_ListComp(self, original_node: cst.ListComp) -> None:
        self._leave_comprehension(original_node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._comprehension(node)

    def leave_SetComp(self, original_node: cst.SetComp) -> None:
        self._leave_comprehension(original_node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._comprehension(node)

    def leave_GeneratorExp(self, original_node: cst.GeneratorExp) -> None:
        self._leave_comprehension(original_node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._comprehension(node)

    def leave_DictComp(self, original_node: cst.DictComp) -> None:
        self._leave_comprehension(original_node)

    def visit_Name(self, node: cst.Name) -> None:
        names = self.by_name.get(node.value)
        if names is None or node in self._targets or node in self._judged or node in self._attr_names:
            return
        names.other_use = True  # a use that is no membership test or loop: indexed, passed on, returned


def file_name_sets(ctx: PythonContext, table: EnvVarTable) -> tuple[list[NameSet], list[NameSet]]:
    """name_sets of the file's module, read once for all the file's rules (env-var-names, the check)."""
    found = ctx.shared.get(NameSet)
    if not isinstance(found, tuple):
        found = ctx.shared[NameSet] = name_sets(ctx.module, EnvPositions(ctx.imports), table)
    return found


def name_sets(module: cst.Module, positions: EnvPositions, table: EnvVarTable) -> tuple[list[NameSet], list[NameSet]]:
    """(collections to complete, environment registries left because of another use) in `module`."""
    finder = _Finder(positions, table)
    visit(module, finder)
    complete, left = [], []
    for names in [*finder.by_name.values(), *finder.by_attribute.values(), *finder.inline.values()]:
        if not names.env_use:
            continue
        if names.other_use or names.bindings > 1:
            left.append(names)
        else:
            complete.append(names)
    return complete, left


def with_additions(node: Collection, found: list[tuple[int, str, str]]) -> Collection:
    """`node` with each added name right after its CUDA entry, spelled and separated like it."""
    elements = list(node.elements)
    for i, _, new in sorted(found, reverse=True):
        el = elements[i]
        assert isinstance(el, cst.Element) and isinstance(el.value, cst.SimpleString)
        value = el.value.with_changes(value=f"{el.value.prefix}{el.value.quote}{new}{el.value.quote}")
        added = el.with_changes(value=value)
        last = i == len(elements) - 1
        if isinstance(el.comma, cst.MaybeSentinel) or (last and isinstance(el.comma.whitespace_after, cst.SimpleWhitespace)
                                                       and not el.comma.whitespace_after.value):
            # The last element (or `("CUDA_VISIBLE_DEVICES",)`): it is followed by ", ", the added one
            # ends as the CUDA one did.
            elements[i] = el.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elements.insert(i + 1, added)
    return node.with_changes(elements=elements)


class EnvNameWalk:
    """The walk of a rule that reads the file's environment-variable names where they stand in an environment
    position (env-var-names, half-renamed-env-set): each hook hands the names it finds to `_take`, on the way
    down. A rule that does more at a node overrides the hook and calls `_found_in_*` itself."""

    positions: EnvPositions

    def _take(self, found: list[EnvName]) -> None:
        raise NotImplementedError

    def _found_in_assign(self, node: cst.Assign) -> list[EnvName]:
        self.positions.track_assignment([t.target for t in node.targets], node.value)
        found: list[EnvName] = []
        for t in node.targets:
            if isinstance(t.target, cst.Subscript):
                found += self.positions.in_subscript(t.target, node.value)
        return found

    def visit_Assign(self, node: cst.Assign) -> None:
        self._take(self._found_in_assign(node))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.positions.track_assignment([node.target], node.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.positions.enter_def(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.positions.leave_def()
        return updated_node

    def visit_Return(self, node: cst.Return) -> None:
        self.positions.track_return(node.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._take(self.positions.in_subscript(node))

    def visit_Call(self, node: cst.Call) -> None:
        self._take(self.positions.in_call(node))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._take(self.positions.in_comparison(node))

    def visit_Dict(self, node: cst.Dict) -> None:
        self._take(self.positions.in_dict(node))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._take(self.positions.in_binary_operation(node))


"""Finds every rule in the `npu_port.codemods` package and resolves --select/--ignore/--extras to a rule list.

Two views of the same rules: `all_rules()` imports every rule module (the classes, their definitions
checked); `rule_specs()` is their metadata from the checked-in index (core/rule_catalog.py), so that a
run imports only the rules a file's triggers call for. The specs come from `all_rules()`'s classes
instead where the index is stale, once they are imported anyway, and where `all_rules` has been
replaced (tests add their rules to it or replace it).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from functools import cache, lru_cache

from npu_port import codemods
from npu_port.transpiler.core.rule_catalog import RuleSpec, indexed
from npu_port.transpiler.core.rules import GROUPS, RULE_LANGUAGES, SAFETY_LEVELS, Rule


class UnknownRuleError(ValueError):
    pass


class RuleDefinitionError(RuntimeError):
    """A rule class whose description uses a word outside the framework's vocabulary, or an id twice."""


_VOCABULARY = (("LANGUAGE", RULE_LANGUAGES), ("GROUP", GROUPS), ("SAFETY", SAFETY_LEVELS))


def _check_definition(rule: type[Rule]) -> None:
    for attribute, allowed in _VOCABULARY:
        value = getattr(rule, attribute, None)
        if value not in allowed:
            raise RuleDefinitionError(f"rule {rule.ID} ({rule.__module__}.{rule.__qualname__}): {attribute} "
                                      f"{value!r} is not one of {', '.join(allowed)}")


@cache
def all_rules() -> dict[str, type[Rule]]:
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(codemods.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{codemods.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__ \
                    and getattr(obj, "ID", None):
                if obj.ID in found:
                    raise RuleDefinitionError(f"duplicate rule id {obj.ID}: {module.__name__}")
                _check_definition(obj)
                found[obj.ID] = obj
    return dict(sorted(found.items()))


_IMPORT_ALL = all_rules


def rule_specs() -> dict[str, RuleSpec]:
    """Every rule's metadata by id, sorted, as `all_rules()` would list them, importing none where the
    index is current. Once the rules are imported (or `all_rules` is replaced), the classes are what
    counts: tests add their rules to that dict, or replace the function."""
    if all_rules is _IMPORT_ALL and not _IMPORT_ALL.cache_info().currsize:
        found = indexed()
        if found is not None:
            return found
    return _specs_of(tuple(all_rules().items()))


@lru_cache(maxsize=8)
def _specs_of(rules: tuple[tuple[str, type[Rule]], ...]) -> dict[str, RuleSpec]:
    return {rule_id: RuleSpec.of(rule) for rule_id, rule in rules}


def _expand(names: Iterable[str], rules: Mapping[str, RuleSpec]) -> set[str]:
    out: set[str] = set()
    groups = {r.GROUP for r in rules.values()} | {r.LANGUAGE for r in rules.values()}
    for name in names:
        name = name.strip()
        if not name:
            continue
        if name == "ALL":
            out.update(rules)
        elif name in rules:
            out.add(name)
        elif name in groups:
            out.update(i for i, r in rules.items() if name in (r.GROUP, r.LANGUAGE))
        else:
            prefixed = [i for i in rules if i.startswith(name)]
            if not prefixed:
                raise UnknownRuleError(f"unknown rule or group {name!r} (see `npu-port rules`)")
            out.update(prefixed)
    return out


def select_specs(select: Iterable[str] = (), ignore: Iterable[str] = (), extras: bool = False) -> list[RuleSpec]:
    """Default rules, plus extras when asked; --select replaces the default set, --ignore removes. Raises
    UnknownRuleError for a name that is no rule, group or id prefix. Imports no rule."""
    rules = rule_specs()
    select = list(select)
    if select:
        chosen = _expand(select, rules)
    else:
        chosen = {i for i, r in rules.items() if r.GROUP == "default" or (extras and r.GROUP == "extras")}
    if extras:
        chosen |= {i for i, r in rules.items() if r.GROUP == "extras"}
    chosen -= _expand(ignore, rules)
    return [rules[i] for i in sorted(chosen)]


def select_rules(select: Iterable[str] = (), ignore: Iterable[str] = (), extras: bool = False) -> list[type[Rule]]:
    """The classes of `select_specs(...)`, imported."""
    return [spec.load() for spec in select_specs(select, ignore, extras)]

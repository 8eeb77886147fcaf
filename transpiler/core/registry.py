"""Finds every rule in the `npu_port.codemods` package and resolves --select/--ignore/--extras to a rule list."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from functools import cache

from npu_port import codemods
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


def _expand(names: Iterable[str], rules: dict[str, type[Rule]]) -> set[str]:
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


def select_rules(select: Iterable[str] = (), ignore: Iterable[str] = (), extras: bool = False) -> list[type[Rule]]:
    """Default rules, plus extras when asked; --select replaces the default set, --ignore removes."""
    rules = all_rules()
    select = list(select)
    if select:
        chosen = _expand(select, rules)
    else:
        chosen = {i for i, r in rules.items() if r.GROUP == "default" or (extras and r.GROUP == "extras")}
    if extras:
        chosen |= {i for i, r in rules.items() if r.GROUP == "extras"}
    chosen -= _expand(ignore, rules)
    return [rules[i] for i in sorted(chosen)]

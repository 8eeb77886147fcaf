"""The per-file pipeline: prefilter, parse once, run the selected rules, emit. Knows no rule by name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

from codemods._base import FileContext, Rule, RunOptions
from transpiler.analysis.source_facts import scan
from transpiler.files import language_of
from transpiler.python_source import SourceError, convert_python
from transpiler.registry import select_rules
from transpiler.report import FileOutcome
from transpiler.settings import Settings


@dataclass
class Converted:
    outcome: FileOutcome
    output: Optional[bytes]  # None when the file is unchanged


def convert_text(data: bytes, path: str, rule_classes: Sequence[type[Rule]], options: RunOptions):
    """Shell and YAML: each rule rewrites the text in turn (they use token-aware / round-trip editors)."""
    if b"\x00" in data:
        raise SourceError("binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not valid UTF-8 at byte {exc.start}") from None
    ctx = FileContext(path, text, options)
    new = text
    for cls in rule_classes:
        new = cls(ctx).apply(new)
    out = data if new == text else new.encode("utf-8")
    return out, ctx.findings


_ANYTHING = re.compile(b"")

CONVERTERS = {"python": convert_python, "shell": convert_text, "yaml": convert_text}


def trigger_pattern(rules: Sequence[type[Rule]], extra: Sequence[str] = ()) -> Optional[re.Pattern]:
    """One alternation of every trigger of `rules` (plus `extra` literals), searched once over a file's bytes.

    None when some rule declares no trigger: it may act on any file, so every file is parsed.
    """
    triggers, patterns = {t.encode("utf-8") for t in extra}, set()
    for rule in rules:
        if not rule.TRIGGERS and not rule.TRIGGER_PATTERNS:
            return None
        triggers.update(t.encode("utf-8") for t in rule.TRIGGERS)
        patterns.update(p.encode("utf-8") for p in rule.TRIGGER_PATTERNS)
    # Longest first only keeps the alternation deterministic; any match answers the question.
    alternatives = [re.escape(t) for t in sorted(triggers, key=lambda t: (-len(t), t))] + sorted(patterns)
    return re.compile(b"|".join(alternatives))


def _user_table_names(options: RunOptions) -> tuple[str, ...]:
    """The names a user's `--rules` tables map: rules act on them, so they are triggers too."""
    files = options.extra.get("rules_files", ())
    if not files:
        return ()
    from transpiler.user_tables import load_user_tables  # only for runs with custom tables

    return tuple(sorted({row["cuda"].rstrip("*") for f in files
                         for rows in load_user_tables(f, options.target).values() for row in rows}))


class Engine:
    def __init__(self, settings: Settings, rules: Optional[Sequence[type[Rule]]] = None,
                 prefilter: bool = True):
        self.settings = settings
        self.options = settings.run_options()
        self.rules = list(rules) if rules is not None else select_rules(settings.select, settings.ignore,
                                                                         settings.extras)
        self.prefilter = prefilter
        self.by_language: dict[str, list[type[Rule]]] = {}
        for rule in self.rules:
            self.by_language.setdefault(rule.LANGUAGE, []).append(rule)
        self._user_names = _user_table_names(self.options)
        self._patterns = {lang: trigger_pattern(rules, self._user_names) for lang, rules in self.by_language.items()}
        # A rule whose own triggers are absent does nothing (tests/test_property_prefilter.py), whichever
        # other rule's trigger let the file through.
        self._own_triggers = {r: trigger_pattern([r]) or _ANYTHING for r in self.by_language.get("python", ())}

    def needs_parse(self, data: bytes, language: str) -> list[type[Rule]]:
        """The prefilter, in two stages. First the triggers: all rules of the language if any of their
        triggers occurs in the file's bytes (triggers are ASCII, so this holds for any ASCII-compatible
        encoding), else none. Then, for Python, the scouts: the rules that could act on the file's code
        words and string literals (a trigger in a comment or a log message is not enough), plus the
        rules that follow other rules' changes; none if no rule could act."""
        rules = self.by_language.get(language)
        if not rules:
            return []
        if not self.prefilter:
            return rules
        pattern = self._patterns[language]
        if pattern is not None and not pattern.search(data):
            return []
        if language != "python" or self._user_names:
            return rules  # user tables may name anything: their rules have no scouts of their own
        facts = scan(data)
        wanted = [r for r in rules if self._own_triggers[r].search(data) and r.scout(facts, self.options)]
        if not wanted:
            return []
        return [r for r in rules if r in wanted or r.FOLLOWS_CHANGES]

    def rules_named(self, ids: Sequence[str]) -> list[type[Rule]]:
        """The selected rules with these ids, in selection order (a worker told what the driver chose)."""
        wanted = set(ids)
        return [r for r in self.rules if r.ID in wanted]

    def convert(self, data: bytes, path: str, language: Optional[str] = None,
                rules: Optional[Sequence[type[Rule]]] = None) -> Converted:
        """Convert one file with `rules`, or with the rules the prefilter picks for it."""
        language = language or language_of(path, data[:128])
        rules = self.needs_parse(data, language) if rules is None else rules
        if not rules:
            status = "skipped" if language in CONVERTERS else "copied"
            return Converted(FileOutcome(path, status, language=language), None)
        try:
            out, findings = CONVERTERS[language](data, path, rules, self.options)
        except SourceError as exc:
            return Converted(FileOutcome(path, "failed", error=str(exc), language=language), None)
        changed = out != data
        outcome = FileOutcome(path, "converted" if changed else "unchanged", findings, language=language)
        return Converted(outcome, out if changed else None)

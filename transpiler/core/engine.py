"""The per-file pipeline: prefilter, parse once, run the selected rules, emit. Knows no rule by name.

The engine holds its rules as specs (core/rule_catalog.RuleSpec): the prefilter's first stage reads
only their triggers, and a rule module is imported when a file's triggers call for the rule (its
scout, then its pass), so a run imports the rules its files need and no others.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

from npu_port.transpiler.analysis.source_facts import scan
from npu_port.transpiler.core.files import ReadError, is_makefile, language_of, source_text
from npu_port.transpiler.core.notebook import convert_notebook, notebook_code
from npu_port.transpiler.core.python_source import SourceError, convert_python
from npu_port.transpiler.core.registry import select_specs
from npu_port.transpiler.core.report import FileOutcome, Finding, Language, Status
from npu_port.transpiler.core.rule_catalog import RuleLike, RuleSpec, as_spec
from npu_port.transpiler.core.rules import FileContext, Rule, RunOptions, TextRule, kept_for_cuda
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.text.make_recipes import recipe_view
from npu_port.transpiler.text.yaml_code import without_comments


@dataclass
class Converted:
    outcome: FileOutcome
    output: Optional[bytes]  # None when the file is unchanged


def convert_text(data: bytes, path: str, rule_classes: Sequence[type[TextRule]],
                 options: RunOptions) -> tuple[bytes, list[Finding]]:
    """Shell, YAML and CUDA C++: each rule rewrites (or reads) the text in turn (token-aware / round-trip
    editors)."""
    try:
        text = source_text(data, language_of(path))
    except ReadError as exc:
        raise SourceError(str(exc)) from None
    ctx = FileContext(path, text, options)
    new = text
    for cls in rule_classes:
        new = cls(ctx).apply(new)
    out = data if new == text else new.encode("utf-8")
    return out, ctx.findings


def convert_manifest(data: bytes, path: str, rule_classes: Sequence[type[TextRule]],
                     options: RunOptions) -> tuple[bytes, list[Finding]]:
    """A manifest's own rules; in a Makefile, the shell rules too, over its recipes (text/make_recipes).
    A rule's edits there are made where each replaces a span of a recipe line with text that make passes
    on as written (no `$`, which make takes for its own, no line break: make runs each recipe line in a
    shell of its own, so a line a rule inserts would not reach the next); a rule with any other edit
    leaves the recipe as it is, and what it would change is reported."""
    own = [cls for cls in rule_classes if cls.LANGUAGE == "manifest"]
    out, findings = convert_text(data, path, own, options) if own else (data, [])
    shell = [cls for cls in rule_classes if cls.LANGUAGE == "shell"]
    if not shell:
        return out, findings
    from npu_port.transpiler.text.text_edits import apply_edits  # (it loads difflib: Makefiles only)

    text = base = source_text(out, "manifest")
    ctx = FileContext(path, text, options)
    for cls in shell:
        rule, before = cls(ctx), len(ctx.findings)
        rule.apply(recipe_view(text))
        edits = getattr(rule, "edits", ())
        if all("$" not in e.text and "\n" not in e.text for e in edits):
            text = apply_edits(text, edits) if edits else text
        else:
            ctx.findings[before:] = [_left_in_recipe(f, options.keep_cuda) for f in ctx.findings[before:]]
    return (out if text == base else text.encode("utf-8")), findings + ctx.findings


def _left_in_recipe(finding: Finding, keep_cuda: bool) -> Finding:
    if finding.kind != "change":
        return finding
    # (--keep-cuda: the device-agnostic form reads a shell variable, which make would take for its own)
    message = kept_for_cuda(f"in a make recipe: {finding.message}") if keep_cuda else \
        f"in a make recipe, left for a human: {finding.message}"
    return replace(finding, kind="finding", severity="warning", message=message,
                   hint="make the change in the recipe by hand (`$` is written `$$` there; each line runs in its own shell)")


# CUDA C++ sources and manifests are only read: their rules report, never rewrite. Each converter takes
# the rules of its language (PythonRule or TextRule classes; the registry picks them by LANGUAGE).
Converter = Callable[[bytes, str, Any, RunOptions], tuple[bytes, list[Finding]]]
CONVERTERS: dict[str, Converter] = {"python": convert_python, "shell": convert_text, "yaml": convert_text,
                                    "cuda": convert_text, "manifest": convert_manifest,
                                    "notebook": convert_notebook}


class Triggers:
    """The triggers of one language's rules, each distinct one searched once per file: a literal with
    `in` (a fast substring search), a pattern with its regex. Much faster than one alternation, which
    the regex engine tries at every position."""

    def __init__(self, rules: Sequence[Any], extra: Sequence[str] = ()):
        checks: dict[Union[bytes, re.Pattern[bytes]], int] = {}

        def index(trigger) -> int:
            return checks.setdefault(trigger, len(checks))

        self._of_rule: dict[Any, Optional[tuple[int, ...]]] = {}  # rule classes or their specs
        for rule in rules:
            own = [index(t.encode("utf-8")) for t in rule.TRIGGERS]
            own += [index(re.compile(p.encode("utf-8"))) for p in rule.TRIGGER_PATTERNS]
            self._of_rule[rule] = tuple(own) if own else None  # None: no trigger, acts on any file
        self._extra = tuple(index(t.encode("utf-8")) for t in extra)
        self._checks = list(checks)

    def search(self, data: bytes) -> tuple[list[Any], bool]:
        """(the rules whose own triggers occur in `data`, whether an `extra` literal does)."""
        found = [c in data if isinstance(c, bytes) else c.search(data) is not None for c in self._checks]
        hit = [r for r, own in self._of_rule.items() if own is None or any(found[i] for i in own)]
        return hit, any(found[i] for i in self._extra)


def _user_table_names(options: RunOptions) -> tuple[str, ...]:
    """The names a user's `--rules` tables map: rules act on them, so they are triggers too."""
    files = options.rules_files
    if not files:
        return ()
    from npu_port.transpiler.tables.user_tables import load_user_tables  # only for runs with custom tables

    return tuple(sorted({row["cuda"].rstrip("*") for f in files
                         for rows in load_user_tables(f, options.target).values() for row in rows}))


class Engine:
    def __init__(self, settings: Settings, rules: Optional[Sequence[RuleLike]] = None,
                 prefilter: bool = True):
        """`rules`: rule classes or their specs (default: the settings' selection, none imported yet)."""
        self.settings = settings
        self.options = settings.run_options()
        self.specs: list[RuleSpec] = [as_spec(r) for r in rules] if rules is not None else \
            select_specs(settings.select, settings.ignore, settings.extras)
        self.prefilter = prefilter
        self.by_language: dict[Language, list[RuleSpec]] = {}
        for spec in self.specs:
            self.by_language.setdefault(spec.LANGUAGE, []).append(spec)  # type: ignore[arg-type]
        if "python" in self.by_language:  # a notebook's code cells are Python (core/notebook.py)
            self.by_language["notebook"] = self.by_language["python"]
        self._user_names = _user_table_names(self.options)
        self._triggers = {lang: Triggers(specs, self._user_names) for lang, specs in self.by_language.items()}

    @property
    def rules(self) -> list[type[Rule]]:
        """The selected rule classes, every one imported."""
        return [spec.load() for spec in self.specs]

    def needs_parse(self, data: bytes, language: Language, path: str = "") -> list[type[Rule]]:
        """The rules to run on a file (`_chosen`); a Makefile also gets the shell rules its recipes call for."""
        chosen = self._chosen(data, language, path)
        if language == "manifest" and is_makefile(os.path.basename(path).lower()):
            chosen += self._recipe_rules(data)
        return chosen

    def _chosen(self, data: bytes, language: Language, path: str = "") -> list[type[Rule]]:
        """The prefilter, in two stages. First the triggers: all rules of the language if any of their
        triggers occurs in the file's bytes (triggers are ASCII, so this holds for any ASCII-compatible
        encoding), else none. Then, for Python, the scouts: the rules that could act on the file's code
        words and string literals (a trigger in a comment or a log message is not enough), plus the
        rules that follow other rules' changes; none if no rule could act. Only the rules returned and
        those whose scouts were asked get imported. `path` is the path the file is converted under
        (the rules' context gets the same): some rules leave files alone by where they lie."""
        specs = self.by_language.get(language)
        if not specs:
            return []
        if language == "notebook":  # judged by the Python of its code cells, their triggers before any parse
            code = notebook_code(data, path, "text")
            if code is None:
                return [s.load() for s in specs]  # no notebook it can read: the conversion says why
            hit, user_name = self._triggered_specs(code, "python")
            if self.prefilter and not hit and not user_name:
                return []
            chosen = self.needs_parse(notebook_code(data, path) or b"", "python", path)
            # A cell that does not parse, with a trigger: the conversion reports it as left.
            return chosen or [s.load() for s in self._triggered_specs(notebook_code(data, path, "left") or b"",
                                                                       "python")[0]]
        if not self.prefilter:
            return [s.load() for s in specs]
        hit, user_name = self._triggered_specs(data, language)
        if not hit and not user_name:
            return []
        if language == "yaml" and not self._user_names and not self._triggered_outside_comments(data):
            return []
        if language != "python" or self._user_names:
            return [s.load() for s in specs]  # user tables may name anything: their rules have no scouts of their own
        # A rule whose own triggers are absent does nothing (tests/test_property_prefilter.py), whichever
        # other rule's trigger let the file through.
        facts = scan(data, path)
        wanted = {s for s in hit if s.load().scout(facts, self.options)}
        if not wanted:
            return []
        if all(s.SAFETY == "report-only" for s in wanted):
            # Nothing will change, so the rules that follow changes have none to follow: alone, their
            # scouts declined the file (tests/test_property_prefilter.py holds them to it).
            return [s.load() for s in specs if s in wanted]
        return [s.load() for s in specs if s in wanted or s.FOLLOWS_CHANGES]

    def _recipe_rules(self, data: bytes) -> list[type[Rule]]:
        """The shell rules a Makefile's recipes trigger (all of them where any does, as for a script)."""
        shell = self.by_language.get("shell")
        if not shell:
            return []
        try:
            view = recipe_view(source_text(data, "manifest")).encode("utf-8")
        except ReadError:
            return []  # the conversion reports it
        if self.prefilter and not any(self._triggered_specs(view, "shell")):
            return []
        return [s.load() for s in shell]

    def _triggered_outside_comments(self, data: bytes) -> bool:
        """YAML: whether a trigger occurs outside the file's comments, where its keys and values are
        (True where libyaml cannot tell: the file is loaded as before). The rules act on keys and
        values only, so a trigger in a comment alone lets no rule act (benchmarks/check_prefilter_exact.py)."""
        try:
            text = source_text(data, "yaml")
        except ReadError:
            return True  # the conversion reports it
        code = without_comments(text)
        if code is None or code is text:
            return True
        return bool(self._triggered_specs(code.encode("utf-8"), "yaml")[0])

    def _triggered_specs(self, data: bytes, language: Language) -> tuple[list[RuleSpec], bool]:
        triggers = self._triggers.get(language)
        return triggers.search(data) if triggers is not None else ([], False)

    def triggered(self, data: bytes, language: Language) -> tuple[list[type[Rule]], bool]:
        """The prefilter's first stage: (the rules whose own triggers occur in `data`, whether a name
        from the user's `--rules` tables does)."""
        hit, user_name = self._triggered_specs(data, language)
        return [s.load() for s in hit], user_name

    def rules_named(self, ids: Sequence[str]) -> list[type[Rule]]:
        """The selected rules with these ids, in selection order (a worker told what the driver chose)."""
        wanted = set(ids)
        return [s.load() for s in self.specs if s.ID in wanted]

    def convert(self, data: bytes, path: str, language: Optional[Language] = None,
                rules: Optional[Sequence[type[Rule]]] = None) -> Converted:
        """Convert one file with `rules`, or with the rules the prefilter picks for it."""
        language = language or language_of(path, data[:128])
        rules = self.needs_parse(data, language, path) if rules is None else rules
        if not rules:
            status: Status = "skipped" if language in CONVERTERS else "copied"
            return Converted(FileOutcome(path, status, language=language), None)
        try:
            out, findings = CONVERTERS[language](data, path, rules, self.options)
        except SourceError as exc:
            return Converted(FileOutcome(path, "failed", error=str(exc), language=language), None)
        changed = out != data
        outcome = FileOutcome(path, "converted" if changed else "unchanged", findings, language=language)
        return Converted(outcome, out if changed else None)

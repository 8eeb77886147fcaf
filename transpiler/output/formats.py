"""Renderers of a run's findings: text (rich), JSON, SARIF 2.1.0, GitHub annotations, and the
Markdown / HTML summary a reviewer reads in a pull request.

All of them take the same inputs (outcomes, and for `check` the edits and source lines), so
`convert` and `check` report alike. The JSON schema is documented in docs/report-schema.md.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Optional
from urllib.parse import quote

from npu_port.transpiler import __version__
from npu_port.transpiler.core.exit_codes import ExitCode
from npu_port.transpiler.core.files import encodable
from npu_port.transpiler.core.registry import rule_specs
from npu_port.transpiler.core.report import CheckReport, Edit, FileOutcome, Finding, findings_to_json
from npu_port.transpiler.output.console import Styled, escape
from npu_port.transpiler.output.render import LONG_HINT

OUTPUT_FORMATS = ("text", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}

if TYPE_CHECKING:
    # The renderers import rich's table (with its fractions and decimal) and html when they run:
    # `convert` imports this module for its --summary and --report, which most runs do not ask for.
    from npu_port.transpiler.output.console import Console


def _rule_meta(rule_id: str) -> dict:
    rule = rule_specs().get(rule_id)
    if rule is None:
        return {"summary": rule_id, "safety": "", "group": "", "language": ""}
    return {"summary": rule.summary(), "safety": rule.SAFETY, "group": rule.GROUP, "language": rule.LANGUAGE}


# -- text ----------------------------------------------------------------------------------------

def render_text(console: Console, report: CheckReport, *, statistics: bool = False, strict: bool = False) -> None:
    """Grouped by file, each finding with its source line, fix and hint; then the totals. A long hint is
    printed in full once per rule; later findings with the same one point back to it (JSON keeps all)."""
    shown_hints: set[tuple[str, str]] = set()
    for outcome in report.outcomes:
        if outcome.status == "failed":
            console.print(f"[bold underline]{escape(outcome.path)}[/]")
            console.print(f"  [bold red]error[/] cannot check: {escape(outcome.error)}\n")
            continue
        if not outcome.findings:
            continue
        console.print(f"[bold underline]{escape(outcome.path)}[/]")
        for f in sorted(outcome.findings):
            style = _STYLE.get(f.severity, "")
            console.print(f"  {f.line}:{f.col}  [{style}]{f.severity}[/]  [bold]{f.rule}[/]  {escape(f.message)}")
            line = report.source_line(f)
            if line.strip():
                console.print(Styled((f"    {f.line:>5} | ", "dim"), line.rstrip()))
            # Styled pieces, not markup: rich's escape() doubles a trailing backslash (a shell continuation).
            if f.fix:
                console.print(Styled("    ", ("fix", "green"), ": ", f.fix))
            if f.hint and f.hint != f.fix:
                if len(f.hint) > LONG_HINT and (f.rule, f.hint) in shown_hints:
                    console.print(Styled("    ", (f"hint: as for the first {f.rule} finding above", "dim")))
                else:
                    shown_hints.add((f.rule, f.hint))
                    console.print(Styled("    ", (f"hint: {f.hint}", "dim")))
        console.print()
    if statistics:
        render_statistics(console, report.findings)
    errors, warnings = report.count("error"), report.count("warning")
    failed = len(report.failed)
    verdict = "[bold red]failed[/]" if report.exit_code(strict) else "[bold green]passed[/]"
    console.print(f"{verdict}: {errors} errors, {warnings} warnings, {report.count('info')} notes"
                  f"{f', {failed} files could not be checked' if failed else ''}; "
                  f"{len(report.outcomes)} files checked")


def statistics_rows(findings: Iterable[Finding]) -> list[dict]:
    counts = Counter((f.rule, f.severity) for f in findings)
    fixable = Counter((f.rule, f.severity) for f in findings if f.kind == "change")
    return [{"rule": rule, "severity": sev, "count": n, "fixable": fixable.get((rule, sev), 0),
             "summary": _rule_meta(rule)["summary"]}
            for (rule, sev), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def render_statistics(console: Console, findings: Iterable[Finding]) -> None:
    from rich.table import Table

    table = Table(header_style="bold")
    table.add_column("count", justify="right")
    table.add_column("rule", no_wrap=True)
    table.add_column("severity")
    table.add_column("fixable by convert", justify="right")
    for row in statistics_rows(findings):
        table.add_row(str(row["count"]), row["rule"], row["severity"], str(row["fixable"]))
    console.print(table)


def check_exit_code(report: CheckReport, *, strict: bool = False, exit_zero: bool = False) -> ExitCode:
    """`check`'s exit code; --exit-zero turns what was found into 0, never an internal error."""
    code = report.exit_code(strict)
    return ExitCode.OK if exit_zero and code == ExitCode.FAILED else code


# -- JSON ----------------------------------------------------------------------------------------

def render_json(report: CheckReport, *, command: str, target: str, strict: bool = False,
                statistics: bool = False, exit_zero: bool = False) -> str:
    summary = {
        "command": command,
        "target": target,
        "files": len(report.outcomes),
        "files_failed": len(report.failed),
        "errors": report.count("error"),
        "warnings": report.count("warning"),
        "infos": report.count("info"),
        "exit_code": int(check_exit_code(report, strict=strict, exit_zero=exit_zero)),
    }
    if statistics:
        summary["statistics"] = [{k: r[k] for k in ("rule", "severity", "count", "fixable")}
                                 for r in statistics_rows(report.findings)]
    return findings_to_json(report.outcomes, **summary)


def convert_summary(outcomes: list[FileOutcome], *, target: str, dry_run: bool, exit_code: int) -> dict:
    """The `summary` of `convert --report`: the counts the text summary prints (see docs/report-schema.md)."""
    status = Counter(o.status for o in outcomes)
    per_rule = Counter(f.rule for o in outcomes for f in o.changes)
    found = [f for o in outcomes for f in o.findings if f.kind == "finding"]
    severity = Counter(f.severity for f in found)
    return {
        "command": "convert",
        "target": target,
        "dry_run": dry_run,
        "files": len(outcomes),
        "converted": status["converted"],
        "unchanged": status["unchanged"],
        "skipped": status["skipped"],
        "copied": status["copied"],
        "files_failed": status["failed"],
        "changes": sum(per_rule.values()),
        "changes_per_rule": dict(sorted(per_rule.items())),
        "needs_human": sum(1 for f in found if f.severity != "info"),
        "errors": severity["error"],
        "warnings": severity["warning"],
        "infos": severity["info"],
        "exit_code": exit_code,
    }


# -- SARIF 2.1.0 ---------------------------------------------------------------------------------

def _uri(path: str) -> str:
    return quote(PurePath(path).as_posix(), safe="/:._-~")


def _sarif_rule(rule_id: str) -> dict:
    rule = rule_specs().get(rule_id)
    meta = _rule_meta(rule_id)
    out = {
        "id": rule_id,
        "shortDescription": {"text": meta["summary"]},
        "properties": {"safety": meta["safety"], "group": meta["group"], "language": meta["language"]},
    }
    if rule is not None:
        out["fullDescription"] = {"text": rule.description()}
        out["help"] = {"text": rule.description()}
    return out


def render_sarif(report: CheckReport, *, command: str = "check") -> str:
    rule_ids = sorted({f.rule for f in report.findings})
    index = {r: i for i, r in enumerate(rule_ids)}
    results = []
    for f in report.findings:
        region: dict[str, object] = {"startLine": f.line, "startColumn": f.col}
        snippet = report.source_line(f)
        if snippet:
            region["snippet"] = {"text": snippet}
        result = {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": _SARIF_LEVEL.get(f.severity, "note"),
            "message": {"text": f.message + (f" (hint: {f.hint})" if f.hint and f.hint != f.fix else "")},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.file)}, "region": region}}],
            "properties": {"kind": f.kind},
        }
        edit = report.edits.get(f)
        if edit is not None:
            result["fixes"] = [_sarif_fix(f, edit)]
        results.append(result)
    notifications = [
        {"level": "error", "message": {"text": o.error},
         "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(o.path)}}}]}
        for o in report.failed
    ]
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "npu-port",
                "version": __version__,
                "informationUri": "https://pypi.org/project/npu-port/",
                "rules": [_sarif_rule(r) for r in rule_ids],
            }},
            "invocations": [{
                "executionSuccessful": not report.internal_errors,
                "commandLine": f"npu-port {command}",
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def _sarif_fix(f: Finding, edit: Edit) -> dict:
    text = edit.text + "\n" if edit.text else ""
    if edit.end < edit.start:  # an insertion: an empty region before line `start`
        deleted = {"startLine": edit.start, "startColumn": 1, "endLine": edit.start, "endColumn": 1}
    else:
        deleted = {"startLine": edit.start, "endLine": edit.end}
    return {
        "description": {"text": f.fix or f.message},
        "artifactChanges": [{
            "artifactLocation": {"uri": _uri(f.file)},
            "replacements": [{"deletedRegion": deleted, "insertedContent": {"text": text}}],
        }],
    }


# -- GitHub workflow annotations -----------------------------------------------------------------

def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def render_github(report: CheckReport) -> str:
    """`::error file=F,line=L,col=C,title=RULE::message` lines, as GitHub Actions reads them."""
    kind = {"error": "error", "warning": "warning", "info": "notice"}
    lines = []
    for o in report.failed:
        lines.append(f"::error file={_gh_prop(o.path)},title=npu-port::{_gh_data('cannot check: ' + o.error)}")
    for f in report.findings:
        msg = f.message + (f" (fix: {f.fix})" if f.fix else "") + (f" (hint: {f.hint})" if f.hint and f.hint != f.fix else "")
        lines.append(f"::{kind.get(f.severity, 'notice')} file={_gh_prop(f.file)},line={f.line},col={f.col},"
                     f"title={_gh_prop(f.rule)}::{_gh_data(msg)}")
    return "".join(line + "\n" for line in lines)


# -- pull-request summary (Markdown / HTML) ------------------------------------------------------

def _summary_sections(outcomes: list[FileOutcome]) -> dict:
    changed = [(o.path, len(o.changes)) for o in outcomes if o.changes]
    per_rule = Counter(f.rule for o in outcomes for f in o.changes)
    human: dict[str, list[Finding]] = defaultdict(list)
    for o in outcomes:
        for f in sorted(o.findings):
            if f.kind != "change" and f.severity in ("warning", "error"):
                human[f.rule].append(f)
    failed = [(o.path, o.error) for o in outcomes if o.status == "failed"]
    return {"changed": changed, "per_rule": per_rule, "human": dict(sorted(human.items())), "failed": failed}


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _changed_words(dry_run: bool) -> tuple[str, str]:
    """How the summary line and heading name the changed files: nothing is written in a dry run."""
    return ("would change", "Files that would change") if dry_run else ("changed", "Files changed")


def render_markdown(outcomes: list[FileOutcome], *, title: str, dry_run: bool = False) -> str:
    s = _summary_sections(outcomes)
    changes = sum(s["per_rule"].values())
    needs = sum(len(v) for v in s["human"].values())
    changed, heading = _changed_words(dry_run)
    out = [f"# {title}", "",
           f"{len(outcomes)} files; {len(s['changed'])} {changed}; {changes} changes; "
           f"{needs} findings need a human; {len(s['failed'])} files failed.", ""]
    out += [f"## {heading}", ""]
    out += [f"- `{p}`: {n} changes" for p, n in s["changed"]] or ["None."]
    out += ["", "## Changes per rule", ""]
    if s["per_rule"]:
        out += ["| rule | changes | what it does |", "| --- | ---: | --- |"]
        out += [f"| `{r}` | {n} | {_md_cell(_rule_meta(r)['summary'])} |" for r, n in sorted(s["per_rule"].items())]
    else:
        out.append("None.")
    out += ["", "## Needs a human", ""]
    if not s["human"] and not s["failed"]:
        out.append("Nothing.")
    for rule, items in s["human"].items():
        out += [f"### `{rule}`: {_md_cell(_rule_meta(rule)['summary'])} ({len(items)})", ""]
        for f in items:
            hint = f" (hint: {f.hint})" if f.hint else ""
            out.append(f"- [ ] `{f.file}:{f.line}:{f.col}` {f.severity}: {_md_cell(f.message)}{_md_cell(hint)}")
        out.append("")
    if s["failed"]:
        out += ["### Files that could not be processed", ""]
        out += [f"- [ ] `{p}`: {_md_cell(e)}" for p, e in s["failed"]]
    return "\n".join(out).rstrip() + "\n"


def render_html(outcomes: list[FileOutcome], *, title: str, dry_run: bool = False) -> str:
    import html

    s = _summary_sections(outcomes)
    e = html.escape
    changes = sum(s["per_rule"].values())
    needs = sum(len(v) for v in s["human"].values())
    changed, heading = _changed_words(dry_run)
    parts = [
        "<!DOCTYPE html>", f"<html><head><meta charset=\"utf-8\"><title>{e(title)}</title></head><body>",
        f"<h1>{e(title)}</h1>",
        f"<p>{len(outcomes)} files; {len(s['changed'])} {changed}; {changes} changes; {needs} findings need a "
        f"human; {len(s['failed'])} files failed.</p>",
        f"<h2>{heading}</h2>",
    ]
    if s["changed"]:
        parts.append("<ul>" + "".join(f"<li><code>{e(p)}</code>: {n} changes</li>" for p, n in s["changed"])
                     + "</ul>")
    else:
        parts.append("<p>None.</p>")
    parts.append("<h2>Changes per rule</h2>")
    if s["per_rule"]:
        rows = "".join(f"<tr><td><code>{e(r)}</code></td><td>{n}</td><td>{e(_rule_meta(r)['summary'])}</td></tr>"
                       for r, n in sorted(s["per_rule"].items()))
        parts.append(f"<table><tr><th>rule</th><th>changes</th><th>what it does</th></tr>{rows}</table>")
    else:
        parts.append("<p>None.</p>")
    parts.append("<h2>Needs a human</h2>")
    if not s["human"] and not s["failed"]:
        parts.append("<p>Nothing.</p>")
    for rule, items in s["human"].items():
        parts.append(f"<h3><code>{e(rule)}</code>: {e(_rule_meta(rule)['summary'])} ({len(items)})</h3><ul>")
        for f in items:
            hint = f" <em>hint: {e(f.hint)}</em>" if f.hint else ""
            parts.append(f"<li><code>{e(f.file)}:{f.line}:{f.col}</code> {e(f.severity)}: {e(f.message)}{hint}</li>")
        parts.append("</ul>")
    if s["failed"]:
        parts.append("<h3>Files that could not be processed</h3><ul>"
                     + "".join(f"<li><code>{e(p)}</code>: {e(err)}</li>" for p, err in s["failed"]) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_summary(path: Path, outcomes: list[FileOutcome], *, title: str, dry_run: bool = False) -> None:
    """`--summary FILE.md|.html`: the format follows the suffix; `dry_run` when nothing was written."""
    if path.suffix.lower() in (".html", ".htm"):
        text = render_html(outcomes, title=title, dry_run=dry_run)
    else:
        text = render_markdown(outcomes, title=title, dry_run=dry_run)
    path.write_text(encodable(text), encoding="utf-8")


def summary_path_ok(path: Optional[Path]) -> bool:
    return path is None or path.suffix.lower() in (".md", ".markdown", ".html", ".htm")

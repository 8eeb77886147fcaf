"""Human-readable output on the terminal (stderr), so stdout stays clean for code and diffs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from npu_port.transpiler.core.report import FileOutcome
from npu_port.transpiler.output.console import Console, escape

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
# Characters: a hint longer than this is printed in full once per rule in text output (JSON keeps all).
LONG_HINT = 100


def stderr_console(quiet: bool = False) -> Console:
    return Console(stderr=True, quiet=quiet, highlight=False, soft_wrap=True)


def unified_diff(path: str, before: bytes, after: bytes) -> str:
    import difflib  # only --diff needs it

    a = before.decode("utf-8", errors="replace").splitlines(keepends=True)
    b = after.decode("utf-8", errors="replace").splitlines(keepends=True)
    name = path.lstrip("/")
    lines = difflib.unified_diff(a, b, fromfile=f"a/{name}", tofile=f"b/{name}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def print_findings(console: Console, outcomes: Iterable[FileOutcome], show_changes: bool = False,
                   quiet: bool = False) -> None:
    """Each file that failed, and its findings (and changes with `show_changes`); `quiet` keeps only the
    failures: -q hides what went well, never what went wrong."""
    shown_hints: set[tuple[str, str]] = set()  # a long hint is printed in full once per rule
    for o in outcomes:
        if o.status == "failed":
            console.print(f"[bold red]error[/]: {escape(o.path)}: {escape(o.error)}")
        if quiet:
            continue
        for f in sorted(o.findings):
            if f.kind == "change" and not show_changes:
                continue
            style = _STYLE.get(f.severity, "")
            label = "change" if f.kind == "change" else f.severity
            if f.hint and len(f.hint) > LONG_HINT and (f.rule, f.hint) in shown_hints:
                tail = f" [dim](hint: as for the first {f.rule} finding above)[/]"
            else:
                shown_hints.add((f.rule, f.hint))
                tail = f" [dim](hint: {escape(f.hint)})[/]" if f.hint else ""
            console.print(f"{escape(f.file)}:{f.line}:{f.col}: [{style}]{label}[/] "
                          f"[bold]{f.rule}[/] {escape(f.message)}{tail}")


def print_summary(console: Console, outcomes: list[FileOutcome], seconds: float, dry_run: bool = False) -> None:
    """The counts of a run; `dry_run` (--check, --diff: nothing written) says what would be converted."""
    status = Counter(o.status for o in outcomes)
    per_rule = Counter(f.rule for o in outcomes for f in o.findings if f.kind == "change")
    human = sum(1 for o in outcomes for f in o.findings if f.kind == "finding" and f.severity != "info")
    converted, copied = ("would convert", "would copy") if dry_run else ("converted", "copied")
    console.print(
        f"[bold]{len(outcomes)}[/] files: {status['converted']} {converted}, {status['unchanged']} unchanged, "
        f"{status['skipped']} skipped by prefilter, {status['copied']} {copied}, "
        f"[{'bold red' if status['failed'] else 'green'}]{status['failed']} failed[/]; "
        f"{sum(per_rule.values())} changes{' to make' if dry_run else ''}, {human} findings need a human; "
        f"{seconds:.2f}s"
    )
    if per_rule:
        console.print("changes per rule: " + ", ".join(f"{r} {n}" for r, n in sorted(per_rule.items())))

"""`npu-port standalone`: inline what a script uses from project packages, so it runs on its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import click

from npu_port.transpiler.commands._options import rule_options, split_csv
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.exit_codes import ExitCode
from npu_port.transpiler.core.files import SKIP_DIRS, atomic_write, printable, walk
from npu_port.transpiler.core.registry import UnknownRuleError, select_rules
from npu_port.transpiler.core.report import FileOutcome
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.output.output_files import why_unwritable
from npu_port.transpiler.output.render import print_findings, stderr_console
from npu_port.transpiler.standalone import StandaloneError, make_standalone
from npu_port.transpiler.standalone.resolver import split_packages


@click.command()
@click.argument("source", type=click.Path(path_type=Path, exists=True))
@click.option("--strip", "strip", multiple=True, required=True, metavar="PKG,...",
              help="Packages to inline and remove (comma-separated or repeated).")
@click.option("--path", "search_paths", multiple=True, metavar="SRC_DIR",
              type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="Another folder that holds the stripped packages (searched after the script's folder, "
                   "before the working directory).")
@click.option("-o", "--output", "out", type=click.Path(), metavar="FILE",
              help="The file to write (default: stdout); a folder (existing, or named with a trailing /) "
                   "to write the script into; for a folder SOURCE, the folder to mirror into.")
# The spelling before -o/--output; kept so existing scripts and CI jobs still work.
@click.option("--out", "out_alias", type=click.Path(), hidden=True)
@click.option("--allow-unresolved", is_flag=True,
              help="Write the script even when something cannot be resolved: report it and raise at that spot.")
@click.option("--convert", "run_convert", is_flag=True,
              help="Also run the convert rules (see --target, --select...) on the result.")
@rule_options
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
def standalone(source, strip, search_paths, out, out_alias, allow_unresolved, run_convert, target, select,
               ignore, extras, quiet):
    """Inline into SOURCE every definition it uses from the --strip packages.

    The result imports only public packages and behaves as the original: import-time effects run in the
    same order, a module the original imports inside a function runs on first use, and each module keeps
    its own globals. SOURCE may be a folder: every script in it is made standalone into -o DIR. Nothing is
    written for a script that has an unresolved construct.
    """
    if out is not None and out_alias is not None and out != out_alias:
        raise click.UsageError("give -o/--output once (--out is its old name)")
    raw = out if out is not None else out_alias
    out = Path(raw) if raw is not None else None  # Path() drops a trailing slash: `raw` keeps what was meant
    packages = split_packages(split_csv(strip))
    engine = None
    if run_convert:
        settings = Settings(target=target, select=split_csv(select), ignore=split_csv(ignore), extras=extras)
        try:
            select_rules(settings.select, settings.ignore, settings.extras)
        except UnknownRuleError as exc:
            raise click.UsageError(str(exc)) from None
        engine = Engine(settings)
    console = stderr_console(quiet)
    errors = stderr_console(False)
    if source.is_dir():
        if out is None:
            raise click.UsageError("a folder SOURCE needs -o/--output OUT_DIR")
        jobs = [(path, out / path.relative_to(source)) for path in _scripts_in(source, packages)]
    else:
        as_folder = out is not None and (out.is_dir() or raw.endswith(("/", os.sep)))
        dest = out / source.name if as_folder else out
        jobs = [(source, dest)]
    outcomes = [_one(path, dest, packages, list(search_paths), allow_unresolved, engine, console, errors,
                     source.is_dir()) for path, dest in jobs]
    failed = outcomes.count("failed")
    if source.is_dir():
        unchanged = outcomes.count("unchanged")
        tail = f" ({unchanged} with nothing to inline from {', '.join(packages)})" if unchanged else ""
        console.print(f"{len(jobs)} scripts: {len(jobs) - failed} written{tail}, {failed} failed")
    sys.exit(ExitCode.FAILED if failed else ExitCode.OK)


def _scripts_in(folder: Path, packages: tuple[str, ...]) -> list[Path]:
    """Python files under `folder`, leaving out the stripped packages' own sources."""
    out = []
    for path in walk(folder):
        rel = path.relative_to(folder)
        if path.suffix != ".py" or any(p in packages or p in SKIP_DIRS for p in rel.parts[:-1]):
            continue
        out.append(path)
    return out


def _one(path: Path, dest: Optional[Path], packages, search_paths, allow_unresolved, engine, console,
         errors, folder: bool) -> str:
    """Make one script standalone: "inlined", "unchanged" (nothing to inline) or "failed"."""
    shown = printable(str(path))  # control characters of a name escaped: they never reach the terminal
    try:
        result = make_standalone(path, packages, search_paths, allow_unresolved)
    except StandaloneError as exc:
        for problem in exc.problems:
            errors.print(problem.render(), markup=False, highlight=False)
        errors.print(f"{shown}: nothing written", markup=False)
        return "failed"
    except (OSError, UnicodeDecodeError) as exc:
        errors.print(f"error: {shown}: cannot read: {exc}", markup=False)
        return "failed"
    except (RecursionError, ValueError) as exc:  # a pathological file must not end a folder run
        errors.print(f"error: {shown}: cannot process: {type(exc).__name__}: {exc}", markup=False)
        return "failed"
    data = result.code.encode("utf-8")
    outcome = FileOutcome(str(path), "converted" if result.changed else "unchanged",
                          [p.to_finding() for p in result.findings])
    if engine is not None:
        converted = engine.convert(data, str(path), "python")
        if converted.outcome.status == "failed":
            errors.print(f"error: {shown}: convert failed: {converted.outcome.error}", markup=False)
            return "failed"
        outcome.findings.extend(converted.outcome.findings)
        data = converted.output if converted.output is not None else data
        console.print(f"{shown}: convert made {len(converted.outcome.changes)} changes", markup=False)
    print_findings(console, [outcome])
    if dest is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        try:
            atomic_write(dest, data, path.stat().st_mode & 0o7777)
        except OSError as exc:
            errors.print(f"error: {shown}: cannot write {printable(str(dest))}: {why_unwritable(dest, exc)}", markup=False)
            return "failed"
    if result.modules:
        count = len(result.modules)
        console.print(f"{shown}: inlined {count} module{'s' if count > 1 else ''} ({', '.join(result.modules)})"
                      + (f" -> {printable(str(dest))}" if dest else ""), markup=False)
        return "inlined"
    if not folder:
        # Usually a misspelt --strip or the wrong script: say so rather than write a copy without a word.
        pkgs = ", ".join(packages)
        what = f"imports nothing from {pkgs}: nothing inlined, copied unchanged" if not result.changed \
            else f"uses nothing from {pkgs}: nothing inlined, its imports removed"
        console.print(f"{shown}: {what}" + (f" -> {printable(str(dest))}" if dest else ""), markup=False)
    return "unchanged"

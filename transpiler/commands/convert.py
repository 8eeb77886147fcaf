"""`npu-port convert`: rewrite CUDA code for the target, as stdout, a diff, a mirrored tree or in place."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Optional

import click

from transpiler.engine import Converted, Engine
from transpiler.files import atomic_write
from transpiler.commands._options import rule_options, runtime_env_option
from transpiler.commands.config import config_file_options, resolve_config, rules_file_option
from transpiler.config import discover_files, run_configured
from transpiler.formats import summary_path_ok, write_summary
from transpiler.render import print_findings, print_summary, stderr_console, unified_diff
from transpiler.report import FileOutcome, findings_to_json
from transpiler.runner import SourceFile
from transpiler.settings import Settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WOULD_CHANGE = 0, 1, 2, 3


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, allow_dash=True))
@rule_options
@runtime_env_option
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--out", "out", type=click.Path(path_type=Path),
              help="Write the converted file there, or mirror a directory tree into it.")
@click.option("--in-place", is_flag=True, help="Overwrite the inputs (atomic replace).")
@click.option("--check", is_flag=True, help=f"Write nothing; exit {EXIT_WOULD_CHANGE} if anything would change.")
@click.option("--report", "report_path", type=click.Path(path_type=Path),
              help="Write every change and finding as JSON.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0,
              help="Worker processes (0: one per CPU).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.option("--show-changes", is_flag=True, help="List every change on stderr, not only findings.")
@click.option("--summary", "summary_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a pull-request summary (FILE.md or FILE.html).")
@rules_file_option
@config_file_options
@click.pass_context
def convert(ctx, paths, target, select, ignore, extras, show_diff, out, in_place, check, report_path, jobs,
            quiet, show_changes, summary_path, rules_files, runtime_env, config_file, isolated):
    """Rewrite CUDA code in PATHS for the target accelerator.

    One file and no output option: the converted source goes to stdout and the summary to stderr.
    Use '-' to read Python from stdin.
    """
    if any(p is not None and str(p) == "-" for p in (out, report_path, summary_path)):
        raise click.UsageError("--out, --report and --summary take file names ('-' is not stdout here)")
    if sum(bool(x) for x in (show_diff, out, in_place, check)) > 1:
        raise click.UsageError("choose one of --diff, --out, --in-place, --check")
    if not summary_path_ok(summary_path):
        raise click.UsageError("--summary takes a .md or .html file")
    config = resolve_config(ctx, paths, config_file, isolated)
    settings = config.settings(jobs=jobs)
    console = stderr_console(quiet)
    started = time.perf_counter()

    if list(paths) == [Path("-")]:
        outcomes = [_convert_stdin(settings, show_diff)]
    else:
        missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
        if missing:
            raise click.UsageError(f"no such file or directory: {', '.join(missing)}")
        single = len(paths) == 1 and not paths[0].is_dir()
        writer = _Writer(paths, out, in_place, show_diff, to_stdout=single and not (out or in_place or check or show_diff))
        files = discover_files(paths, config)
        outcomes = run_configured(files, config, settings, writer)

    print_findings(console, outcomes, show_changes)
    print_summary(console, outcomes, time.perf_counter() - started)
    if report_path:
        report_path.write_text(findings_to_json(outcomes, target=settings.target, files=len(outcomes)),
                               encoding="utf-8")
    if summary_path:
        write_summary(summary_path, outcomes, title="npu-port convert")
    if any(o.status == "failed" for o in outcomes):
        sys.exit(EXIT_FAILED)
    if check and any(o.status == "converted" for o in outcomes):
        sys.exit(EXIT_WOULD_CHANGE)


def _convert_stdin(settings: Settings, show_diff: bool) -> FileOutcome:
    data = sys.stdin.buffer.read()
    result = Engine(settings).convert(data, "<stdin>", "python")
    if show_diff:
        if result.output is not None:
            sys.stdout.write(unified_diff("<stdin>", data, result.output))
    else:
        sys.stdout.buffer.write(result.output if result.output is not None else data)
    return result.outcome


class _Writer:
    """Puts each result where the options say; the inputs are only touched with --in-place."""

    def __init__(self, roots, out: Optional[Path], in_place: bool, show_diff: bool, to_stdout: bool):
        self.roots = list(roots)
        self.out = out
        self.in_place = in_place
        self.show_diff = show_diff
        self.to_stdout = to_stdout

    def destination(self, src: SourceFile) -> Path:
        assert self.out is not None
        if len(self.roots) == 1 and not self.roots[0].is_dir():
            return self.out / src.rel if self.out.is_dir() else self.out
        if len(self.roots) == 1:
            return self.out / src.rel
        root = next(r for r in self.roots if src.path == r or r in src.path.parents)
        return self.out / root.name / src.rel if root.is_dir() else self.out / src.rel

    def __call__(self, src: SourceFile, result: Converted, original: Optional[bytes]) -> None:
        if self.to_stdout:
            data = result.output if result.output is not None else original
            if data is not None and result.outcome.status != "failed":
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
        elif self.show_diff:
            if result.output is not None and original is not None:
                sys.stdout.write(unified_diff(src.display, original, result.output))
        elif self.in_place:
            if result.output is not None:
                atomic_write(src.path, result.output)
        elif self.out is not None:
            self._mirror(src, result, original)

    def _mirror(self, src: SourceFile, result: Converted, original: Optional[bytes]) -> None:
        dest = self.destination(src)
        if src.path.is_symlink():
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.exists() or dest.is_symlink():
                dest.unlink()
            dest.symlink_to(src.path.readlink())
            return
        mode = src.path.stat().st_mode & 0o7777
        if result.output is not None:
            atomic_write(dest, result.output, mode)
        elif original is not None:
            atomic_write(dest, original, mode)
        elif src.path.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src.path, dest)

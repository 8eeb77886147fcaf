"""`npu-port check`: report CUDA left over, unsupported constructs, invented NPU names and policy
violations, with exit codes for CI (0 clean, 1 errors, 2 usage or internal error)."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import click

from npu_port.transpiler.check import run_check
from npu_port.transpiler.check.verl_version import resolve as resolve_verl_version
from npu_port.transpiler.commands._options import rule_options
from npu_port.transpiler.commands.config import config_file_options, policy_options, resolve_config
from npu_port.transpiler.core.config import Source
from npu_port.transpiler.core.exit_codes import ExitCode
from npu_port.transpiler.output.console import Console
from npu_port.transpiler.output.formats import (
    OUTPUT_FORMATS,
    check_exit_code,
    render_github,
    render_json,
    render_sarif,
    render_statistics,
    render_text,
    summary_path_ok,
    write_summary,
)
from npu_port.transpiler.output.output_files import input_clash, why_unwritable, write_by_rename


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@rule_options
@policy_options
@config_file_options
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default="text", show_default=True,
              help="text for people; json and sarif for tools; github for workflow annotations.")
@click.option("--statistics", is_flag=True, help="Counts per rule.")
@click.option("--summary", "summary_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write a pull-request summary (FILE.md or FILE.html); refused over an input, a link "
                   "there is replaced, not followed.")
@click.option("-o", "--output", "output_file", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Write the report there instead of stdout. Refused when it is (or links to) an input or a "
                   "source file under one; written by rename, so a link there is replaced, not followed.")
@click.option("--output-file", "output_file_alias", type=click.Path(path_type=Path, dir_okay=False), hidden=True)
@click.option("--exit-zero", is_flag=True,
              help="Exit 0 even when errors are found (2 on a usage or internal error still).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Worker processes (0: one per CPU).")
@click.option("--no-cache", is_flag=True,
              help="Neither read nor write the result cache (a folder's results are cached as convert's are).")
@click.option("--verl-version", metavar="X.Y.Z",
              help="Check VERL config keys against this release (default: `verl_version` in [tool.npu-port], "
                   "else the project's verl pin or VERL checkout, else the newest release known).")
@click.pass_context
def check(ctx, paths, target, select, ignore, extras, forbid, no_relative, exclude, rules_files, strict,
          config_file, isolated, output_format, statistics, summary_path, output_file, output_file_alias, exit_zero,
          jobs, no_cache, verl_version):
    """Report what is not yet ported in PATHS, and what a port got wrong.

    \b
    errors:   anything `convert` would still change (CUDA left over), torch.npu / torch_npu names
              the real torch_npu lacks, VERL config keys VERL does not have, framework arguments
              that do not exist (LLM(device=...), npu_memory_utilization), and with --forbid /
              --no-relative, forbidden and relative imports;
    warnings: constructs convert cannot port (custom CUDA kernels, triton, flash_attn, apex, ...).

    Exit 0 without errors, 1 with errors (or warnings with --strict; 0 with --exit-zero), 2 on a
    usage or internal error.
    """
    if output_file_alias is not None:  # the old spelling, kept working
        if output_file is not None:
            raise click.UsageError("give -o/--output once (--output-file is its old name)")
        output_file = output_file_alias
    missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
    if missing:
        raise click.UsageError(f"no such file or directory: {', '.join(missing)}")
    if not summary_path_ok(summary_path):
        raise click.UsageError("--summary takes a .md or .html file")
    for option, dest in (("--summary", summary_path), ("--output", output_file)):
        what = input_clash(dest, paths) if dest is not None else None
        if what is not None:
            raise click.UsageError(f"{option} {dest} would overwrite {what}")
    config = resolve_config(ctx, paths, config_file, isolated)
    strict = config["strict"]
    if verl_version is not None:
        if not re.match(r"^\d+\.\d+", verl_version):
            raise click.UsageError(f"--verl-version takes a release such as 0.8.0, got {verl_version!r}")
        config.values["verl-version"], config.sources["verl-version"] = verl_version, Source("command line")
    verl = resolve_verl_version(paths, config["verl-version"], str(config.sources["verl-version"]))
    try:
        report = run_check(list(paths), config, jobs=jobs, extra_options=(("verl_version", (verl.run_option,)),
                                                                           *((("verl_unpinned", ("1",)),)
                                                                             if not verl.pinned else ())),
                           cache=not no_cache)
    except Exception as exc:  # our bug, not the user's: say so and exit 2
        click.echo(f"npu-port: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(ExitCode.INTERNAL)

    if output_format == "text":
        if output_file:
            buffer = io.StringIO()
            render_text(Console(file=buffer, highlight=False, soft_wrap=True), report, statistics=statistics,
                        strict=strict)
            _write_file("--output", output_file, lambda p: p.write_text(buffer.getvalue(), encoding="utf-8"))
        else:
            render_text(Console(highlight=False, soft_wrap=True), report, statistics=statistics, strict=strict)
    else:
        if output_format == "json":
            text = render_json(report, command="check", target=config["target"], strict=strict,
                               statistics=statistics, exit_zero=exit_zero)
        elif output_format == "sarif":
            text = render_sarif(report)
        else:
            text = render_github(report)
        if output_file:
            _write_file("--output", output_file, lambda p: p.write_text(text, encoding="utf-8"))
        else:
            click.echo(text, nl=False)
        if statistics and output_format != "json":
            render_statistics(Console(stderr=True, highlight=False), report.findings)
    for o in report.internal_errors:
        click.echo(f"npu-port: {o.path}: {o.error}", err=True)
    if output_format == "text" and any(f.rule.startswith("unknown-verl-key") for f in report.findings):
        click.echo(f"npu-port: VERL keys checked against VERL {verl.version}, from {verl.where}", err=True)
    if summary_path:
        _write_file("--summary", summary_path,
                    lambda p: write_summary(p, report.outcomes, title="npu-port check", dry_run=True))
    sys.exit(check_exit_code(report, strict=strict, exit_zero=exit_zero))


def _write_file(option: str, dest: Path, write) -> None:
    try:
        write_by_rename(dest, write)
    except OSError as exc:
        click.echo(f"npu-port: cannot write {option} {dest}: {why_unwritable(dest, exc)}", err=True)
        sys.exit(ExitCode.USAGE)

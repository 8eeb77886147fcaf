"""The `convert` options that decide how a run over many files goes (not what it converts)."""

from __future__ import annotations

from pathlib import Path

import click

from npu_port.transpiler.bulk.executors import DEFAULT_TIMEOUT
from npu_port.transpiler.core.files import DEFAULT_MAX_BYTES


def bulk_options(fn):
    for deco in reversed([
        click.option("-j", "--jobs", type=click.IntRange(min=0), default=0,
                     help="Worker processes (0: one per CPU)."),
        click.option("-q", "--quiet", is_flag=True, help="No progress, findings or summary; files that fail are still named on stderr."),
        click.option("--force", is_flag=True,
                     help="Write into a non-empty --out folder, or --in-place files git holds no copy of "
                          "(untracked, ignored, changed and not staged, outside git)."),
        click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                     help="Convert in local worker processes, or as Ray tasks (pip install 'npu-port[ray]')."),
        click.option("--ray-address", metavar="ADDRESS",
                     help="Ray cluster to join (e.g. ray://head:10001 or auto); default: a local Ray."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache."),
        click.option("--cache-dir", type=click.Path(path_type=Path),
                     help="Where the result cache lives (default: the user's cache folder, ~/.cache/npu-port); "
                          "a new or empty folder, or one npu-port made."),
        click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT,
                     show_default=True, metavar="SECONDS",
                     help="Give up on a file that takes more CPU time than this (it is reported as failed)."),
        click.option("--max-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_BYTES, show_default=True,
                     help="Report larger source files as failed instead of converting them."),
    ]):
        fn = deco(fn)
    return fn

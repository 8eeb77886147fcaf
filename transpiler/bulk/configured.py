"""A run as the project's configuration shapes it: its excluded files left out, its per-file ignores
applied (core/config.py holds the configuration; this module applies it to the bulk runner)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Optional

from npu_port.transpiler.bulk.runner import RunConfig, RunResult, SourceFile, discover, run
from npu_port.transpiler.core.config import ProjectConfig
from npu_port.transpiler.core.files import empty_folders, is_within, printable
from npu_port.transpiler.core.settings import Settings


def discover_files(paths: Iterable[Path], config: ProjectConfig, exclude: Iterable[Path] = ()) -> list[SourceFile]:
    """The files under `paths` minus the excluded ones (also when named explicitly, as pre-commit does)
    and minus `exclude` (an output folder inside an input)."""
    return [f for f in discover(paths, exclude) if not config.is_excluded(f.path)]


def run_configured(files: list[SourceFile], config: ProjectConfig, settings: Settings,
                   on_result: Callable, run_config: Optional[RunConfig] = None) -> RunResult:
    """Run `files`, each with its per-file ignores, in one run; outcomes come back in input order.

    Files that share an effective rule set share an engine, so per-file ignores cost one engine per
    distinct set, not one per file. Without a `run_config`, one job converts in this process and
    more use worker processes.
    """
    if run_config is None:
        run_config = RunConfig(executor="inline" if settings.jobs == 1 else "local")

    def settings_for(src: SourceFile) -> Settings:
        extra = config.ignored_rules_for(src.path)
        return replace(settings, ignore=settings.ignore + extra) if extra else settings

    return run(files, settings, on_result, config=run_config, settings_for=settings_for)


def mirror_empty_folders(paths: Iterable[Path], config: ProjectConfig, destination: Callable[[SourceFile], Path],
                         out: Path, exclude: Iterable[Path] = ()) -> None:
    """Create in `out` each folder of the inputs that holds nothing (`destination` says where a
    SourceFile lands): a mirrored tree keeps placeholders such as VERL's empty `recipe/`. Excluded
    folders stay out, and nothing is created through a link that leads outside `out`."""
    exclude = list(exclude)
    for root in paths:
        for folder in empty_folders(root, exclude):
            if config.is_excluded(folder):
                continue
            dest = destination(SourceFile(folder, folder.relative_to(root), printable(str(folder))))
            there = dest
            while not os.path.lexists(there) and there != out and there.parent != there:
                there = there.parent
            if is_within(there, out):
                try:
                    dest.mkdir(parents=True, exist_ok=True)
                except OSError:
                    pass  # a file of that name is already there (--force into an earlier output): left as it is

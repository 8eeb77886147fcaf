"""`npu-port convert`: rewrite CUDA code for the target, as stdout, a diff, a mirrored tree or in place."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import signal
import stat
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Optional, cast

import click

from npu_port.transpiler.analysis.project_pins import lowest_pin
from npu_port.transpiler.bulk.cache import Cache, CacheRefused
from npu_port.transpiler.bulk.configured import discover_files, mirror_empty_folders, run_configured
from npu_port.transpiler.bulk.runner import RunConfig, SourceFile
from npu_port.transpiler.bulk.worker import Task, convert_task
from npu_port.transpiler.commands._bulk_options import bulk_options
from npu_port.transpiler.commands._options import keep_cuda_options, rule_options, runtime_env_option
from npu_port.transpiler.commands.config import (
    config_file_options,
    exclude_option,
    resolve_config,
    rules_file_option,
)
from npu_port.transpiler.core.config import ProjectConfig
from npu_port.transpiler.core.engine import Converted
from npu_port.transpiler.core.exit_codes import ExitCode
from npu_port.transpiler.core.files import (
    ReadError,
    atomic_copy,
    atomic_write,
    copy_link,
    holds,
    is_copy_of,
    is_within,
    language_of,
    printable,
    read_source,
)
from npu_port.transpiler.core.report import FileOutcome, Language, findings_to_json
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.output.console import escape
from npu_port.transpiler.output.output_files import input_clash, same_file, why_unwritable, write_by_rename
from npu_port.transpiler.output.progress import reporter_for
from npu_port.transpiler.output.render import print_findings, print_summary, stderr_console, unified_diff

if TYPE_CHECKING:
    from npu_port.transpiler.bulk.git_copy import GitCopies

# What only some options need is imported where they are read (output formats for --report and
# --summary, git's index for --in-place, torch pins for --keep-cuda): a one-file run need not load it.


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, allow_dash=True))
@rule_options
@keep_cuda_options
@runtime_env_option
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--out", "out_arg", type=click.Path(), metavar="PATH",
              help="Write the converted file there, or mirror the inputs into this folder, created if missing "
                   "(a trailing '/', a folder input or several inputs name a folder); never over an input.")
@click.option("--in-place", is_flag=True,
              help="Overwrite the inputs (atomic replace); only files whose current bytes git's index or HEAD "
                   "holds, unless --force.")
@click.option("--check", is_flag=True,
              help=f"Write nothing; exit {int(ExitCode.WOULD_CHANGE)} if anything would change.")
@exclude_option
@click.option("--stdin-filename", metavar="NAME",
              help="With '-': the file name stdin stands for. Its suffix picks the language (default Python), "
                   "and the configuration's per-file-ignores and exclude apply to it (an excluded name passes "
                   "stdin through unchanged).")
@click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write every change and finding as JSON. Refused when it is (or links to) an input or a "
                   "source file under one; written by rename, so a link there is replaced, not followed.")
@bulk_options
@click.option("--show-changes", is_flag=True, help="List every change on stderr, not only findings.")
@click.option("--summary", "summary_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a pull-request summary (FILE.md or FILE.html); refused over an input, a link "
                   "there is replaced, as for --report.")
@rules_file_option
@config_file_options
@click.pass_context
def convert(ctx, paths, target, select, ignore, extras, keep_cuda, torch_version, show_diff, out_arg, in_place, check, exclude,
            stdin_filename, report_path, jobs, quiet, force, executor, ray_address, no_cache, cache_dir, timeout,
            max_bytes, show_changes, summary_path, rules_files, runtime_env, config_file, isolated):
    """Rewrite CUDA code in PATHS for the target accelerator.

    One file and no output option: the converted source goes to stdout and the summary to stderr.
    Use '-' to read stdin (Python unless --stdin-filename names another kind of file). A file that
    cannot be converted is named on stderr with the reason and the run goes on (exit status 1); on
    stdout, its input is written unchanged. Directories are converted in parallel (--jobs), with
    results cached in the user's cache folder (--no-cache, --cache-dir).
    """
    if any(p is not None and str(p) == "-" for p in (out_arg, report_path, summary_path)):
        raise click.UsageError("--out, --report and --summary take file names ('-' is not stdout here)")
    if sum(bool(x) for x in (show_diff, out_arg, in_place, check)) > 1:
        raise click.UsageError("choose one of --diff, --out, --in-place, --check")
    if summary_path is not None and not _summary_path_ok(summary_path):
        raise click.UsageError("--summary takes a .md or .html file")
    from_stdin = list(paths) == [Path("-")]
    if stdin_filename is not None and not from_stdin:
        raise click.UsageError("--stdin-filename goes with '-' (reading stdin) as the only path")
    if from_stdin and (out_arg or in_place):
        raise click.UsageError("stdin is converted to stdout: --out and --in-place need file paths")
    if ray_address:
        executor = "ray"
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        raise click.UsageError("--executor ray needs Ray: pip install 'npu-port[ray]'")
    config_paths = [Path(stdin_filename)] if stdin_filename else paths  # settings as for that file
    config = resolve_config(ctx, config_paths, config_file, isolated)
    settings = dataclasses.replace(config.settings(jobs=jobs), max_bytes=max_bytes)
    console = stderr_console()
    settings, torch_note = _project_settings(settings, config, config_paths, console, quiet)
    started = time.perf_counter()
    interrupted = False
    dry_run = check or show_diff
    fixes = report_path is not None  # the report gives each change its replacement text

    if from_stdin:
        outcomes = _convert_stdin(config, settings, show_diff, check, stdin_filename, fixes, console, quiet)
    else:
        missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
        if missing:
            raise click.UsageError(f"no such file or directory: {', '.join(missing)}")
        single = len(paths) == 1 and not paths[0].is_dir()
        out = Path(out_arg) if out_arg else None
        # A name ending in '/', a folder input or several inputs can only mean a folder (created below);
        # one file into anything else is written as that file, like a compiler's -o.
        to_folder = out is not None and (not single or out_arg.endswith(("/", os.sep)) or out.is_dir())
        if out is not None:
            check_output_folder(paths, out, force, to_folder)
        check_report_paths(paths, out if out is not None and not to_folder else None, report=report_path,
                           summary=summary_path)
        if out is not None and to_folder:
            _make_folder(out)
        to_stdout = single and not (out or in_place or check or show_diff)
        writer = _Writer(paths, out, in_place, show_diff, to_stdout=to_stdout, to_folder=to_folder, fixes=fixes,
                         git_copies=_git_copies() if in_place and not force else None)
        files = discover_files(paths, config, exclude=[out] if out is not None else [])
        if single and not files:
            _excluded(console, quiet, printable(str(paths[0])), echo=paths[0] if to_stdout else None)
        cache = None
        if not no_cache and not single:
            try:
                cache = Cache.open(cache_dir, paths)
            except CacheRefused as exc:
                raise click.UsageError(f"--cache-dir {printable(str(cache_dir))}: {exc}") from None
        run_config = RunConfig(executor=executor, timeout=timeout, cache=cache, ray_address=ray_address,
                               reporter=reporter_for(console, quiet, enabled=not single),
                               ordered=writer.to_stdout or show_diff)
        with _sigterm_as_interrupt():
            try:
                result = run_configured(files, config, settings, writer, run_config)
            except RuntimeError as exc:  # an executor that cannot start (no Ray cluster there)
                raise click.ClickException(str(exc)) from None
        outcomes, interrupted = result.outcomes, result.interrupted
        if out is not None and to_folder and not interrupted:
            mirror_empty_folders(paths, config, writer.destination, out, exclude=[out])

    print_findings(console, outcomes, show_changes, quiet=quiet)
    if not quiet:
        print_summary(console, outcomes, time.perf_counter() - started, dry_run=dry_run)
    if interrupted:
        code = ExitCode.INTERRUPTED
    elif any(o.status == "failed" for o in outcomes):
        code = ExitCode.FAILED
    elif check and any(o.status == "converted" for o in outcomes):
        code = ExitCode.WOULD_CHANGE
    else:
        code = ExitCode.OK
    if report_path:
        from npu_port.transpiler.output.formats import convert_summary

        summary = convert_summary(outcomes, target=settings.target, dry_run=dry_run, exit_code=int(code))
        if torch_note:  # --keep-cuda: the torch the output was written for, and why (the run's first line)
            summary["keep_cuda_torch"] = {"torch": settings.torch_version, "why": torch_note}
        text = findings_to_json(outcomes, **summary)
        _write_file("--report", report_path, lambda p: p.write_text(text, encoding="utf-8"))
    if summary_path:
        from npu_port.transpiler.output.formats import write_summary

        _write_file("--summary", summary_path,
                    lambda p: write_summary(p, outcomes, title="npu-port convert", dry_run=dry_run))
    if interrupted:
        console.print("[bold red]interrupted[/]: the files listed above were written completely; "
                      "the rest were not written", highlight=False)
    if code != ExitCode.OK:
        sys.exit(code)


def _summary_path_ok(path: Path) -> bool:
    from npu_port.transpiler.output.formats import summary_path_ok

    return summary_path_ok(path)


def _git_copies() -> GitCopies:
    from npu_port.transpiler.bulk.git_copy import GitCopies

    return GitCopies()


def _make_folder(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.UsageError(f"--out {out}: cannot create the folder: {why_unwritable(out, exc)}") from None


def _excluded(console, quiet: bool, name: str, echo: Optional[Path] = None) -> None:
    """An input named on the command line that the exclude globs leave out: said, and with `echo` (the
    output is stdout) passed through unchanged, so `convert x.py > y.py` never leaves y.py empty."""
    if not quiet:
        console.print(f"{escape(name)}: excluded (it matches an exclude glob: --exclude, or exclude in the "
                      "configuration); left as it is")
    if echo is not None:
        _pass_through(echo)


def _project_settings(settings: Settings, config: ProjectConfig, paths, console,
                      quiet: bool) -> tuple[Settings, str]:
    """What the project's own pins say the output must run on: the oldest VERL it accepts (`verl-version`,
    else its pin: NPU settings are added only where that release has the key, verl's device helpers
    written only where it has them), and with --keep-cuda the oldest torch (said on stderr, and returned
    as the sentence that says it for --report; "" without --keep-cuda)."""
    verl = config["verl-version"] or getattr(lowest_pin(paths, ("verl",)), "version", None)
    if verl:
        settings = dataclasses.replace(settings, options_extra=(*settings.options_extra, ("verl_version", (verl,))))
    if not settings.keep_cuda:
        return settings, ""
    from npu_port.transpiler.tables.device_agnostic import torch_for_output

    version, why = torch_for_output(settings.target, settings.torch_version, paths)
    if not quiet:
        console.print(escape(why), highlight=False)
    return dataclasses.replace(settings, torch_version=version), why


def check_output_folder(paths, out: Path, force: bool, to_folder: bool) -> None:
    """--out must not be an input, and a non-empty folder is only written into with --force."""
    for p in paths:
        if p.is_dir() and out.exists() and same_file(out, p):
            raise click.UsageError(f"--out {out} is the input folder itself; use --in-place to overwrite inputs")
    for p in paths:  # where each input lands (see _Writer.destination) must not be the input itself
        if len(paths) == 1 and p.is_dir():
            continue  # lands in --out itself: checked above
        dest = out / p.name if to_folder else out
        if dest.exists() and same_file(dest, p):
            raise click.UsageError(f"--out {out} would overwrite the input {p}; use --in-place to convert "
                                   "inputs in place")
    if not to_folder:
        return  # one output file: replaced atomically, like any compiler's -o
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise click.UsageError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise click.UsageError(f"--out {out} is not empty; pass --force to write into it anyway")


def check_report_paths(paths, out_file: Optional[Path], **outputs: Optional[Path]) -> None:
    """--report and --summary must not overwrite an input (or the --out file)."""
    for option, dest in outputs.items():
        if dest is None:
            continue
        what = input_clash(dest, paths)
        if what is None and out_file is not None and same_file(dest, out_file):
            what = "the --out file"
        if what is not None:
            raise click.UsageError(f"--{option} {dest} would overwrite {what}")


def _write_file(option: str, dest: Path, write) -> None:
    try:
        write_by_rename(dest, write)
    except OSError as exc:
        raise click.ClickException(f"cannot write {option} {dest}: {why_unwritable(dest, exc)}") from None


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (a CI timeout, `kill`) stops the run as cleanly as Ctrl-C."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _convert_stdin(config: ProjectConfig, settings: Settings, show_diff: bool, check: bool,
                   stdin_filename: Optional[str], fixes: bool, console, quiet: bool) -> list[FileOutcome]:
    """stdin as the file `stdin_filename` (Python when none is named). What goes to stdout is the
    converted text, or the input unchanged when it cannot be converted or is excluded (as for a file)."""
    name = printable(stdin_filename) if stdin_filename else "<stdin>"
    # Bounded like a file (`yes | npu-port convert -` must not exhaust memory), and converted with the
    # parser guard of every parse in this process: a crash here would end the run without a word.
    data = sys.stdin.buffer.read(settings.max_bytes + 1)
    if stdin_filename and config.is_excluded(Path(stdin_filename)):
        _excluded(console, quiet, name)
        if not (show_diff or check):
            _echo_stdin(data)
        return []
    if len(data) > settings.max_bytes:
        if not (show_diff or check):
            _echo_stdin(data)
        return [FileOutcome(name, "failed", error=f"more than {settings.max_bytes} bytes (see --max-bytes)")]
    language: Language = language_of(stdin_filename, data[:128]) if stdin_filename else "python"
    if stdin_filename:
        extra = config.ignored_rules_for(Path(stdin_filename))
        settings = dataclasses.replace(settings, ignore=settings.ignore + extra) if extra else settings
    result = convert_task(Task(0, "-", name, language, data=data), settings)
    if fixes and result.output is not None:
        add_fixes(result.outcome, data, result.output)
    if show_diff:
        if result.output is not None:
            sys.stdout.write(unified_diff(name, data, result.output))
    elif not check:
        sys.stdout.buffer.write(result.output if result.output is not None else data)
    return [result.outcome]


def _echo_stdin(head: bytes) -> None:
    """stdin unchanged on stdout: what was read, then the rest as it comes (never all in memory)."""
    import shutil  # only to pass stdin through

    sys.stdout.buffer.write(head)
    shutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)
    sys.stdout.flush()


def _pass_through(path: Path) -> None:
    """A file's bytes unchanged on stdout, streamed (a file over --max-bytes too); nothing when it cannot
    be read (its error names why)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device would block or never end
            return
        import shutil  # only to pass a file through

        with open(path, "rb") as fh:
            shutil.copyfileobj(fh, sys.stdout.buffer)
    except OSError:
        return
    sys.stdout.flush()


def add_fixes(outcome: FileOutcome, before: bytes, after: bytes) -> None:
    """Give each change its replacement text (`fix`: `becomes: NEW LINE`, as `check` reports it)."""
    from npu_port.transpiler.check import fix_text, line_edits  # only for --report

    edits = line_edits(before.decode("utf-8", errors="replace"), after.decode("utf-8", errors="replace"))
    outcome.findings = [dataclasses.replace(f, fix=fix_text(f, edits.get(f.line))) if f.kind == "change" else f
                        for f in outcome.findings]


class _Writer:
    """Puts each result where the options say; the inputs are only touched with --in-place, and
    nothing is written outside --out. A write that fails makes that file's outcome failed."""

    def __init__(self, roots, out: Optional[Path], in_place: bool, show_diff: bool, to_stdout: bool,
                 to_folder: bool = True, fixes: bool = False, git_copies: Optional[GitCopies] = None):
        self.roots = list(roots)
        self.to_folder = to_folder  # --out is a folder (else the one output file)
        self.fixes = fixes  # fill each change's `fix` for the report
        self.git_copies = git_copies  # in place without --force: overwrite only what git holds a copy of
        self.out = out
        self.in_place = in_place
        self.show_diff = show_diff
        self.to_stdout = to_stdout
        self._safe_dirs: set[str] = set()

    def destination(self, src: SourceFile) -> Path:
        assert self.out is not None
        if len(self.roots) == 1 and not self.roots[0].is_dir():
            return self.out / src.rel if self.to_folder else self.out
        if len(self.roots) == 1:
            return self.out / src.rel
        root = next(r for r in self.roots if src.path == r or r in src.path.parents)
        return self.out / root.name / src.rel if root.is_dir() else self.out / src.rel

    def __call__(self, src: SourceFile, result: Converted, original: Optional[bytes]) -> None:
        if self.fixes and result.output is not None:
            before = original if original is not None else _original(src)
            if before is not None:
                add_fixes(result.outcome, before, result.output)
        try:
            self._write(src, result, original)
        except InPlaceRefused as exc:
            result.outcome.status = "failed"
            result.outcome.error = str(exc)
        except (OSError, WriteRefused) as exc:
            result.outcome.status = "failed"
            if isinstance(exc, OSError) and self.out is not None:
                detail = why_unwritable(self.destination(src), exc)
            else:
                detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            result.outcome.error = f"cannot write the output: {detail}"

    def _write(self, src: SourceFile, result: Converted, original: Optional[bytes]) -> None:
        if self.to_stdout:
            # What cannot be converted goes out unchanged (the error is on stderr, the exit status 1), as
            # for stdin: a pipeline never receives a truncated or empty file.
            if result.output is not None:
                sys.stdout.buffer.write(result.output)
                sys.stdout.flush()
            elif original is not None:
                sys.stdout.buffer.write(original)
                sys.stdout.flush()
            else:
                _pass_through(src.path)
        elif self.show_diff:
            if result.output is not None:
                before = original if original is not None else src.path.read_bytes()
                sys.stdout.write(unified_diff(src.display, before, result.output))
        elif self.in_place:
            if result.output is not None:
                self._check_git_holds(src)
                # `original` is what the file held when its result came back: an edit saved since
                # then is kept (the write is skipped with an error), never overwritten.
                atomic_write(src.path, result.output, durable=True, streams=False, expect=original)
        elif self.out is not None:
            self._mirror(src, result)

    def _check_git_holds(self, src: SourceFile) -> None:
        """In place, a file is replaced only when git can give its current bytes back."""
        if self.git_copies is None:
            return
        reason = self.git_copies.reason_unsafe(src.path)
        if reason is not None:
            raise InPlaceRefused(f"not written in place: git holds no copy of its current content ({reason}); "
                                 "commit or stage it first, or pass --force")

    def _mirror(self, src: SourceFile, result: Converted) -> None:
        dest = self.destination(src)
        self._guard(dest)
        streams = dest == self.out  # a single output named by the user may be /dev/null or a FIFO
        if src.path.is_symlink():
            copy_link(src.path, dest)  # the link itself, wherever it points
        elif result.output is not None:
            mode = src.path.stat().st_mode & 0o7777
            if not holds(dest, result.output, mode):
                atomic_write(dest, result.output, mode, durable=False, streams=streams)
        elif src.path.is_file():  # unchanged, skipped, non-source and failed files, byte for byte
            if not is_copy_of(src.path, dest):  # a re-run into the same --out copies only what changed
                atomic_copy(src.path, dest, streams=streams)

    def _guard(self, dest: Path) -> None:
        """A link already inside --out (say, left by an earlier run) must not lead a write outside it."""
        parent = str(dest.parent)
        if parent in self._safe_dirs:
            return
        out = cast(Path, self.out)  # a write has somewhere to go
        root = out if dest != out else out.parent  # --out names the output file itself
        if not is_within(dest.parent, root):
            raise WriteRefused(f"{dest.parent} leads outside {root} through a link")
        self._safe_dirs.add(parent)


class WriteRefused(Exception):
    pass


class InPlaceRefused(WriteRefused):
    """The message is the whole error (it is not a failed write)."""


def _original(src: SourceFile) -> Optional[bytes]:
    try:
        return read_source(src.path, max_bytes=1 << 62)
    except ReadError:
        return None

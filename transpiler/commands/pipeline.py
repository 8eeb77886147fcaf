"""`npu-port pipeline`: standalone -> weave -> convert (with the extras) -> check, in one command."""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import click

from npu_port.transpiler.check import run_check
from npu_port.transpiler.commands._options import runtime_env_option, split_csv
from npu_port.transpiler.commands.standalone import _scripts_in
from npu_port.transpiler.core.config import load_config
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.exit_codes import ExitCode
from npu_port.transpiler.core.files import atomic_write
from npu_port.transpiler.core.report import FileOutcome, findings_to_json
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.generate.weave import ADAPTERS, AgentOptions, WeaveError, weave
from npu_port.transpiler.output.output_files import why_unwritable, write_data
from npu_port.transpiler.output.render import print_findings, stderr_console
from npu_port.transpiler.standalone import StandaloneError, make_standalone
from npu_port.transpiler.standalone.resolver import split_packages
from npu_port.transpiler.tables.mapping import available_targets

_PROBLEMS_SHOWN = 5  # of a script that cannot be made standalone, on its one line


@click.command()
@click.argument("source", type=click.Path(path_type=Path, exists=True))
@click.option("--target", default="ascend", show_default=True, type=click.Choice(available_targets()))
@click.option("--strip", multiple=True, required=True, metavar="PKG,...",
              help="Project packages to inline and remove (as in `standalone`).")
@click.option("--path", "search_paths", multiple=True, metavar="SRC_DIR",
              type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="Another folder that holds the stripped packages.")
@click.option("--adapter", type=click.Choice(sorted(ADAPTERS)), default="vllm", show_default=True,
              help="Inference adapter to weave in.")
@click.option("--entry", metavar="NAME", help="The script's training entry function (default: found).")
@click.option("--agent-loop", is_flag=True, help="Weave the agent into VERL's rollouts (a script that calls "
              "run_ppo; as `weave --agent-loop`): the sample tools and reward go next to the output.")
@runtime_env_option
@click.option("-o", "--output", type=click.Path(path_type=Path), metavar="FILE",
              help="The output script (a script SOURCE).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), metavar="DIR",
              help="The folder to write into (a folder SOURCE; for a script SOURCE, its name inside DIR).")
@click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False),
              help="One JSON report for every stage.")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
def pipeline(source, target, strip, search_paths, adapter, entry, agent_loop, runtime_env, output, out_dir, report_path,
             quiet):
    """Build an NPU training-inference pipeline from a GPU script that uses project packages.

    \b
    1. standalone: inline what SOURCE uses from the --strip packages;
    2. weave:      add the inference adapter and a pipeline entry around the training entry;
    3. convert:    port the result to the target, with the extras (set_env, HCCL, Ray runtime_env);
    4. check:      no CUDA left, no forbidden or relative import, no invented framework names.

    Convert runs after weave so the woven inference code is ported too; running the pipeline again
    on its output changes nothing. Nothing is written for a script that fails a stage.
    """
    out = _destination(source, output, out_dir)
    if str(out) == "-" or (report_path is not None and str(report_path) == "-"):
        raise click.UsageError("-o, --out and --report take paths ('-' is not stdout here)")
    packages = split_packages(split_csv(strip))
    engine = Engine(Settings(target=target, extras=True, runtime_env_profile=runtime_env))
    console = stderr_console(quiet)
    started = time.perf_counter()
    if source.is_dir():
        jobs = [(p, out / p.relative_to(source)) for p in _scripts_in(source, packages)]
    else:
        jobs = [(source, out / source.name if out.is_dir() else out)]
    outcomes: list[FileOutcome] = []
    written: dict[Path, bytes] = {}
    samples_written: dict[Path, bytes] = {}  # the sample tools and reward of --agent-loop, checked too
    agent = AgentOptions() if agent_loop else None
    for path, dest in jobs:
        stage_outcomes, data, samples = _build(path, dest, packages, list(search_paths), adapter, entry, engine, agent)
        outcomes.extend(stage_outcomes)
        if data is not None:
            try:
                atomic_write(dest, data, path.stat().st_mode & 0o7777)
            except OSError as exc:
                outcomes.append(FileOutcome(str(path), "failed",
                                            error=f"cannot write {dest}: {why_unwritable(dest, exc)}"))
                continue
            written[dest] = data
            for name, text in samples.items():
                sample = dest.parent / name
                try:
                    _write_sample(sample, text, samples_written)
                except OSError as exc:
                    outcomes.append(FileOutcome(str(sample), "failed",
                                                error=f"cannot write {sample}: {why_unwritable(sample, exc)}"))
    if written:
        outcomes.extend(_check_written({**written, **samples_written}, target, packages))
    print_findings(console, outcomes, show_changes=False)
    changes = sum(len(o.changes) for o in outcomes)
    errors = sum(1 for o in outcomes for f in o.findings if f.severity == "error")
    console.print(f"{len(jobs)} script{'s' if len(jobs) != 1 else ''}: {len(written)} written, "
                  f"{len(jobs) - len(written)} failed; {changes} changes; check: {errors} errors; "
                  f"{time.perf_counter() - started:.2f}s")
    if report_path:
        write_data(report_path, findings_to_json(outcomes, command="pipeline", target=target, scripts=len(jobs),
                                                   written=len(written)).encode("utf-8"), what="--report")
    clean = len(written) == len(jobs) and not any(
        o.status == "failed" or any(f.severity == "error" for f in o.findings) for o in outcomes)
    sys.exit(ExitCode.OK if clean else ExitCode.FAILED)


def _destination(source: Path, output: Optional[Path], out_dir: Optional[Path]) -> Path:
    """-o/--output names the output file, --out the folder. Before, one `-o/--out` named either: `-o DIR` with
    a folder SOURCE is still read as the folder."""
    if output is not None and out_dir is not None:
        raise click.UsageError("give -o/--output FILE (a script) or --out DIR (a folder), not both")
    if output is None and out_dir is None:
        raise click.UsageError("give -o/--output FILE for a script SOURCE or --out DIR for a folder SOURCE")
    if out_dir is not None:
        if not source.is_dir():
            return out_dir / source.name
        return out_dir
    assert output is not None
    return output


def _check_written(written: dict[Path, bytes], target: str, packages) -> list[FileOutcome]:
    """Check what was written. An output that is a stream (`-o /dev/null`, a FIFO) cannot be read
    back: its bytes are checked from a private copy, under the output's name."""
    settings = {"target": target, "forbid": list(packages), "no-relative": True}
    files = [p for p in written if p.is_file()]
    streams = [p for p in written if not p.is_file()]
    outcomes = run_check(files, load_config(files, settings, isolated=True)).outcomes if files else []
    if streams:
        with tempfile.TemporaryDirectory(prefix="npu-port-check-") as tmp:
            copies = {}
            for i, dest in enumerate(streams):
                copy = Path(tmp) / str(i) / dest.name
                copy.parent.mkdir()
                copy.write_bytes(written[dest])
                copies[str(copy)] = str(dest)
            checked = run_check(list(map(Path, copies)), load_config([Path(tmp)], settings, isolated=True))
            for o in checked.outcomes:
                shown = copies.get(o.path, o.path)
                outcomes.append(dataclasses.replace(o, path=shown, findings=[
                    dataclasses.replace(f, file=shown) for f in o.findings]))
    return outcomes


def _write_sample(path: Path, text: str, written: dict[Path, bytes]) -> None:
    """A sample tools or reward file next to the output: written when missing (and checked with it); one
    already there is the user's and stays as it is."""
    if path.exists() or path in written:
        return
    data = text.encode("utf-8")
    atomic_write(path, data, 0o644)
    written[path] = data


def _build(path: Path, dest: Path, packages, search_paths, adapter: str, entry: Optional[str], engine: Engine,
           agent: Optional[AgentOptions] = None) -> tuple[list[FileOutcome], Optional[bytes], dict[str, str]]:
    """The stages before check for one script: their outcomes, the bytes to write (None: failed) and the
    sample files to write next to it."""
    try:
        result = make_standalone(path, packages, search_paths, allow_unresolved=False)
    except StandaloneError as exc:
        shown = [p.render() for p in exc.problems[:_PROBLEMS_SHOWN]]
        if len(exc.problems) > _PROBLEMS_SHOWN:
            shown.append(f"and {len(exc.problems) - _PROBLEMS_SHOWN} more (`npu-port standalone` lists them all)")
        return [FileOutcome(str(path), "failed", error="standalone: " + "; ".join(shown))], None, {}
    outcomes = [FileOutcome(str(path), "converted" if result.changed else "unchanged",
                            [p.to_finding() for p in result.findings], language="python")]
    try:
        woven = weave(result.code, adapter, entry=entry, agent=agent)
    except WeaveError as exc:
        outcomes.append(FileOutcome(str(path), "failed", error=f"weave: {exc}"))
        return outcomes, None, {}
    data = woven.source.encode("utf-8")
    converted = engine.convert(data, str(dest), "python")
    outcomes.append(converted.outcome)
    if converted.outcome.status == "failed":
        converted.outcome.error = f"convert: {converted.outcome.error}"
        return outcomes, None, {}
    return outcomes, converted.output if converted.output is not None else data, woven.companions

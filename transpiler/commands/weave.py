"""`npu-port weave SCRIPT --adapter vllm`: insert the inference adapter into a (converted) training script."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import click

from npu_port.transpiler.commands.generate import load_spec, schema_option
from npu_port.transpiler.core.files import ReadError, read_text
from npu_port.transpiler.generate.agent_files import (
    AgentFileError,
    as_seen_from,
    check_reward_file,
    check_tools_file,
    split_reward,
)
from npu_port.transpiler.generate.contexts import version_set
from npu_port.transpiler.generate.render import schemas
from npu_port.transpiler.generate.schema import OptionError
from npu_port.transpiler.generate.weave import ADAPTERS, AGENT_SCHEMA_OPTIONS, AgentOptions, WeaveError, weave
from npu_port.transpiler.output.output_files import write_data
from npu_port.transpiler.output.render import unified_diff


def _adapter_options(fn):
    # The adapter's settings are the vllm-infer skeleton's options (model, parallel sizes, sampling...).
    for opt in reversed(list(schemas()["vllm-infer"].options.values())):
        fn = schema_option(opt)(fn)
    return fn


def _agent_options(fn):
    # The agent settings `generate pipeline` has, with its help texts.
    for name in reversed(AGENT_SCHEMA_OPTIONS):
        fn = schema_option(schemas()["pipeline"].options[name])(fn)
    return fn


@click.command(name="weave")
@click.argument("script", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--adapter", type=click.Choice(sorted(ADAPTERS)), default="vllm", show_default=True,
              help="Which inference adapter to weave in.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the woven script there (default: stdout).")
@click.option("--in-place", is_flag=True, help="Overwrite SCRIPT (atomic replace).")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--force", is_flag=True, help="Overwrite an existing -o FILE or --requirements-out file (one "
              "that already holds exactly what would be written is left as it is without it).")
@click.option("--entry", metavar="NAME", help="The script's training entry function (default: the function "
              "its main block calls, else main/train/run/fit).")
@click.option("--handoff-dir", metavar="PATH", help="Folder where training leaves Hugging Face weights; "
              "run_pipeline() hands them to the adapter after training.")
@click.option("--from", "spec", type=click.Path(path_type=Path, dir_okay=False),
              help="Adapter options from a YAML or JSON file; command-line options win.")
@click.option("--requirements-out", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write the pinned Ascend stack the woven code targets (pip requirements, e.g. "
              "requirements-npu.txt).")
@click.option("--agent-loop", is_flag=True, help="Put the agent into VERL's rollouts (the script calls "
              "run_ppo): tool agent loop, tools and reward, checkpoint hand-off, evaluation afterwards.")
@click.option("--tools", type=click.Path(path_type=Path, dir_okay=False, exists=True), metavar="FILE.py",
              help="With --agent-loop: your @function_tool file (default: the sample agent_tools.py, written "
              "next to the output).")
@click.option("--reward", metavar="FILE.py[:NAME]", help="With --agent-loop: your reward function (default: "
              "the sample agent_reward.py's compute_score, written next to the output).")
@click.option("--eval-files", metavar="PATH", help="With --agent-loop: the held-out parquet split of the "
              "evaluation (default: the training config's data.val_files).")
@_agent_options
@_adapter_options
def weave_command(script: Path, adapter: str, output: Optional[Path], in_place: bool, show_diff: bool, force: bool,
                  entry: Optional[str], handoff_dir: Optional[str], spec: Optional[Path],
                  requirements_out: Optional[Path], agent_loop: bool,
                  tools: Optional[Path], reward: Optional[str], eval_files: Optional[str], **cli_values: Any) -> None:
    """Insert the inference adapter into SCRIPT and wire it to the script's training entry.

    Adds the adapter classes after the imports and a run_pipeline() entry before the main block, which
    then calls run_pipeline() instead of the entry. Weaving an already woven script changes nothing.

    With --agent-loop (a script that trains with VERL's run_ppo) the agent is in the RL loop: run_ppo's
    config goes through with_agent_loop(), and run_pipeline() hands the newest checkpoint to the agent's
    vLLM engine (its workers reload it from disk, or the engine is built on it) and evaluates the agent; the
    sample tools and reward are written next to the output. An existing output is replaced only with --force.
    """
    if sum(bool(x) for x in (output, in_place, show_diff)) > 1:
        raise click.UsageError("choose one of -o, --in-place and --diff")
    agent_values = {k: cli_values.pop(k) for k in AGENT_SCHEMA_OPTIONS}
    given = [f"--{k.replace('_', '-')}" for k, v in {"tools": tools, "reward": reward, "eval_files": eval_files,
                                                     **agent_values}.items() if v is not None]
    if given and not agent_loop:
        raise click.UsageError(f"{', '.join(given)} only go with --agent-loop")
    options = load_spec(spec) if spec else {}
    options.pop("kind", None)
    options.update({k: v for k, v in cli_values.items() if v is not None})
    # The folder the woven script will be in: the user's tools and reward paths are written relative to it.
    target = output or (script if in_place or show_diff else None)
    agent = _agent_request(tools, reward, eval_files, agent_values, target) if agent_loop else None
    if agent is not None and target is None and (agent.tools is None or agent.reward is None):
        raise click.UsageError("--agent-loop writes the sample agent_tools.py and agent_reward.py next to the "
                               "woven script: give -o FILE or --in-place, or name your own with --tools and --reward")
    try:
        values = schemas()[ADAPTERS[adapter]].validate(options)
        source = read_text(script)
        result = weave(source, adapter, options=options, entry=entry, handoff_dir=handoff_dir, agent=agent)
    except OptionError as exc:
        raise click.UsageError("invalid options:\n  " + "\n  ".join(exc.problems)) from None
    except ReadError as exc:
        raise click.ClickException(f"{script}: {exc}") from None
    except WeaveError as exc:
        raise click.ClickException(f"{script}: {exc}") from None
    companions = {target.parent / name: text for name, text in result.companions.items()} if target else {}
    if target is not None and any(path.resolve() == target.resolve() for path in companions):
        raise click.UsageError(f"{target}: the woven script cannot take the name of a sample file "
                               f"({', '.join(result.companions)})")
    if not result.changed:
        click.echo(f"{script}: unchanged ({result.note})", err=True)
    else:
        click.echo(f"{script}: woven {adapter} adapter; entry {result.entry}(), "
                   f"{result.rewired_calls} call(s) now go through run_pipeline()", err=True)
        if result.agent_calls:
            click.echo(f"{script}: agent loop: {result.agent_calls} run_ppo call(s) now train through "
                       "with_agent_loop(config)", err=True)
        if result.note:
            click.echo(f"{script}: note: {result.note}", err=True)
    if show_diff:
        sys.stdout.write(unified_diff(str(script), source.encode("utf-8"), result.source.encode("utf-8")))
        for path, text in companions.items():
            if not path.exists():
                sys.stdout.write(unified_diff(str(path), b"", text.encode("utf-8")))
        return
    data = result.source.encode("utf-8")
    requirements = version_set(values).requirements_text().encode("utf-8") if requirements_out else b""
    # Nothing is written when one output would overwrite a file without --force.
    writes = [(p, d) for p, d in ((output, data), (requirements_out, requirements)) if p is not None]
    clobbered = [str(p) for p, d in writes if _would_overwrite(p, d)]
    if clobbered and not force:
        raise click.UsageError(f"{', '.join(clobbered)} already exist(s) with other content; use --force to "
                               "overwrite")
    if in_place:
        if result.changed:  # a link named as the script: the file it leads to is woven, the link stays
            write_data(Path(os.path.realpath(script)) if script.is_symlink() else script, data)
    elif output:
        _write_unless_same(output, data)
    else:
        sys.stdout.write(result.source)
    for path, text in companions.items():
        _write_sample(path, text)
    if requirements_out is not None:
        _write_unless_same(requirements_out, requirements, 0o644, what="--requirements-out")


def _would_overwrite(path: Path, data: bytes) -> bool:
    """A regular file is there, holding something else (a stream such as /dev/stdout is no file to keep)."""
    try:
        return path.is_file() and path.read_bytes() != data
    except OSError:
        return path.exists()


def _write_unless_same(path: Path, data: bytes, mode: Optional[int] = None, what: str = "-o") -> None:
    if path.is_file() and not _would_overwrite(path, data):
        click.echo(f"{path}: already up to date", err=True)
        return
    write_data(path, data, mode, what=what)
    if what == "--requirements-out":
        click.echo(f"wrote {path}", err=True)


def _agent_request(tools: Optional[Path], reward: Optional[str], eval_files: Optional[str],
                   values: dict[str, Any], target: Optional[Path]) -> AgentOptions:
    """--agent-loop's settings; the user's tools and reward files are checked (read, never run) and named
    as the woven script will find them."""
    folder = target.parent if target is not None else Path.cwd()
    settings: dict[str, Any] = {k: v for k, v in values.items() if v is not None}
    try:
        if tools is not None:
            check_tools_file(tools)
            settings["tools"] = as_seen_from(tools, folder)
        if reward is not None:
            reward_path, reward_name = split_reward(reward)
            path = Path(reward_path)
            if not path.is_file():
                raise click.UsageError(f"--reward {reward_path}: no such file")
            check_reward_file(path, reward_name)
            settings.update(reward=as_seen_from(path, folder), reward_name=reward_name)
    except AgentFileError as exc:
        raise click.UsageError(str(exc)) from None
    if eval_files is not None:
        settings["eval_files"] = eval_files
    return AgentOptions(**settings)


def _write_sample(path: Path, text: str) -> None:
    """A sample tools or reward file: written when missing; an existing one is the user's, edited or not,
    and stays as it is (weaving again changes nothing)."""
    if path.exists():
        if path.read_bytes() != text.encode("utf-8"):
            click.echo(f"{path}: kept as it is (not the sample: yours)", err=True)
        return
    write_data(path, text.encode("utf-8"))
    click.echo(f"wrote {path}", err=True)

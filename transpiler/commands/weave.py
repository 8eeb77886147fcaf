"""`npu-port weave SCRIPT --adapter vllm`: insert the inference adapter into a (converted) training script."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import click

from npu_port.transpiler.commands.generate import load_spec, schema_option
from npu_port.transpiler.core.files import ReadError, read_text
from npu_port.transpiler.generate.render import schemas
from npu_port.transpiler.generate.schema import OptionError
from npu_port.transpiler.generate.weave import ADAPTERS, WeaveError, weave
from npu_port.transpiler.output.output_files import write_data
from npu_port.transpiler.output.render import unified_diff


def _adapter_options(fn):
    # The adapter's settings are the vllm-infer skeleton's options (model, parallel sizes, sampling...).
    for opt in reversed(list(schemas()["vllm-infer"].options.values())):
        fn = schema_option(opt)(fn)
    return fn


@click.command(name="weave")
@click.argument("script", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--adapter", type=click.Choice(sorted(ADAPTERS)), default="vllm", show_default=True,
              help="Which inference adapter to weave in.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the woven script there (default: stdout).")
@click.option("--in-place", is_flag=True, help="Overwrite SCRIPT (atomic replace).")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--entry", metavar="NAME", help="The script's training entry function (default: the function "
              "its main block calls, else main/train/run/fit).")
@click.option("--handoff-dir", metavar="PATH", help="Folder where training leaves Hugging Face weights; "
              "run_pipeline() hands them to the adapter after training.")
@click.option("--from", "spec", type=click.Path(path_type=Path, dir_okay=False),
              help="Adapter options from a YAML or JSON file; command-line options win.")
@_adapter_options
def weave_command(script: Path, adapter: str, output: Optional[Path], in_place: bool, show_diff: bool,
                  entry: Optional[str],
                  handoff_dir: Optional[str], spec: Optional[Path], **cli_values: Any) -> None:
    """Insert the inference adapter into SCRIPT and wire it to the script's training entry.

    Adds the adapter classes after the imports and a run_pipeline() entry before the main block, which
    then calls run_pipeline() instead of the entry. Weaving an already woven script changes nothing.
    """
    if sum(bool(x) for x in (output, in_place, show_diff)) > 1:
        raise click.UsageError("choose one of -o, --in-place and --diff")
    options = load_spec(spec) if spec else {}
    options.pop("kind", None)
    options.update({k: v for k, v in cli_values.items() if v is not None})
    try:
        schemas()[ADAPTERS[adapter]].validate(options)
        source = read_text(script)
        result = weave(source, adapter, options=options, entry=entry, handoff_dir=handoff_dir)
    except OptionError as exc:
        raise click.UsageError("invalid options:\n  " + "\n  ".join(exc.problems)) from None
    except ReadError as exc:
        raise click.ClickException(f"{script}: {exc}") from None
    except WeaveError as exc:
        raise click.ClickException(f"{script}: {exc}") from None
    if not result.changed:
        click.echo(f"{script}: unchanged ({result.note})", err=True)
    else:
        click.echo(f"{script}: woven {adapter} adapter; entry {result.entry}(), "
                   f"{result.rewired_calls} call(s) now go through run_pipeline()", err=True)
        if result.note:
            click.echo(f"{script}: note: {result.note}", err=True)
    if show_diff:
        sys.stdout.write(unified_diff(str(script), source.encode("utf-8"), result.source.encode("utf-8")))
    elif in_place:
        if result.changed:
            write_data(script, result.source.encode("utf-8"))
    elif output:
        write_data(output, result.source.encode("utf-8"))
    else:
        sys.stdout.write(result.source)

"""`npu-port generate KIND`: write a training script, inference adapter or pipeline from a skeleton.

Each KIND is a subcommand whose options come from skeletons/<kind>/schema.yaml, so `--help` lists
every option with its type, range and default. Values come from defaults, then `--from SPEC`, then
the command line; all are validated before anything is written.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import click
import yaml

from npu_port.transpiler.core.files import ReadError, read_text, yaml_too_deep
from npu_port.transpiler.generate.contexts import version_set
from npu_port.transpiler.generate.render import render, schemas
from npu_port.transpiler.generate.schema import Option, OptionError, Schema
from npu_port.transpiler.generate.versions import VersionSetError
from npu_port.transpiler.output.output_files import write_data


def _click_type(opt: Option) -> click.ParamType:
    # Ranges are checked by the schema, so a value from --from and one from the command line get the same message.
    if opt.type == "int":
        return click.INT
    if opt.type == "float":
        return click.FLOAT
    if opt.type == "choice":
        return click.Choice(opt.choices)
    return click.STRING


def _help(opt: Option) -> str:
    default = "unset" if opt.default is None else json.dumps(opt.default)
    rng = opt.describe_range()
    return f"{opt.help} [{opt.type}{'; ' + rng if rng else ''}; default: {default}]"


def schema_option(opt: Option):
    if opt.type == "bool":
        flag = opt.flag[2:]
        return click.option(f"--{flag}/--no-{flag}", opt.name, default=None, help=_help(opt))
    metavar = {"int": "INT", "float": "FLOAT", "str": "TEXT", "identifier": "NAME", "config_name": "NAME"}
    return click.option(opt.flag, opt.name, type=_click_type(opt), default=None, help=_help(opt),
                        metavar=metavar.get(opt.type))


# A spec is a flat mapping of option names to scalars: anything bigger is refused before a message could
# spell it out (YAML aliases count each time they are used, so a "billion laughs" document stays cheap).
MAX_SPEC_VALUES = 10_000


def load_spec(path: Path) -> dict[str, Any]:
    """Options from a YAML or JSON file: a mapping of option names (dashes or underscores) to values."""
    what = "JSON" if path.suffix == ".json" else "YAML"
    try:
        text = read_text(path, bom=True)
    except ReadError as exc:
        raise click.UsageError(f"--from {path}: {exc}") from None
    try:
        if what == "YAML" and yaml_too_deep(text):  # what PyYAML's parser finds only after seconds
            raise RecursionError
        data = json.loads(text) if what == "JSON" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise click.UsageError(f"--from {path}: not valid {what}: {_parse_problem(exc)}") from None
    except RecursionError:
        raise click.UsageError(f"--from {path}: nested too deeply to be a spec") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise click.UsageError(f"--from {path}: expected a mapping of option names to values")
    if _too_many_values(data, MAX_SPEC_VALUES):
        raise click.UsageError(f"--from {path}: more than {MAX_SPEC_VALUES} values (aliases counted each time "
                               "they are used); a spec maps option names to single values")
    bad_keys = [k for k in data if not isinstance(k, str)]
    if bad_keys:
        raise click.UsageError(f"--from {path}: option names are text, not {type(bad_keys[0]).__name__} "
                               f"{bad_keys[0]!r}" + (" (a `~:` or `null:` key)" if bad_keys[0] is None else ""))
    return data


def _parse_problem(exc: Exception) -> str:
    """One line: PyYAML's messages span several, with the offending text and a caret."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"{exc.problem}{where}"
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:300] + "..."


def _too_many_values(data: Any, limit: int) -> bool:
    """Whether `data` holds more than `limit` values, walked without recursion and stopping at the limit
    (a shared list is counted each time it is reached, as printing or checking it would)."""
    stack, seen = [data], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
    return False


def _make_command(schema: Schema) -> click.Command:
    def run(output: Optional[Path], out_dir: Optional[Path], spec: Optional[Path], config_out: Optional[Path],
            requirements_out: Optional[Path], force: bool, show_options: bool, **cli_values: Any) -> None:
        if out_dir is not None:
            output, config_out, requirements_out = _tree_paths(schema, out_dir, output, config_out, requirements_out)
        given: dict[str, Any] = load_spec(spec) if spec else {}
        spec_kind = given.pop("kind", schema.kind)
        if spec_kind != schema.kind:
            raise click.UsageError(f"--from {spec}: the spec is for {repr(spec_kind)[:60]}, not {schema.kind!r}")
        given.update({k: v for k, v in cli_values.items() if v is not None})
        extra: dict[str, Any] = {}
        config_path = _config_destination(schema, given, output, config_out, extra)
        try:
            values = schema.validate(given)
        except OptionError as exc:
            raise click.UsageError("invalid options:\n  " + "\n  ".join(exc.problems)) from None
        versions = None
        if "vllm_version" in schema.options:
            try:
                versions = version_set(values)  # --verl-version and --vllm-version must name one installable set
            except VersionSetError as exc:
                raise click.UsageError(f"invalid options:\n  {exc}") from None
        elif requirements_out is not None:
            raise click.UsageError(f"{schema.kind} has no pinned pip stack (MindSpeed-RL installs from its git "
                                   "source with its own requirements); drop --requirements-out")
        if show_options:
            click.echo(yaml.safe_dump({"kind": schema.kind, **values}, sort_keys=False), nl=False)
            return
        rendered = render(schema.kind, values, extra)
        if schema.template.endswith(".py.j2"):
            ast.parse(rendered.main)  # a template bug must never reach the user's disk
        companions = rendered.companions or {}
        if companions and (output is None or str(output) == "-"):
            raise click.UsageError(f"{schema.kind} also writes {', '.join(companions)} next to the script: "
                                   "give -o FILE")
        companion_paths = {output.parent / name: text for name, text in companions.items()} if output else {}
        targets = [p for p in (output, config_path, requirements_out, *companion_paths)
                   if p is not None and str(p) != "-"]
        # A stream named as an output (-o /dev/null, /dev/stdout, a FIFO with a reader) is written to, not
        # replaced: nothing there to overwrite.
        existing = [str(p) for p in targets if p.exists() and not _is_stream(p)]
        if existing and not force:
            raise click.UsageError(f"{', '.join(existing)} already exist(s); use --force to overwrite")
        if out_dir is not None:
            try:  # created only now: options that fail validation leave no empty folder behind
                out_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise click.ClickException(f"cannot create --out {out_dir}: {exc.strerror or exc}") from None
        if output is None or str(output) == "-":
            sys.stdout.write(rendered.main)
        else:
            write_data(output, rendered.main.encode("utf-8"), 0o755 if rendered.main.startswith("#!") else 0o644)
            click.echo(f"wrote {output}", err=True)
        for path, text in companion_paths.items():
            write_data(path, text.encode("utf-8"), 0o644)
            click.echo(f"wrote {path}", err=True)
        if config_path is not None and rendered.config is not None:
            write_data(config_path, rendered.config.encode("utf-8"), 0o644)
            click.echo(f"wrote {config_path}", err=True)
        if requirements_out is not None and versions is not None:
            write_data(requirements_out, versions.requirements_text().encode("utf-8"), 0o644,
                       what="--requirements-out")
            click.echo(f"wrote {requirements_out}", err=True)

    run.__doc__ = schema.summary
    command = run
    for opt in reversed(list(schema.options.values())):
        command = schema_option(opt)(command)
    for deco in reversed([
        click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
                     help="File to write (default: stdout)."),
        click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
                     help=f"Folder to write everything into: {_tree_listing(schema)}."),
        click.option("--from", "spec", type=click.Path(path_type=Path, dir_okay=False),
                     help="Read options from a YAML or JSON file; command-line options win."),
        click.option("--config-out", type=click.Path(path_type=Path, dir_okay=False),
                     help="Also write the matching framework config (VERL / MindSpeed-RL YAML)."
                     if schema.config_template else "Not used by this kind."),
        click.option("--requirements-out", type=click.Path(path_type=Path, dir_okay=False),
                     help="Also write the pinned Ascend stack the output targets (pip requirements, e.g. "
                     "requirements-npu.txt)."),
        click.option("--force", is_flag=True, help="Overwrite existing files."),
        click.option("--show-options", is_flag=True,
                     help="Print the effective options as a YAML spec (usable with --from) and exit."),
    ]):
        command = deco(command)
    return click.command(schema.kind, help=schema.summary, short_help=schema.summary.split(":")[0])(command)


def _tree_listing(schema: Schema) -> str:
    names = [schema.template.removesuffix(".j2"), *schema.companions]
    if schema.config_template:
        names.append("<config-name>.yaml" if "config_name" in schema.options else "config.yaml")
    if "vllm_version" in schema.options:
        names.append("requirements-npu.txt")
    return ", ".join(names)


def _tree_paths(schema: Schema, out_dir: Path, output: Optional[Path], config_out: Optional[Path],
                requirements_out: Optional[Path]) -> tuple[Path, Optional[Path], Optional[Path]]:
    """--out DIR: the main file, its config and the requirements under their usual names in DIR."""
    given = [flag for flag, value in (("-o", output), ("--config-out", config_out),
                                      ("--requirements-out", requirements_out)) if value is not None]
    if given:
        raise click.UsageError(f"--out DIR names every file; drop {', '.join(given)}")
    if out_dir.exists() and not out_dir.is_dir():
        raise click.UsageError(f"--out {out_dir}: not a folder")
    main = out_dir / schema.template.removesuffix(".j2")
    config = out_dir / "config.yaml" if schema.config_template and "config_name" not in schema.options else None
    requirements = out_dir / "requirements-npu.txt" if "vllm_version" in schema.options else None
    return main, config, requirements


def _config_destination(schema: Schema, given: dict[str, Any], output: Optional[Path],
                        config_out: Optional[Path], extra: dict[str, Any]) -> Optional[Path]:
    """Where the framework config goes; for msrl-train also ties the Hydra config name to the file name."""
    if config_out is not None and not schema.config_template:
        raise click.UsageError(f"{schema.kind} has no framework config; drop --config-out")
    if "config_name" not in schema.options:
        return config_out
    # msrl-train: the launch script runs `--config-name <name>` and finds the YAML relative to itself.
    name = given.get("config_name", given.get("config-name"))
    if config_out is not None:
        if config_out.suffix not in (".yaml", ".yml"):
            raise click.UsageError("--config-out: MindSpeed-RL reads its config as <name>.yaml; use a .yaml file")
        if name is not None and name != config_out.stem:
            raise click.UsageError(f"--config-name {name!r} and --config-out {config_out.name!r} disagree; "
                                   "Hydra finds the config by its file name")
        given["config_name"] = config_out.stem
    elif output is None or str(output) == "-":
        raise click.UsageError(f"{schema.kind} writes a launch script and a YAML config: give -o FILE "
                               "(the YAML goes next to it) or --config-out FILE.yaml")
    else:
        config_out = output.parent / f"{name or schema.options['config_name'].default}.yaml"
    script_dir = (output.parent if output is not None and str(output) != "-" else Path("."))
    extra["config_file"] = os.path.relpath(config_out, script_dir)
    return config_out


class _KindGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(schemas())

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        schema = schemas().get(name)
        return _make_command(schema) if schema else None


@click.group(cls=_KindGroup)
def generate() -> None:
    """Generate an Ascend NPU training script, inference adapter or pipeline (KIND --help for options)."""


def _is_stream(path) -> bool:
    from npu_port.transpiler.core.files import NotReplaceable, is_stream_output

    try:
        return is_stream_output(path)
    except NotReplaceable:
        return False

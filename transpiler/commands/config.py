"""`npu-port config`: the effective settings and where each came from; and the glue every command
uses to turn its flags plus the project file into one ProjectConfig."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from npu_port.transpiler.commands._options import keep_cuda_options, rule_options, split_csv
from npu_port.transpiler.core.config import KEYS, ConfigError, ProjectConfig, load_config
from npu_port.transpiler.core.registry import UnknownRuleError, select_specs
from npu_port.transpiler.tables.user_tables import TableError, load_user_tables

# click parameter name -> config key, and how a flag value becomes a config value.
_FLAG_KEYS: dict[str, tuple[str, Any]] = {
    "target": ("target", None),
    "select": ("select", split_csv),
    "ignore": ("ignore", split_csv),
    "extras": ("extras", None),
    "keep_cuda": ("keep-cuda", None),
    "torch_version": ("torch-version", None),
    "forbid": ("forbid", split_csv),
    "no_relative": ("no-relative", None),
    "exclude": ("exclude", split_csv),
    "rules_files": ("rules", list),
    "strict": ("strict", None),
    "runtime_env": ("runtime-env", None),
}


def config_file_options(fn):
    for deco in reversed([
        click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                     help="Use this npu-port.toml / pyproject.toml instead of searching above the paths."),
        click.option("--isolated", is_flag=True, help="Ignore every configuration file."),
    ]):
        fn = deco(fn)
    return fn


def rules_file_option(fn):
    return click.option("--rules", "rules_files", multiple=True, type=click.Path(path_type=Path, dir_okay=False),
                        help="A YAML file of custom mapping rows (the built-in tables' schema); repeatable.")(fn)


def exclude_option(fn):
    return click.option("--exclude", multiple=True, metavar="GLOB,...",
                        help="Skip files matching these globs, also when named explicitly (replaces the "
                             "configured exclude).")(fn)


def policy_options(fn):
    """The flags of `check` that are settings too (they have config keys)."""
    for deco in reversed([
        click.option("--forbid", multiple=True, metavar="PKG,...",
                     help="Report imports of these packages as errors."),
        click.option("--no-relative", is_flag=True, help="Report relative imports as errors."),
        exclude_option,
        rules_file_option,
        click.option("--strict", is_flag=True, help="Warnings count as errors for the exit code."),
    ]):
        fn = deco(fn)
    return fn


def resolve_config(ctx: click.Context, paths, config_file, isolated) -> ProjectConfig:
    """Project file + the flags given on the command line; bad files or rule names are usage errors."""
    cli: dict[str, Any] = {}
    for param, (key, convert) in _FLAG_KEYS.items():
        if param not in ctx.params:
            continue
        source = ctx.get_parameter_source(param)
        if source is None or source.name in ("DEFAULT", "DEFAULT_MAP"):
            continue
        value = ctx.params[param]
        cli[key] = convert(value) if convert else value
    real_paths = [p for p in paths if str(p) != "-"] or [Path.cwd()]
    try:
        config = load_config(real_paths, cli, config_file=config_file, isolated=isolated)
        validate_config(config)
    except (ConfigError, TableError) as exc:
        raise click.UsageError(str(exc)) from None
    return config


def validate_config(config: ProjectConfig) -> None:
    """Rule names must exist and custom tables must be valid; errors name where the value was set."""
    for key in ("select", "ignore"):
        _check_rule_names(config[key], f"{config.sources[key]}: {key}")
    for glob, rules in config["per-file-ignores"].items():
        _check_rule_names(rules, f"{config.sources['per-file-ignores']}: per-file-ignores {glob!r}")
    for path in config["rules"]:
        load_user_tables(Path(path), config["target"])
    if config["runtime-env"]:  # the flag's value is checked as it is parsed; the file's here
        from npu_port.transpiler.tables.runtime_env import ProfileError, load_profile  # only when one is set

        try:
            load_profile(config["target"], str(config["runtime-env"]))
        except ProfileError as exc:
            raise ConfigError(f"{config.sources['runtime-env']}: runtime-env: {exc}") from None


def _check_rule_names(names, where: str) -> None:
    try:
        select_specs(names)  # names only: imports no rule
    except UnknownRuleError as exc:
        raise ConfigError(f"{where}: {exc}") from None


@click.command("config")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@rule_options
@keep_cuda_options
@policy_options
@config_file_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def config_command(ctx, paths, target, select, ignore, extras, keep_cuda, torch_version, forbid, no_relative, exclude, rules_files, strict,
                   config_file, isolated, as_json):
    """Show the effective settings for PATHS (default: here) and where each one came from.

    Precedence: command-line flags, then the nearest npu-port.toml or pyproject.toml [tool.npu-port]
    above the paths, then the defaults.
    """
    config = resolve_config(ctx, paths, config_file, isolated)
    rows = [{"key": k, "value": _jsonable(config[k]), "source": str(config.sources[k]), "help": KEYS[k].help}
            for k in KEYS]
    if as_json:
        click.echo(json.dumps({"config_file": str(config.file) if config.file else None, "settings": rows},
                              indent=2))
        return
    # Imported here: every command resolves its configuration through this module, and rich's table
    # (with the console under it) costs a one-file `convert` about 40 ms it does not use.
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"config file: [bold]{config.file or '(none found; defaults)'}[/]")
    table = Table("key", "value", "source", "meaning", header_style="bold")
    for row in rows:
        table.add_row(row["key"], json.dumps(row["value"]), row["source"], row["help"])
    console.print(table)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value

"""Options shared by the commands that run rules."""

from __future__ import annotations

import click

from npu_port.transpiler.tables.mapping import available_targets


def split_csv(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip())


def rule_options(fn):
    for deco in reversed([
        click.option("--target", default="ascend", show_default=True,
                     type=click.Choice(available_targets()), help="Accelerator to port to."),
        click.option("--select", multiple=True, metavar="RULE,...",
                     help="Only these rules (ids, id prefixes or groups such as 'extras', 'shell')."),
        click.option("--ignore", multiple=True, metavar="RULE,...", help="Leave these rules out."),
        click.option("--extras", is_flag=True,
                     help="Also apply the opt-in NPU additions (set_env.sh, HCCL timeouts, runtime_env...)."),
    ]):
        fn = deco(fn)
    return fn


def _check_version(ctx, param, value):
    import re

    if value is not None and not re.fullmatch(r"\d+\.\d+(\.\d+)?", value):
        raise click.BadParameter(f"{value!r} is not a release number such as 2.6")
    return value


def keep_cuda_options(fn):
    for deco in reversed([
        click.option("--keep-cuda/--no-keep-cuda", "keep_cuda", default=False,
                     help="Port so that the code runs on NVIDIA GPUs and Ascend NPUs alike: device-agnostic "
                          "code that picks the accelerator at run time (docs/keep-cuda.md)."),
        click.option("--torch-version", metavar="X.Y", callback=_check_version,
                     help="With --keep-cuda: the oldest torch the output must run on (default: the project's "
                          "own torch pin, else the newest snapshotted release)."),
    ]):
        fn = deco(fn)
    return fn


def _check_runtime_env(ctx, param, value):
    if value is None:
        return None
    from npu_port.transpiler.tables.runtime_env import ProfileError, load_profile  # only when the option is used
    try:
        load_profile(ctx.params.get("target", "ascend"), str(value))
    except ProfileError as exc:
        raise click.BadParameter(str(exc)) from None
    return str(value)


runtime_env_option = click.option(
    "--runtime-env", "runtime_env", type=click.Path(exists=True, dir_okay=False), callback=_check_runtime_env,
    metavar="FILE.yaml", help="NPU runtime_env profile for the extras rule ray-runtime-env "
                              "(a Ray runtime_env YAML with env_vars:); replaces the built-in one.")

"""The `npu-port` command line: a thin click group; each command lives in transpiler/commands/."""

from __future__ import annotations

import click

from transpiler import __version__
from transpiler.commands.check import check
from transpiler.commands.config import config_command
from transpiler.commands.convert import convert
from transpiler.commands.explain import explain
from transpiler.commands.generate import generate
from transpiler.commands.pipeline import pipeline
from transpiler.commands.rules import rules
from transpiler.commands.standalone import standalone
from transpiler.commands.weave import weave_command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="npu-port")
def cli() -> None:
    """Port CUDA code (PyTorch, VERL, vLLM, MindSpeed-RL, Ray) to Huawei Ascend NPUs as reviewable changes."""


cli.add_command(convert)
cli.add_command(generate)
cli.add_command(rules)
cli.add_command(standalone)
cli.add_command(weave_command)
cli.add_command(pipeline)
cli.add_command(check)
cli.add_command(explain)
cli.add_command(config_command)


def main() -> None:
    cli(prog_name="npu-port")


if __name__ == "__main__":
    main()

"""The `npu-port` command line: a thin click group; each command lives in transpiler/commands/."""

from __future__ import annotations

import importlib
import os
import sys

import click

from npu_port.transpiler import __version__
from npu_port.transpiler.core.exit_codes import ExitCode, exit_interrupted

# Command name -> (module, attribute, summary). A command's module is imported only when that command
# runs: `npu-port convert` need not pay for the skeleton, standalone and documentation machinery, and
# `npu-port --help` lists the summaries without importing any (they import LibCST; the summary is
# the first sentence of the command's docstring, tests/test_cli_startup.py holds them equal).
COMMANDS = {
    "check": ("npu_port.transpiler.commands.check", "check",
              "Report what is not yet ported in PATHS, and what a port got wrong."),
    "config": ("npu_port.transpiler.commands.config", "config_command",
               "Show the effective settings for PATHS (default: here) and where each one came from."),
    "convert": ("npu_port.transpiler.commands.convert", "convert",
                "Rewrite CUDA code in PATHS for the target accelerator."),
    "explain": ("npu_port.transpiler.commands.explain", "explain",
                "Explain RULE: what it does, why, an example before and after, and its fix safety."),
    "generate": ("npu_port.transpiler.commands.generate", "generate",
                 "Generate an Ascend NPU training script, inference adapter or pipeline (KIND --help for "
                 "options)."),
    "pipeline": ("npu_port.transpiler.commands.pipeline", "pipeline",
                 "Build an NPU training-inference pipeline from a GPU script that uses project packages."),
    "rules": ("npu_port.transpiler.commands.rules", "rules",
              "List every rule with its id, description and fix safety."),
    "standalone": ("npu_port.transpiler.commands.standalone", "standalone",
                   "Inline into SOURCE every definition it uses from the --strip packages."),
    "weave": ("npu_port.transpiler.commands.weave", "weave_command",
              "Insert the inference adapter into SCRIPT and wire it to the script's training entry."),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of `--help`, as click writes it, from the summaries above."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = [(n, click.Command(n, help=COMMANDS[n][2]).get_short_help_str(limit)) for n in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="npu-port")
def cli() -> None:
    """Port CUDA code (PyTorch, VERL, vLLM, MindSpeed-RL, Ray) to Huawei Ascend NPUs as reviewable changes."""


def main() -> None:
    """The console script: what no command turned into a clean message becomes one here, so no
    traceback ever reaches a user (an output that cannot be written: exit 1; a bug: exit 2; Ctrl-C or
    SIGTERM: 130, where click alone would say "Aborted!" and exit 1)."""
    try:
        code = cli.main(prog_name="npu-port", standalone_mode=False)
    except (KeyboardInterrupt, click.exceptions.Abort):
        exit_interrupted()
    except click.ClickException as exc:
        from npu_port.transpiler.output.console import terminal_safe

        setattr(exc, "message", terminal_safe(exc.message))  # noqa: B010 - typed Final; a file name in it never drives the terminal
        exc.show()
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # `npu-port convert x.py | head`: the reader left, nothing to report
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter flushes it at exit
        sys.exit(ExitCode.FAILED)
    except OSError as exc:
        from npu_port.transpiler.core.files import printable

        where = f": {printable(str(exc.filename))}" if exc.filename and str(exc.filename) not in str(exc.strerror) else ""
        click.echo(f"npu-port: error: {exc.strerror or exc}{where}", err=True)
        sys.exit(ExitCode.FAILED)
    except RecursionError:
        click.echo("npu-port: error: the input is nested too deeply to process", err=True)
        sys.exit(ExitCode.FAILED)
    except Exception as exc:  # a bug: say what, without a traceback, and how to get one
        from npu_port.transpiler.core.files import printable

        click.echo(f"npu-port: internal error: {type(exc).__name__}: {printable(str(exc))} (please report it; "
                   f"NPU_PORT_TRACEBACK=1 shows where)", err=True)
        if os.environ.get("NPU_PORT_TRACEBACK"):
            raise
        sys.exit(ExitCode.INTERNAL)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)


if __name__ == "__main__":
    main()

"""Keeps the commands, outputs and files shown in docs/*.md true: every snippet comes from running the tool.

A doc marks a snippet with an HTML comment naming what produces it, followed by a fenced block:

    <!-- run: npu-port convert fixtures/examples/torch_amp.input.py --diff -->
    ```diff
    (the command's output)
    ```

    <!-- file: fixtures/examples/torch_amp.input.py -->
    ```python
    (the file's text)
    ```

`python -m tools.doc_snippets --update` rewrites the blocks of docs/ and README.md; `--check` (what the
tests do) exits 1 and names every stale snippet. Commands run from the repository root with `npu-port`
meaning this checkout's CLI: in this process, through click's test runner (what the console script
prints, with its environment; a command that raises is run again as a subprocess, whose last-resort
handler words the error); any other command (grep, sed) runs as a subprocess. Run times in summaries
are shown as `<time>` so outputs are stable.

Docs write their scratch files under /tmp/npu-port-docs (SCRATCH). Each run substitutes a fresh private
folder for it in the commands and maps that folder back in their outputs, so the pages read the same
and two runs at once (two checkouts, a test run beside `--update`) never share files.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = "/tmp/npu-port-docs"  # as the docs name it
_BLOCK = re.compile(
    r"(?P<head><!-- (?P<kind>run|file): (?P<arg>.+?) -->\n```(?P<lang>[\w+-]*)\n)(?P<body>.*?)(?P<tail>^```$)",
    re.S | re.M,
)
_TIME = re.compile(r"\b\d+\.\d+s\b")
ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}


@contextlib.contextmanager
def scratch_folder() -> Iterator[str]:
    """A fresh folder standing for SCRATCH during one run, removed afterwards."""
    folder = tempfile.mkdtemp(prefix="npu-port-docs-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _in_process(args: list[str], cwd: Path) -> Optional[tuple[str, int]]:
    """`npu-port ARGS` run here: (stdout + stderr, exit code), or None where the command raised."""
    from click.testing import CliRunner

    from npu_port.transpiler.cli import cli

    try:
        runner = CliRunner(env=ENV, mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner(env=ENV)  # click >= 8.2 keeps stderr apart by itself
    # The help's width as click computes it from COLUMNS in a process of its own (its test runner
    # would force 80).
    width = max(min(int(ENV["COLUMNS"]), cli.context_settings.get("max_content_width", 80)) - 2, 50)
    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = runner.invoke(cli, args, prog_name="npu-port", terminal_width=width)
    finally:
        os.chdir(here)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return None
    return result.stdout + result.stderr, result.exit_code


def _subprocess(words: list[str], cwd: Path) -> tuple[str, int]:
    if words and words[0] == "npu-port":
        words = [sys.executable, "-m", "npu_port.transpiler", *words[1:]]
    env = dict(os.environ, **ENV, PYTHONPATH=str(ROOT))
    proc = subprocess.run(words, cwd=cwd, capture_output=True, text=True, env=env, timeout=120)
    return proc.stdout + proc.stderr, proc.returncode


def run_command(command: str, cwd: Path = ROOT, scratch: Optional[str] = None) -> str:
    """The command's output as a doc shows it. `scratch`: the folder that stands for SCRATCH."""
    if scratch:
        command = command.replace(SCRATCH, scratch)
    words = shlex.split(command)
    done = _in_process(words[1:], cwd) if words and words[0] == "npu-port" else None
    out, code = done if done is not None else _subprocess(words, cwd)
    if scratch:
        for path in sorted({scratch, os.path.realpath(scratch)}, key=len, reverse=True):
            out = out.replace(path, SCRATCH)
    out = _TIME.sub("<time>", out)
    if code:
        out += f"[exit code {code}]\n"
    return out if out.endswith("\n") or not out else out + "\n"


def render(text: str, cwd: Path = ROOT, scratch: Optional[str] = None) -> str:
    def fill(m: re.Match) -> str:
        if m.group("kind") == "run":
            body = run_command(m.group("arg"), cwd, scratch)
        else:  # a scratch file is read where this run wrote it, not a stale copy an earlier run left
            arg = m.group("arg").replace(SCRATCH, scratch) if scratch else m.group("arg")
            body = (cwd / arg).read_text(encoding="utf-8")
            if scratch:
                body = body.replace(scratch, SCRATCH)
        return m.group("head") + body + m.group("tail")

    return _BLOCK.sub(fill, text)


def render_pages(paths: list[Path]) -> dict[Path, str]:
    """Each page rendered, in order, with one scratch folder for the run."""
    with scratch_folder() as scratch:
        return {path: render(path.read_text(encoding="utf-8"), scratch=scratch) for path in paths}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--update", action="store_true", help="rewrite stale snippets")
    mode.add_argument("--check", action="store_true", help="exit 1 if any snippet is stale")
    parser.add_argument("paths", nargs="*", default=[str(ROOT / "docs"), str(ROOT / "README.md")])
    args = parser.parse_args(argv)
    files: list[Path] = []
    for p in map(Path, args.paths):
        files.extend(sorted(p.rglob("*.md")) if p.is_dir() else [p])
    stale = []
    for path, new in render_pages(files).items():
        if new != path.read_text(encoding="utf-8"):
            stale.append(path)
            if args.update:
                path.write_text(new, encoding="utf-8")
    for path in stale:
        print(f"{'updated' if args.update else 'stale'}: {path}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())

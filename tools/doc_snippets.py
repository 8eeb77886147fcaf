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

`python -m tools.doc_snippets --update docs` rewrites the blocks; `--check` (used by the tests)
exits 1 and names every stale snippet. Commands run from the repository root with `npu-port` meaning
this checkout's CLI; run times in summaries are shown as `<time>` so outputs are stable.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(
    r"(?P<head><!-- (?P<kind>run|file): (?P<arg>.+?) -->\n```(?P<lang>[\w+-]*)\n)(?P<body>.*?)(?P<tail>^```$)",
    re.S | re.M,
)
_TIME = re.compile(r"\b\d+\.\d+s\b")


def run_command(command: str, cwd: Path = ROOT) -> str:
    words = shlex.split(command)
    if words and words[0] == "npu-port":
        words = [sys.executable, "-m", "npu_port.transpiler", *words[1:]]
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1", TERM="dumb", PYTHONPATH=str(ROOT))
    proc = subprocess.run(words, cwd=cwd, capture_output=True, text=True, env=env, timeout=120)
    out = proc.stdout + proc.stderr
    out = _TIME.sub("<time>", out)
    if proc.returncode:
        out += f"[exit code {proc.returncode}]\n"
    return out if out.endswith("\n") or not out else out + "\n"


def render(text: str, cwd: Path = ROOT) -> str:
    def fill(m: re.Match) -> str:
        if m.group("kind") == "run":
            body = run_command(m.group("arg"), cwd)
        else:
            body = (cwd / m.group("arg")).read_text(encoding="utf-8")
        return m.group("head") + body + m.group("tail")

    return _BLOCK.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--update", action="store_true", help="rewrite stale snippets")
    mode.add_argument("--check", action="store_true", help="exit 1 if any snippet is stale")
    parser.add_argument("paths", nargs="*", default=[str(ROOT / "docs"), str(ROOT / "README.md")])
    args = parser.parse_args(argv)
    files = []
    for p in map(Path, args.paths):
        files.extend(sorted(p.rglob("*.md")) if p.is_dir() else [p])
    stale = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        new = render(text)
        if new != text:
            stale.append(path)
            if args.update:
                path.write_text(new, encoding="utf-8")
    for path in stale:
        print(f"{'updated' if args.update else 'stale'}: {path}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())

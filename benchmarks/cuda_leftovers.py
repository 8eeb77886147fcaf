"""How much CUDA is left in converted code that nothing reports? Converts every source file of each tree
(or the GPU fixtures) in this process, runs the default and check rules again over the output, and
counts the output lines that still hold a CUDA token in code, and how many of them carry no finding.

    python benchmarks/cuda_leftovers.py [PATH ...] [--fixtures] [--show N]

A CUDA token is a name in code (not a comment, not the text of a string, which log messages and paths
keep by design) that is one of CUDA's: `cuda` (`torch.cuda`, `x.cuda()`), `nccl`, `cudnn`, `nvcc`,
`cupy`, `triton`, `flash_attn`, `apex`, `xformers`, `bitsandbytes`, `pynvml`, `amp_C` (a library name
only where a name starts with it: `triton.jit`, not `args.flash_attn` or `flash_attn=`); a user's own
identifier that contains one (`use_cuda`, `CUDA_HOME`) is not. In shell, YAML and manifests the same
words count outside comments (`--device cuda`, `nvidia-smi`, `flash-attn`), except in `echo` / `printf`
text, pyproject's prose keys (`description = ...`), YAML `name:` labels (a workflow step's name) and YAML
keys (`flash_attn: fa2` is a user's config key, as `flash_attn=` is in Python). With `--fixtures`, the cases
that must change or report are measured (a must-not-change case keeps its CUDA words on purpose).
A line counts as reported when the second pass has any finding or change on it. The goal is zero lines
without one; the printed samples are what to read. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from npu_port.transpiler.core.engine import CONVERTERS, Engine  # noqa: E402
from npu_port.transpiler.core.files import language_of, walk  # noqa: E402
from npu_port.transpiler.core.registry import all_rules  # noqa: E402
from npu_port.transpiler.core.settings import Settings  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_NAMES = {"cuda", "nccl", "cudnn", "nvcc", "cupy", "triton", "flash_attn", "apex", "xformers", "bitsandbytes",
          "pynvml", "amp_C"}
_WORD = re.compile(r"(?<![\w.-])(?:cuda|nccl|cudnn|nvcc|nvidia-smi|cupy(?:-cuda\w*)?|triton|flash[-_]attn|apex"
                   r"|xformers|bitsandbytes|pynvml)(?![\w-])")
# Text printed for a person and prose keys: they name CUDA packages without being CUDA code.
_MESSAGE = re.compile(r"(?<![\w-])(?:echo|printf)\s[^;&|\n]*")
_PROSE_KEY = re.compile(r"^\s*(?:description|summary|keywords|readme)\s*=")
# A YAML `name:` is a label shown to a person (a workflow step's `- name: tests on 8 GPUs + flash_attn`).
_YAML_LABEL = re.compile(r"^\s*(?:-\s+)?name\s*:")


def code_lines_with_token(text: str, language: str) -> set[int]:
    """1-based lines where a CUDA token occurs in code."""
    lines: set[int] = set()
    if language == "python":
        try:
            tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                      if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)]
        except (tokenize.TokenError, SyntaxError, IndentationError):
            return lines
        for i, tok in enumerate(tokens):
            if tok.type != tokenize.NAME or tok.string not in _NAMES:
                continue
            before = tokens[i - 1].string if i else ""
            after = tokens[i + 1].string if i + 1 < len(tokens) else ""
            # `torch.cuda` / `x.cuda()` anywhere; a library only as the start of a name (`triton.jit`,
            # `import apex`), not as a user's attribute, keyword or key (`args.flash_attn`, `flash_attn=`)
            if tok.string == "cuda" or (before != "." and after not in ("=", ":")):
                lines.add(tok.start[0])
        return lines
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if language != "cuda" else line.split("//", 1)[0]
        if language in ("shell", "manifest"):
            code = _MESSAGE.sub("", code)  # `echo "pip install flash-attn yourself"` is a message, not a step
            if _PROSE_KEY.match(code):
                continue  # pyproject's `description = "needs flash-attn ..."`
        if language == "yaml" and _YAML_LABEL.match(code):
            continue
        if any(not (language == "yaml" and _is_key(code, m.end())) for m in _WORD.finditer(code)):
            lines.add(number)
    return lines


def _is_key(code: str, end: int) -> bool:
    """`flash_attn: fa2`: the word is a key of the user's config (as `flash_attn=` in Python), not CUDA."""
    return code[end:].lstrip().startswith(":")


def sources(paths: list[Path], fixtures: bool):
    if fixtures:
        cases = sorted((FIXTURES / "rules").glob("*/*.input.*")) + sorted((FIXTURES / "examples").glob("**/*.input.*"))
        for path in cases:
            stem = path.name.split(".input.")[0]
            if path.with_name(path.name.replace(".input.", ".expected.")).exists() \
                    or path.with_name(stem + ".findings").exists():
                yield path, path.name.replace(".input", "")
    for tree in paths:
        for path in walk(tree):
            if path.is_file() and not path.is_symlink():
                yield path, str(path)


def measure(items, show: int) -> dict:
    every = tuple(sorted(all_rules()))
    convert = Engine(Settings())
    recheck = Engine(Settings(select=every))
    counts: Counter = Counter()
    samples: list[str] = []
    for path, name in items:
        language = language_of(name)
        if language not in CONVERTERS:
            continue
        data = path.read_bytes()
        converted = convert.convert(data, name, language)
        if converted.outcome.status == "failed":
            counts["failed"] += 1
            continue
        out = converted.output if converted.output is not None else data
        second = recheck.convert(out, name, language)
        text = out.decode("utf-8", "replace")
        flagged = {f.line for f in second.outcome.findings}
        with_token = code_lines_with_token(text, language)
        counts["files"] += 1
        counts["token lines"] += len(with_token)
        unreported = sorted(with_token - flagged)
        counts["unreported"] += len(unreported)
        lines = text.splitlines()
        for number in unreported:
            if len(samples) < show:
                samples.append(f"{path}:{number}: {lines[number - 1].strip()[:110]}")
    counts["samples"] = samples  # type: ignore[assignment]
    return dict(counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--fixtures", action="store_true", help="the GPU fixtures (rules and examples)")
    parser.add_argument("--show", type=int, default=20, help="print this many unreported lines")
    args = parser.parse_args(argv)
    groups = ([("fixtures", [], True)] if args.fixtures else []) + [(str(p), [p], False) for p in args.paths]
    print("| input | files | lines with a CUDA token in code | of them with no finding |")
    print("|---|---|---|---|")
    all_samples = []
    for label, paths, fixtures in groups:
        result = measure(sources(paths, fixtures), args.show)
        all_samples.extend(result.pop("samples"))
        print(f"| {label} | {result.get('files', 0)} | {result.get('token lines', 0)} | {result.get('unreported', 0)} |")
    for sample in all_samples[: args.show]:
        print("  " + sample)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

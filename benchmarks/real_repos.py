"""What `convert` does to real multi-device repositories: files changed, changes, findings, dispatch hits.

    python benchmarks/real_repos.py [--mirror /work/.mirror] [--work DIR] [--repos verl,trl,...] [--jobs N]
                                    [--keep] [--json]

For each repository the newest snapshot under --mirror (the bare git directories the `fetch` tool brings,
named `owner+name`) is exported with `git archive HEAD`, converted with
`npu-port convert SRC --out OUT --report R.json --format json --no-cache`, and compared with its source.
Printed per repository, side by side:

  commit     the snapshot's HEAD (say it when quoting a figure)
  files      files the report covers
  changed    files whose output differs from the input
  changes    `kind: change` entries of the report
  findings   `kind: finding` entries, as error/warning/info
  dispatch   changes on a line that sits inside device-dispatch code of the input: an `if`/`elif`/`while`/
             `match` or ternary whose test names the NPU or another vendor (an "npu"/"hip"/"xpu" literal, an
             `is_*npu*_available` predicate, `torch.npu`, `get_device_name()`), or such a comparison. Real repositories keep their branches; each change counted
             here must be read by a person (the goal is 0 wrong ones, not 0 hits).
  npu-native files in an NPU-native package (`*_ascend`, `mindspeed*`) or importing torch_npu/vllm_ascend/
             mindspeed that were changed

The expected snapshot commits of the last published figures are in benchmarks/README.md. Nothing is
written inside the mirror; --work defaults to a fresh temporary folder, removed unless --keep.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPOS = {
    "verl": "volcengine+verl",
    "trl": "huggingface+trl",
    "OpenRLHF": "OpenRLHF+OpenRLHF",
    "LLaMA-Factory": "hiyouga+LLaMA-Factory",
    "vllm-ascend": "vllm-project+vllm-ascend",
}

# A test that names the NPU or another vendor's stack picks a branch by device: code a hard CUDA->NPU port must
# leave as is. `x if torch.cuda.is_available() else "cpu"` is single-device code and is not counted.
OTHER_DEVICE = re.compile(
    r"""["'](npu|hccl|NPU|hip|xpu|mps|gpu|rocm)(:\d+)?["']|\bis_\w*(npu|nvidia|rocm|hip|xpu|mps)\w*"""
    r"""|\btorch\.npu\b|\bversion\.hip\b|\bget_device_name\b|\bcurrent_platform\b""")
NPU_NATIVE_IMPORT = re.compile(r"^\s*(import|from)\s+(torch_npu|vllm_ascend|mindspeed)\b", re.M)


@dataclass
class RepoFigures:
    repo: str
    commit: str = ""
    files: int = 0
    changed: int = 0
    changes: int = 0
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    dispatch: int = 0
    npu_native_changed: int = 0
    failed: int = 0
    dispatch_sites: list[str] = field(default_factory=list)


def git_dir(mirror: Path, stem: str) -> Path | None:
    """The bare git directory the `fetch` tool left for `owner+name` (it may sit one level down)."""
    root = mirror / stem
    if not root.is_dir():
        return None
    for candidate in [root, *sorted(p for p in root.iterdir() if p.is_dir())]:
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def export(gitdir: Path, dest: Path) -> str:
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", f"--git-dir={gitdir}", "archive", "HEAD"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return subprocess.run(["git", f"--git-dir={gitdir}", "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def _mentions_dispatch(source: str) -> bool:
    return bool(OTHER_DEVICE.search(source))


def dispatch_lines(text: str) -> set[int]:
    """Lines of `text` inside code that picks a branch by device: the span of an if/match/ternary whose test
    compares with a device name or calls a device predicate, and the line of any such comparison."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        test = None
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            test = node.test
        elif isinstance(node, ast.Match):
            test = node
        elif isinstance(node, ast.Compare):
            test = node
        if test is None:
            continue
        segment = ast.get_source_segment(text, test) or ""
        if isinstance(node, ast.Match):
            segment = " ".join(ast.get_source_segment(text, c.pattern) or "" for c in node.cases) + " =="
        if _mentions_dispatch(segment):
            end = getattr(node, "end_lineno", node.lineno) or node.lineno
            lines.update(range(node.lineno, end + 1))
    return lines


def run_convert(src: Path, out: Path, report: Path, jobs: int) -> None:
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    cmd = [sys.executable, "-m", "npu_port", "convert", str(src), "--target", "ascend", "--out", str(out),
           "--report", str(report), "--no-cache", "-q", "-j", str(jobs)]
    subprocess.run(cmd, capture_output=True, text=True)


def measure(name: str, src: Path, out: Path, report: Path, jobs: int, convert: bool = True) -> RepoFigures:
    fig = RepoFigures(repo=name)
    if convert:
        run_convert(src, out, report, jobs)
    data = json.loads(report.read_text(encoding="utf-8"))
    fig.files = int(data.get("summary", {}).get("files", 0))
    fig.failed = len(data.get("errors", []))
    prefix = str(src) + "/"
    by_file: dict[str, list[dict]] = {}
    for finding in data.get("findings", []):
        by_file.setdefault(finding["file"].removeprefix(prefix), []).append(finding)
    for path in src.rglob("*"):
        rel = path.relative_to(src).as_posix()
        if path.is_file() and not path.is_symlink() and rel not in by_file:
            target = out / rel
            if target.is_file() and target.read_bytes() != path.read_bytes():
                by_file[rel] = []
    for rel, findings in by_file.items():
        source = src / rel
        target = out / rel
        try:
            changed = source.is_file() and target.is_file() and source.read_bytes() != target.read_bytes()
        except OSError:
            changed = False
        fig.changed += changed
        text = source.read_text(encoding="utf-8", errors="replace") if changed and rel.endswith(".py") else ""
        hot = dispatch_lines(text) if text else set()
        native = bool(text) and (bool(NPU_NATIVE_IMPORT.search(text))
                                 or any(p.endswith("_ascend") or p.startswith("mindspeed")
                                        for p in Path(rel).parts[:-1]))
        fig.npu_native_changed += changed and native
        for finding in findings:
            if finding.get("kind") == "change":
                fig.changes += 1
                if finding.get("line") in hot:
                    fig.dispatch += 1
                    fig.dispatch_sites.append(f"{rel}:{finding.get('line')} {finding.get('rule')}")
            else:
                severity = finding.get("severity")
                fig.errors += severity == "error"
                fig.warnings += severity == "warning"
                fig.infos += severity == "info"
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--work", type=Path)
    parser.add_argument("--repos", default=",".join(REPOS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the exported sources and outputs")
    parser.add_argument("--sites", action="store_true", help="list every change counted as dispatch")
    parser.add_argument("--reuse", action="store_true",
                        help="count again from the outputs a previous run left in --work instead of converting")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="npu-port-real-"))
    figures: list[RepoFigures] = []
    for name in args.repos.split(","):
        gitdir = git_dir(args.mirror, REPOS.get(name, name))
        if gitdir is None:
            print(f"{name}: no snapshot under {args.mirror} (fetch github:{REPOS.get(name, name).replace('+', '/')})",
                  file=sys.stderr)
            continue
        src = work / "src" / name
        commit = export(gitdir, src) if not src.exists() else \
            subprocess.run(["git", f"--git-dir={gitdir}", "rev-parse", "HEAD"], capture_output=True,
                           text=True).stdout.strip()
        out = work / "out" / name
        report = work / "out" / f"{name}.json"
        fig = measure(name, src, out, report, args.jobs, convert=not (args.reuse and report.is_file()))
        fig.commit = commit[:12]
        figures.append(fig)
    if args.json:
        print(json.dumps([asdict(f) for f in figures], indent=2))
    else:
        cols = ["repo", "commit", "files", "changed", "changes", "errors", "warnings", "infos", "dispatch",
                "npu_native_changed", "failed"]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for fig in figures:
            print("| " + " | ".join(str(getattr(fig, c)) for c in cols) + " |")
        if args.sites:
            for fig in figures:
                for site in fig.dispatch_sites:
                    print(f"{fig.repo}: {site}")
    if not args.keep and not args.work:
        subprocess.run(["rm", "-rf", str(work)])
    else:
        print(f"sources and outputs: {work}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

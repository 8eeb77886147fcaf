"""What `convert --keep-cuda` makes of verl's files, against the device-agnostic ports verl's maintainers wrote.

    python benchmarks/keep_cuda_ports.py [--mirror /work/.mirror] [--commits SHA,...] [--torch-version X.Y]
                                         [--show SHA] [--json]

The commits (COMMITS below, each with why it is one) are verl's own ports of files from CUDA to its device
helpers: `torch.cuda.X` -> `get_torch_device().X`, `"cuda"` -> `get_device_name()`, `"nccl"` ->
`get_nccl_backend()`, `.cuda()` -> `.to(get_device_id())`, ... They are read from the bare git directory the
`fetch` tool leaves under --mirror (`volcengine+verl`); nothing is written there.

For each commit C and each Python file it modifies (or renames), verl/utils/device.py aside, the parent's version (`C^:path`) is
converted in this process, `Engine(Settings(keep_cuda=True))` with every default rule, under its path in
the tree (a verl file gets verl's helpers), and the output is compared with the maintainers' version
(`C:path`). The torch the output must run on is what `convert` would find: the lowest torch pin of the
parent's requirements*.txt / setup.py / pyproject.toml (read as text), unless --torch-version says.

Comparison, by logical line (one statement however it is wrapped): tokens with whitespace, comments and
line breaks dropped, strings in one quote style, a trailing comma before a closing bracket dropped, and a
helper's module prefix (`verl.utils.device.get_device_name` -> `get_device_name`) dropped. Each version is
aligned with the parent's (difflib over the normalised logical lines; in a replaced block each new line is
paired with the most similar parent line).

  device lines  the logical lines the maintainers added that are device-related: they name a device helper
                (get_device_name, get_torch_device, get_nccl_backend, get_device_id, is_npu_available, ...)
                or torch.accelerator, or they replaced a CUDA token of the parent line they stand for
                (torch.cuda.X, .cuda(), .is_cuda, "cuda", "cuda:N", "nccl", "CUDA_VISIBLE_DEVICES"). Imports
                are counted apart (imports column).
  produced      of them, the ones the output holds: identical (the same normalised line among the output's
                new lines) or equivalent (the output changed the same parent line, and applying only the
                edits that touch a CUDA token or a helper gives the same line: the same helper call replaces
                the same CUDA token, whatever else the maintainers changed in that line)
  missed        the others, split into `kept` (the output left the parent line as it was), `other` (the output
                changed it differently; of them `same call`: the same call spelled another way,
                torch.accelerator.X or get_torch_device().current_device() for verl's get_torch_device().X or
                get_device_id()) and `new` (a line the maintainers wrote with no CUDA line under it: new
                code, such as an `if is_npu_available:` branch or a device_name= argument that was a default)
  extra         parent lines with a CUDA token that the maintainers left as they were and the output changed
  imports       helper imports from verl.utils.device the maintainers added, that the output imports too
                (same names, any line)
  cuda left     lines that still hold one of the words verl's own CI refuses outside its whitelist
                (tests/special_sanity/check_device_api_usage.py, #2089: `.cuda`, `"cuda"`, `"nccl"`), in the
                output / in the maintainers' version, over the files compared

The same figures for the default (hard) mode follow, for contrast: it writes torch.npu, not the helpers.
`--show SHA` lists every missed line of that commit (file:line, before, maintainers', ours) and every
extra. Nothing is timed.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import re
import subprocess
import sys
import tempfile
import tokenize
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from real_repos import git_dir  # the mirror's git directory, as the other benchmarks find it

import npu_port
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.tables.device_agnostic import torch_for_output

MIRROR_STEM = "volcengine+verl"

# verl's commits that port files to its device helpers, found with `git log -S get_torch_device` (and the
# other helper names) and read hunk by hunk: a commit is here when its diff replaces CUDA calls, strings or
# backends by the helpers, not when it only adds code that uses them.
COMMITS: list[tuple[str, str]] = [
    ("0528ba118", "#332, the first NPU port: adds verl/utils/device.py and moves the FSDP workers, the "
                  "sharding managers and the checkpoint manager to get_torch_device() / get_device_name()"),
    ("203804818", "#1858, DAPO on NPU: device=\"cuda\" -> get_device_name(), torch.cuda.is_available() -> "
                  "get_torch_device().is_available()"),
    ("0bd03d7c0", "#1927: torch.cuda.current_device() -> get_torch_device().current_device() in the timing "
                  "utilities"),
    ("ca65c363f", "#1974, the device-management refactor: about 220 torch.cuda / \"cuda\" / \"nccl\" / "
                  ".cuda() sites in 37 files of verl, its recipes and tests"),
    ("0077f3e38", "#2089, the CI check for irregular device API use: the checkpoint managers' RNG state, an "
                  "is_cuda/is_npu branch folded into get_device_name() / get_torch_device()"),
    ("5c46f4f43", "#3422: the FSDP engine's device == \"cuda\" checks -> get_device_name()"),
    ("65f9badfe", "#4036: backend=\"nccl\" -> get_nccl_backend() in the fully-async parameter sync"),
    ("3db9c99e5", "#4626, the NPU unit tests: init_process_group(backend=\"nccl\"), device_type=\"cuda\", "
                  "torch.cuda.X in the single-controller tests -> the helpers"),
]

HELPERS = ("get_device_name", "get_torch_device", "get_nccl_backend", "get_device_id", "is_npu_available",
           "is_cuda_available", "get_visible_devices_keyword", "get_resource_name", "is_torch_npu_available",
           "get_device_capability", "set_expandable_segments", "auto_set_device")
HELPER = re.compile(r"\b(" + "|".join(HELPERS) + r")\b|\btorch\.accelerator\b|\bget_device_module\b")
# A helper named through its module: `verl.utils.device.get_device_name`, `device.get_torch_device`.
QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+(?=(?:" + "|".join(HELPERS) + r")\b)")
# The words verl's CI check (check_device_api_usage.py, added in #2089) refuses in a file outside its whitelist.
VERL_CI_WORDS = (".cuda", '"cuda"', '"nccl"')
REQUIREMENT_FILES = ("requirements.txt", "requirements-npu.txt", "setup.py", "pyproject.toml", "setup.cfg")
DEVICE_MODULE = "verl.utils.device"


# --------------------------------------------------------------------------------------------- logical lines

@dataclass
class Logical:
    line: int            # first physical line
    text: str            # the physical lines, as written
    tokens: list[str]    # normalised tokens
    cuda: list[int]      # indices of tokens that are (part of) a CUDA construct

    @property
    def norm(self) -> str:
        return " ".join(self.tokens)


def _norm_string(tok: str) -> str:
    prefix = re.match(r"[A-Za-z]*", tok).group(0)  # type: ignore[union-attr]
    body = tok[len(prefix):]
    if body[:3] in ('"""', "'''") or "f" in prefix.lower():
        return prefix.lower() + body.replace("'", '"')
    quote = body[0]
    inner = body[1:-1]
    if quote == "'" and '"' not in inner:
        return prefix.lower() + '"' + inner.replace("\\'", "'") + '"'
    return prefix.lower() + body


def _cuda_marks(tokens: list[str]) -> list[int]:
    marks: set[int] = set()
    for i, tok in enumerate(tokens):
        if tok == "cuda" and i >= 1 and tokens[i - 1] == ".":
            # torch.cuda (and the attribute after it), x.cuda(...), x.is_cuda is below
            start = i - 2 if i >= 2 and tokens[i - 2] == "torch" else i - 1
            marks.update(range(start, min(i + 3, len(tokens))))
        elif tok == "is_cuda" and i >= 1 and tokens[i - 1] == ".":
            marks.update((i - 1, i))
        elif tok[:1] in "\"'fbrFBR" and re.search(r"""^[a-zA-Z]*["'](?:cuda(?::[^"']*)?|nccl|CUDA_VISIBLE_DEVICES)["']$""",
                                                   tok):
            marks.add(i)
        elif tok[:2].lower() == 'f"' and re.search(r"cuda:|\bnccl\b", tok):
            marks.add(i)
    return sorted(marks)


def logical_lines(text: str) -> list[Logical]:
    """The file's logical lines, normalised; [] where it does not tokenize."""
    src = text.splitlines(keepends=True)
    out: list[Logical] = []
    toks: list[str] = []
    first = 0
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    for tok in tokens:
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
                        tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.NEWLINE:
            if toks:
                last = tok.start[0]
                out.append(Logical(first, "".join(src[first - 1:last]).rstrip("\n"), toks, _cuda_marks(toks)))
            toks = []
            continue
        if not toks:
            first = tok.start[0]
        value = _norm_string(tok.string) if tok.type == tokenize.STRING else tok.string
        toks.append(value)
    for item in out:
        item.tokens = _drop_trailing_commas(_unqualify(item.tokens))
        item.cuda = _cuda_marks(item.tokens)
    return out


def _unqualify(tokens: list[str]) -> list[str]:
    """`verl.utils.device.get_device_name` -> `get_device_name`: the import decides the spelling."""
    out: list[str] = []
    for tok in tokens:
        if tok in HELPERS:
            while len(out) >= 2 and out[-1] == "." and re.fullmatch(r"[A-Za-z_]\w*", out[-2]) \
                    and out[-2] not in ("torch",):
                del out[-2:]
        out.append(tok)
    return out


def _drop_trailing_commas(tokens: list[str]) -> list[str]:
    return [t for i, t in enumerate(tokens) if not (t == "," and i + 1 < len(tokens) and tokens[i + 1] in ")]}")]


def is_import(item: Logical) -> bool:
    return item.tokens[:1] in (["import"], ["from"])


def helper_imports(lines: list[Logical]) -> set[str]:
    """Names imported from verl.utils.device."""
    names: set[str] = set()
    for item in lines:
        toks = item.tokens
        if toks[:1] == ["from"] and "".join(toks[1:toks.index("import")]) == DEVICE_MODULE:
            names.update(t for t in toks[toks.index("import") + 1:] if re.fullmatch(r"[A-Za-z_]\w*", t)
                         and t != "as")
    return names


# ------------------------------------------------------------------------------------------------ alignment

@dataclass
class Alignment:
    kept: set[int]                 # parent indices left as they were
    new: dict[int, int | None]     # new index -> the parent index it stands for (None: an insertion)


def align(parent: list[Logical], new: list[Logical]) -> Alignment:
    a = [x.norm for x in parent]
    b = [x.norm for x in new]
    kept: set[int] = set()
    pairs: dict[int, int | None] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            kept.update(range(i1, i2))
            continue
        free = list(range(i1, i2))
        for j in range(j1, j2):
            best, score = None, 0.5
            for i in free:
                matcher = difflib.SequenceMatcher(None, parent[i].tokens, new[j].tokens, autojunk=False)
                # the cheap upper bounds first: most pairs of a large replaced block are far apart
                if matcher.real_quick_ratio() > score and matcher.quick_ratio() > score \
                        and (ratio := matcher.ratio()) > score:
                    best, score = i, ratio
            pairs[j] = best
            if best is not None:
                free.remove(best)
    return Alignment(kept, pairs)


# Spellings of one call: torch's own device-agnostic API, verl's get_torch_device().X and get_device_id() (which
# is get_torch_device().current_device()). A missed line whose output differs from the maintainers' only by
# these makes the same call, spelled another way (column `same call`); it is not counted as produced.
SAME_API = [
    (re.compile(r"torch \. accelerator \. current_device_index \( \)|get_torch_device \( \) \. current_device \( \)"),
     "get_device_id ( )"),
    (re.compile(r"torch \. accelerator \. set_device_index\b"), "get_torch_device ( ) . set_device"),
    (re.compile(r"torch \. accelerator \.|torch \. get_device_module \( \) \."), "get_torch_device ( ) ."),
]


def same_api(text: str) -> str:
    for pattern, repl in SAME_API:
        text = pattern.sub(repl, text)
    return text


def edit_pairs(parent: Logical, new: Logical) -> list[tuple[str, str]]:
    """The (old, new) token runs of the edits `new` made to `parent` that touch a CUDA token or a helper."""
    marks = set(parent.cuda)
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, parent.tokens, new.tokens, autojunk=False).get_opcodes():
        repl = " ".join(new.tokens[j1:j2])
        if tag != "equal" and (any(i in marks for i in range(i1, i2)) or HELPER.search(repl)):
            out.append((" ".join(parent.tokens[i1:i2]), repl))
    return out


def device_edits(parent: Logical, new: Logical) -> str:
    """`parent` with only the edits `new` made that touch a CUDA token or write a helper: what the device
    port of that line is, whatever else changed in it."""
    marks = set(parent.cuda)
    out: list[str] = []
    ops = difflib.SequenceMatcher(None, parent.tokens, new.tokens, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        old, repl = parent.tokens[i1:i2], new.tokens[j1:j2]
        touches = any(i in marks for i in range(i1, i2)) or (tag == "insert" and ({i1 - 1, i1} & marks)) \
            or bool(HELPER.search(" ".join(repl)))
        out.extend(repl if tag != "equal" and touches else old)
    return " ".join(out)


# ----------------------------------------------------------------------------------------------- measuring

@dataclass
class Miss:
    file: str
    line: int
    kind: str          # kept, other, new
    before: str
    maintainers: str
    ours: str
    key: str = ""      # what the CUDA token became: `torch.cuda -> theirs / ours`


@dataclass
class Figures:
    commit: str
    files: int = 0
    device_lines: int = 0
    identical: int = 0
    equivalent: int = 0
    kept: int = 0
    other: int = 0
    torch_api: int = 0   # of `other`: the same call as the maintainers', spelled another way (SAME_API)
    new: int = 0
    extra: int = 0
    imports: int = 0
    imports_ours: int = 0
    cuda_left_ours: int = 0
    cuda_left_theirs: int = 0
    broken: list[str] = field(default_factory=list)  # outputs that do not parse or use a helper unbound
    failed: list[str] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    extras: list[Miss] = field(default_factory=list)

    @property
    def produced(self) -> int:
        return self.identical + self.equivalent

    @property
    def missed(self) -> int:
        return self.kept + self.other + self.new

    def add(self, other: Figures) -> None:
        for name in ("files", "device_lines", "identical", "equivalent", "kept", "other", "torch_api", "new", "extra",
                     "imports", "imports_ours", "cuda_left_ours", "cuda_left_theirs"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failed += other.failed
        self.broken += other.broken


def _git(gitdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True)


def changed_python_files(gitdir: Path, commit: str) -> list[tuple[str, str]]:
    """(path in the parent, path in the commit) of each Python file the commit modifies or renames."""
    out = _git(gitdir, "diff-tree", "-r", "-M", "--no-commit-id", "--name-status", f"{commit}^", commit)
    files = []
    for row in out.stdout.decode("utf-8", "replace").splitlines():
        status, *paths = row.split("\t")
        if status[0] == "M" and paths[0].endswith(".py"):
            files.append((paths[0], paths[0]))
        elif status[0] == "R" and len(paths) == 2 and paths[1].endswith(".py"):
            files.append((paths[0], paths[1]))
    return files


def torch_pin(gitdir: Path, commit: str, work: Path) -> tuple[str, str]:
    """What `convert --keep-cuda` run on a checkout of `commit` would take as the oldest torch to support."""
    root = work / "pins"
    subprocess.run(["rm", "-rf", str(root)])
    root.mkdir(parents=True)
    for name in REQUIREMENT_FILES:
        blob = _git(gitdir, "show", f"{commit}:{name}")
        if blob.returncode == 0:
            (root / name).write_bytes(blob.stdout)
    return torch_for_output("ascend", None, [root / "verl" / "x.py"])


def unbound_helpers(text: str) -> set[str] | None:
    """The device helpers `text` names without binding them (an import, a def, an assignment); None where
    it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    bound: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else used).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return {name for name in used if name in HELPERS} - bound


def measure_file(engine: Engine, path: str, before: str, theirs: str, fig: Figures) -> None:
    converted = engine.convert(before.encode("utf-8"), path, language="python")
    if converted.outcome.status == "failed":
        fig.failed.append(f"{path}: {converted.outcome.error}")
        return
    ours = converted.output.decode("utf-8") if converted.output is not None else before
    if converted.output is not None:
        unbound = unbound_helpers(ours)
        if unbound is None or unbound - (unbound_helpers(before) or set()):
            fig.broken.append(f"{path}: " + ("does not parse" if unbound is None
                                             else "uses " + ", ".join(sorted(unbound)) + " without importing it"))
    p, m, o = logical_lines(before), logical_lines(theirs), logical_lines(ours)
    if not p or not m or not o:
        fig.failed.append(f"{path}: does not tokenize")
        return
    am, ao = align(p, m), align(p, o)
    our_new = Counter(o[j].norm for j in ao.new)
    our_for_parent = {i: j for j, i in ao.new.items() if i is not None}
    counted = False
    for j, i in sorted(am.new.items()):
        line = m[j]
        if is_import(line):
            continue
        parent = p[i] if i is not None else None
        replaced = parent is not None and bool(parent.cuda) and len(parent.cuda) > len(line.cuda)
        # a helper the parent line did not name yet: a line that already used one and changed for another
        # reason (a new keyword argument) is not part of the port
        helper = len(HELPER.findall(line.norm)) > (len(HELPER.findall(parent.norm)) if parent else 0)
        if not (helper or replaced):
            continue
        counted = True
        fig.device_lines += 1
        if our_new[line.norm] > 0:
            our_new[line.norm] -= 1
            fig.identical += 1
            continue
        jo = our_for_parent.get(i) if i is not None else None
        if parent is not None and jo is not None and device_edits(parent, line) == device_edits(parent, o[jo]):
            fig.equivalent += 1
            continue
        key = ""
        if parent is None or not parent.cuda:
            kind = "new"
        elif jo is None:
            kind = "kept"
        else:
            kind = "other"
            fig.torch_api += same_api(device_edits(parent, line)) == same_api(device_edits(parent, o[jo]))
        if parent is not None and parent.cuda:
            their_edit = edit_pairs(parent, line)[:1]
            ours_edit = dict(edit_pairs(parent, o[jo])) if jo is not None else {}
            if their_edit:
                old, repl = their_edit[0]
                key = f"{old} -> {repl} / " + (ours_edit.get(old) or (next(iter(ours_edit.values()), "")
                                                                      if ours_edit else "(kept)"))
        setattr(fig, kind, getattr(fig, kind) + 1)
        fig.misses.append(Miss(path, line.line, kind, parent.text if parent else "",
                               line.text, o[jo].text if jo is not None else (parent.text if parent else ""), key))
    for i in sorted(am.kept - ao.kept):
        if p[i].cuda:
            counted = True
            fig.extra += 1
            jo = our_for_parent.get(i)
            fig.extras.append(Miss(path, p[i].line, "extra", p[i].text, p[i].text,
                                   o[jo].text if jo is not None else "(removed)"))
    theirs_imports = helper_imports(m) - helper_imports(p)
    if theirs_imports:
        counted = True
        fig.imports += len(theirs_imports)
        fig.imports_ours += len(theirs_imports & helper_imports(o))
    fig.files += counted
    if counted:
        fig.cuda_left_ours += _ci_lines(ours)
        fig.cuda_left_theirs += _ci_lines(theirs)


def _ci_lines(text: str) -> int:
    return sum(any(word in line for word in VERL_CI_WORDS) for line in text.splitlines())


def measure(gitdir: Path, commit: str, keep_cuda: bool, torch_version: str | None, work: Path) -> Figures:
    if keep_cuda and torch_version is None:
        torch_version = torch_pin(gitdir, f"{commit}^", work)[0]
    engine = Engine(Settings(keep_cuda=keep_cuda, torch_version=torch_version))
    fig = Figures(commit)
    for old, new in changed_python_files(gitdir, commit):
        if new == DEVICE_MODULE.replace(".", "/") + ".py":
            continue  # the helpers' own definitions, not a port of a file to them
        before = _git(gitdir, "show", f"{commit}^:{old}").stdout.decode("utf-8", "replace")
        theirs = _git(gitdir, "show", f"{commit}:{new}").stdout.decode("utf-8", "replace")
        measure_file(engine, old, before, theirs, fig)
    return fig


# ------------------------------------------------------------------------------------------------- printing

COLUMNS = ("commit", "files", "device lines", "produced", "identical", "equivalent", "missed",
           "kept", "other", "same call", "new", "extra", "imports", "cuda left")


def _pct(x: int, y: int) -> str:
    return f"{x}/{y} ({100 * x / y:.0f}%)" if y else "0/0"


def row(fig: Figures) -> list[str]:
    return [fig.commit, str(fig.files), str(fig.device_lines), _pct(fig.produced, fig.device_lines),
            str(fig.identical), str(fig.equivalent), str(fig.missed), str(fig.kept), str(fig.other),
            str(fig.torch_api), str(fig.new), str(fig.extra), f"{fig.imports_ours}/{fig.imports}",
            f"{fig.cuda_left_ours} / {fig.cuda_left_theirs}"]


def miss_kinds(figures: list[Figures], top: int) -> None:
    """The most frequent misses by what the maintainers made of the CUDA token and what the output did,
    each with its first example; then the lines that are new code, by the helper they name."""
    kinds: Counter[str] = Counter()
    first: dict[str, Miss] = {}
    for fig in figures:
        for miss in fig.misses:
            if miss.kind == "new":
                found = HELPER.search(miss.maintainers)
                name = found.group(0) if found else "?"
                label = f"[new] a line naming {name}"
            else:
                label = f"[{miss.kind}] {miss.key}"
            kinds[label] += 1
            first.setdefault(label, miss)
    print(f"\nmissed lines by kind (top {top}): theirs / ours\n")
    for label, n in kinds.most_common(top):
        miss = first[label]
        print(f"  {n:4d} {label}\n         e.g. {fig_commit(figures, miss)} {miss.file}:{miss.line}")


def fig_commit(figures: list[Figures], miss: Miss) -> str:
    return next(f.commit for f in figures if miss in f.misses)


def table(title: str, figures: list[Figures]) -> None:
    total = Figures("**total**")
    for fig in figures:
        total.add(fig)
    print(f"\n{title}\n")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for fig in [*figures, total]:
        print("| " + " | ".join(row(fig)) + " |")
    for failure in total.failed:
        print(f"  not converted: {failure}")
    print(f"outputs that do not parse or name a helper they do not import: {len(total.broken)}")
    for broken in total.broken:
        print(f"  {broken}")


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def show(fig: Figures) -> None:
    for title, rows in (("missed", fig.misses), ("extra", fig.extras)):
        print(f"\n{fig.commit} {title}: {len(rows)}")
        for miss in rows:
            print(f"  {miss.file}:{miss.line} [{miss.kind}]")
            print(f"    before:      {_one_line(miss.before)}")
            if miss.kind != "extra":
                print(f"    maintainers: {_one_line(miss.maintainers)}")
            print(f"    ours:        {_one_line(miss.ours)}")


def measured_tool() -> str:
    """Which npu-port is measured: its folder and, in a git checkout, the commit (the rules change often;
    quote it with a figure)."""
    root = Path(npu_port.__file__).resolve().parent.parent
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return f"npu-port from {root}"
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return f"npu-port {head.stdout.strip()}{' with uncommitted changes' if dirty else ''} ({root})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--commits", help="comma-separated commits (default: COMMITS)")
    parser.add_argument("--torch-version", help="the oldest torch the output must run on (default: the "
                                                "parent's own pin, as convert reads it)")
    parser.add_argument("--show", metavar="SHA", help="list the missed and extra lines of this commit")
    parser.add_argument("--top", type=int, default=15, help="miss kinds to list")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    gitdir = git_dir(args.mirror, MIRROR_STEM)
    if gitdir is None:
        print(f"no snapshot under {args.mirror}/{MIRROR_STEM} (fetch github:volcengine/verl)", file=sys.stderr)
        return 2
    reasons = dict(COMMITS)
    commits = args.commits.split(",") if args.commits else [c for c, _ in COMMITS]
    if args.show:
        commits = [c for c in commits if c.startswith(args.show) or args.show.startswith(c)] or [args.show]
    with tempfile.TemporaryDirectory(prefix="npu-port-keep-cuda-ports-") as tmp:
        work = Path(tmp)
        pins = {c: torch_pin(gitdir, f"{c}^", work)[0] for c in commits} if not args.torch_version else {}
        soft = [measure(gitdir, c, True, args.torch_version or pins[c], work) for c in commits]
        if args.show:
            for fig in soft:
                show(fig)
            return 0
        hard = [measure(gitdir, c, False, None, work) for c in commits]
    if args.json:
        def as_dict(fig: Figures) -> dict:
            return {**asdict(fig), "produced": fig.produced, "missed": fig.missed}
        print(json.dumps({"keep_cuda": [as_dict(f) for f in soft], "default": [as_dict(f) for f in hard],
                          "torch": pins}, indent=2))
        return 0
    head = _git(gitdir, "rev-parse", "HEAD").stdout.decode().strip()
    print(measured_tool())
    print(f"verl mirror at {head}")
    for c in commits:
        subject = _git(gitdir, "log", "-1", "--format=%s", c).stdout.decode().strip()
        torch = args.torch_version or pins[c]
        print(f"  {c} {subject} (torch {torch})" + (f"\n      {reasons[c]}" if c in reasons else ""))
    table("--keep-cuda", soft)
    miss_kinds(soft, args.top)
    table("default mode (hard port), for contrast", hard)
    return 0


if __name__ == "__main__":
    sys.exit(main())

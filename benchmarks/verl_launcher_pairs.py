"""What `convert --extras` makes of verl's GPU launchers, against the NPU launchers verl's maintainers wrote.

    python benchmarks/verl_launcher_pairs.py [SRC] [--mirror /work/.mirror] [--match name|nearest|history]
                                             [--min-similarity F] [--min-score S] [--recurring K] [--top N]
                                             [--keep] [--json] [--show PAIR]

SRC is a verl checkout or unpacked snapshot; without it the newest snapshot the `fetch` tool left under
--mirror (`volcengine+verl`, a bare git directory) is exported with `git archive HEAD` into a temporary
folder and its commit (`git rev-parse HEAD`) is printed: say it when quoting a figure.

Pairs. A launcher is an NPU variant when its path says so, one path component or name part being `npu` or
`ascend` (`X_npu.sh`, `X-npu.sh`, `X_npu_Y.sh`, `npu_X.sh`, `*ascend*.sh`, `tests/special_npu/X.sh`), or when its
first lines say `# run on Ascend ...` / `trainer.device=npu` is set. Its GPU twin is, by name, the same path
with the `npu`/`ascend` part dropped (`X.sh`, `X_Y.sh`) or with the folder spelled the GPU way
(`special_npu/` -> `special_e2e/`). With `--match nearest` (the default) an NPU launcher without a twin by
name is paired with the GPU launcher of the tree whose items are nearest (Jaccard over the keys of both
launchers, the same entry point required, the same folder preferred at a tie) when the similarity reaches
--min-similarity. With `--match history` (a git directory needed: the mirror's, or SRC a checkout) an NPU
launcher without a twin by name is first looked up in git's history: where git's copy detection (`log --follow
-M -C`, `show -C -C --find-copies-harder` on the commit that added it) says it was made from a GPU launcher with
a score of at least --min-score, the pair is the GPU launcher as it was just before that commit and the NPU
launcher as that commit wrote it (`path@commit^` / `path@commit`): the maintainers' own port, before later edits
of either. The table says which way each pair was made (`name`, `~0.83` or `git C067`).

Each GPU launcher is converted on its own with
`npu-port convert GPU.sh --target ascend --extras --out TMP.sh --no-cache -q` (the output option is read from
`convert --help`: `--out`, `--output` or `-o`, whichever the CLI has today).

Normalisation, the same for the GPU launcher, the maintainers' NPU launcher and the output: comments (a `#`
that starts a word outside quotes) and blank lines are dropped, backslash continuations joined, each
logical line split with shlex (quotes removed, so `x='npu'` is `x=npu`; true/false compared without case)
into simple commands at `;`, `&&`, `||`, `|`, and each simple command into items:

  env   `export VAR=value` (and `VAR=value cmd`, an assignment in front of a command)
  var   `VAR=value` alone on its line: a shell variable
  arg   a `key=value` argument of a command: a Hydra override (leading `+`/`++`/`~` not part of the key)
        or `--flag=value`
  cmd   what is left of the command once its args are taken out (`python3 -m verl.trainer.main_ppo`,
        `source /usr/local/Ascend/ascend-toolkit/set_env.sh`, `set -x`); `$@` is dropped; its key is its text

An item is its kind, key and value; its key is kind + key (a cmd's text is its key).

Columns, per pair and in total, as x/y:

  npu-lines  the maintainers' NPU-only items (in the NPU launcher, their key absent from the GPU one) that the
             output holds exactly (same key, same value)
  recurring  the same over the NPU-only items that are NPU-only in at least --recurring pairs: the settings a
             port needs rather than one script's own batch sizes, paths and names
  settings   the same over the NPU-only items whose key is a row the rules add in
             codemods/data/ascend/framework_settings.yaml (action: add): what the tool is meant to produce;
             the items of its `leave` rows (tuning, release-specific switches, each with its reason) are
             counted below the table
  changed    items of keys in both launchers whose value the maintainers changed, that the output holds with
             the maintainers' value (mostly hyperparameters; `trainer.device=cuda` -> `npu` would show here)
  gpu-kept   keys that name the GPU (gpu, cuda, nccl, nvidia, nvml; `trainer.n_gpus_per_node`,
             `gpu_memory_utilization`, `*_per_gpu`) in both launchers: the maintainers kept them, and the
             output must still have them (under the same key, any value)
  all-kept   the same over every key in both launchers
  extras     items of the output in neither launcher: added or rewritten by the tool, not written by the
             maintainers (a count, not a ratio)

Then the maintainers' items most often missing from the outputs (NPU-only ones, `new`, and changed values,
`value`), each with the number of pairs that miss it, and the items the tool added most often.
`--show PAIR` (a substring of the NPU launcher's path) lists one pair's produced, missing and extra items.
Nothing is timed or asserted; nothing is written inside SRC or the mirror.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from real_repos import export, git_dir  # the same snapshot export (this folder is on the script's path)

ROOT = Path(__file__).resolve().parent.parent
MIRROR_STEM = "volcengine+verl"
SETTINGS = ROOT / "codemods" / "data" / "ascend" / "framework_settings.yaml"

# A path component or name part that marks an NPU variant: `_npu`, `-npu`, `npu_`, `special_npu/`, `ascend`.
NPU_PART = re.compile(r"(?:^|[/_\-.])(npu|ascend)(?=[/_\-.]|$)", re.I)
NPU_CONTENT = re.compile(r"^\s*#.*\b(ascend|npu)\b|\btrainer\.device=['\"]?npu\b", re.I | re.M)
# Folders whose NPU copy lives beside the GPU one under another name.
DIR_TWINS = {"special_npu": "special_e2e"}
GPU_NAMED = re.compile(r"gpu|cuda|nccl|nvidia|nvml", re.I)
ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)
OVERRIDE = re.compile(r"^([+~]{0,2})([A-Za-z_][\w.\-/@]*|--?[A-Za-z][\w.\-]*)=(.*)$", re.S)
ARRAY_EXPANSION = re.compile(r"^\$\{\w+\[[@*]\]\}$")
ENTRY = re.compile(r"(?:^|\s)-m\s+(\S+)|(\S+\.py)\b")
SEPARATORS = {";", "&&", "||", "|", "&", ";;", "|&"}
DECLARE = {"local", "readonly", "declare", "typeset"}


# --------------------------------------------------------------------------------------------- normalisation

def _strip_comment(line: str) -> str:
    """`line` without a trailing comment: a `#` that starts a word outside quotes."""
    quote = ""
    prev = " "
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and (quote == "'" or line[i - 1] != "\\"):
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (prev.isspace() or prev in ";|&("):
            return line[:i]
        prev = ch
    return line


def logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if not line.strip():
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1].strip() + " "
            continue
        lines.append((pending + line.strip()).strip())
        pending = ""
    if pending.strip():
        lines.append(pending.strip())
    return lines


def _tokens(line: str) -> list[str]:
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = ""
        raw = list(lexer)
    except ValueError:  # an unbalanced quote (a here-doc, a string over several lines): split on blanks
        raw = line.split()
    # `$((a * b))` and `$(cmd | x)` are one word to the shell: join what shlex split inside them.
    out: list[str] = []
    depth = 0
    for token in raw:
        if depth > 0:
            out[-1] += " " + token
        else:
            out.append(token)
        if depth > 0 or "$(" in token:
            depth += token.count("(") - token.count(")")
    return out


def _value(value: str) -> str:
    return value.lower() if value.lower() in ("true", "false") else value


@dataclass(frozen=True)
class Item:
    kind: str   # env, var, arg, cmd
    key: str
    value: str | None = None

    @property
    def ident(self) -> tuple[str, str]:
        return (self.kind, self.key)

    def __str__(self) -> str:
        if self.kind == "cmd":
            return self.key
        text = self.key if self.value is None else f"{self.key}={self.value}"
        return f"export {text}" if self.kind == "env" else text


def items(text: str) -> set[Item]:
    found: set[Item] = set()
    for line in logical_lines(text):
        command: list[str] = []
        for token in [*_tokens(line), ";"]:
            if token not in SEPARATORS:
                command.append(token)
                continue
            found.update(_command_items(command))
            command = []
    return found


def _command_items(words: list[str]) -> list[Item]:
    if not words:
        return []
    out: list[Item] = []
    if words[0] == "export" or (words[0] in DECLARE and "-x" in words[1:2]):
        for word in words[1:]:
            if word.startswith("-"):
                continue
            m = ASSIGN.match(word)
            out.append(Item("env", m.group(1), _value(m.group(2))) if m else Item("env", word))
        return out
    if words[0] in DECLARE:
        words = [w for w in words[1:] if not w.startswith("-")]
    i = 0
    prefix: list[tuple[str, str]] = []
    while i < len(words) and (m := ASSIGN.match(words[i])):
        prefix.append((m.group(1), _value(m.group(2))))
        i += 1
    rest = words[i:]
    kind = "env" if rest else "var"
    # `NAME=(` opens a bash array: its words (often Hydra overrides, one a line) are taken as args below.
    out.extend(Item(kind, name, value) for name, value in prefix if not value.startswith("("))
    cmd: list[str] = []
    for word in rest:
        m = OVERRIDE.match(word)
        if m:
            out.append(Item("arg", m.group(2), _value(m.group(3))))
        elif word not in ("$@", "$*", "(", ")") and not ARRAY_EXPANSION.match(word):
            cmd.append(word)
    if cmd:
        out.append(Item("cmd", " ".join(cmd)))
    return out


# --------------------------------------------------------------------------------------------------- pairing

def is_npu_launcher(rel: str, text: str) -> bool:
    if NPU_PART.search(rel[:-3]):
        return True
    head = "\n".join(text.splitlines()[:5])
    return bool(NPU_CONTENT.search(head)) or bool(re.search(r"\btrainer\.device=['\"]?npu\b", text))


def name_twins(rel: str) -> list[str]:
    """GPU names an NPU launcher `rel` (relative, .sh) may have been copied from."""
    parts = rel.split("/")
    folders = [DIR_TWINS.get(p, p) for p in parts[:-1]]
    stem = parts[-1][:-3]
    stems = {re.sub(r"(?:[_\-.](?:npu|ascend)(?=[_\-.]|$))|(?:^(?:npu|ascend)[_\-.])", "", stem, flags=re.I)}
    out = []
    for folder in {"/".join(parts[:-1]), "/".join(folders)}:
        for s in stems:
            cand = f"{folder}/{s}.sh" if folder else f"{s}.sh"
            if cand != rel:
                out.append(cand)
    return sorted(set(out))


def entry_point(found: set[Item]) -> set[str]:
    """The modules (`-m verl.trainer.main_ppo`) and scripts (`x.py`) the launcher runs."""
    return {m.group(1) or m.group(2) for i in found if i.kind == "cmd" for m in ENTRY.finditer(i.key)}


def similarity(a: set[Item], b: set[Item]) -> float:
    ka = {i.ident for i in a if i.kind != "cmd"}
    kb = {i.ident for i in b if i.kind != "cmd"}
    return len(ka & kb) / len(ka | kb) if ka | kb else 0.0


@dataclass
class Pair:
    npu: str
    gpu: str
    how: str
    similarity: float = 0.0
    npu_only: list[str] = field(default_factory=list)
    npu_only_produced: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    changed_produced: list[str] = field(default_factory=list)
    gpu_kept: list[str] = field(default_factory=list)
    gpu_kept_kept: list[str] = field(default_factory=list)
    all_kept: list[str] = field(default_factory=list)
    all_kept_kept: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    recurring: list[str] = field(default_factory=list)
    recurring_produced: list[str] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)
    settings_produced: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # NPU-only items of the table's `leave` rows
    failed: str = ""
    npu_key: str = ""   # the NPU launcher compared, when not `npu` at HEAD: `path@commit` (--match history)


def _git(gitdir: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, text=True,
                          errors="replace").stdout


def copy_origin(gitdir: Path, rel: str, min_score: int) -> tuple[str, str, str, int, int] | None:
    """The commit where the NPU launcher `rel` was made as a copy (or rename) of a GPU launcher, by git's copy
    detection along `rel`'s history: (commit, GPU path, NPU path then, score, copies of NPU launchers on the
    way), or None."""
    log = _git(gitdir, "log", "--follow", "-M", "-C", "--format=%x00%H", "--name-status", "--", rel)
    hops = 0
    for block in log.split("\0")[1:]:
        commit, *rows = [r for r in block.splitlines() if r.strip()]
        for row in rows:
            status, *paths = row.split("\t")
            if status[0] in "CR" and len(paths) == 2:
                if not NPU_PART.search(paths[0][:-3]):
                    score = int(status[1:] or 0)
                    return (commit, paths[0], paths[1], score, hops) if score >= min_score else None
                hops += status[0] == "C"
            elif status == "A" and paths:
                # Added as new: ask for copies from every file of the parent, not only from files changed there.
                show = _git(gitdir, "show", "-C", "-C", "--find-copies-harder", "--name-status", "--format=", commit)
                for line in show.splitlines():
                    status, *pair = line.split("\t")
                    if status.startswith("C") and len(pair) == 2 and pair[1] == paths[0] \
                            and not NPU_PART.search(pair[0][:-3]):
                        score = int(status[1:] or 0)
                        return (commit, pair[0], pair[1], score, hops) if score >= min_score else None
                return None
    return None


def find_pairs(src: Path, match: str, min_similarity: float, gitdir: Path | None = None,
               min_score: int = 60) -> tuple[list[Pair], list[str], dict[str, set[Item]], dict[str, str]]:
    launchers: dict[str, str] = {}
    for path in sorted(src.rglob("*.sh")):
        if path.is_file() and not path.is_symlink():
            launchers[path.relative_to(src).as_posix()] = path.read_text(encoding="utf-8", errors="replace")
    npu = [rel for rel, text in launchers.items() if is_npu_launcher(rel, text)]
    gpu = [rel for rel in launchers if rel not in npu]
    parsed = {rel: items(text) for rel, text in launchers.items()}
    pairs: list[Pair] = []
    unpaired: list[str] = []
    ports: set[tuple[str, str]] = set()
    origins = {rel: copy_origin(gitdir, rel, min_score) for rel in npu} if match == "history" and gitdir else {}
    # Where several launchers lead to one port, it goes to the one renamed from it, not to a copy of a copy.
    for rel in sorted(npu, key=lambda r: origins[r][4] if origins.get(r) else 0):
        twin = next((c for c in name_twins(rel) if c in gpu), None)
        if twin:
            pairs.append(Pair(rel, twin, "name", similarity(parsed[rel], parsed[twin])))
            continue
        if origins:
            origin = origins[rel]
            # A launcher copied from another NPU launcher leads to that one's port: count each port once, and
            # measure the copy at HEAD instead.
            if origin and (f"{origin[1]}@{origin[0][:9]}^", f"{origin[2]}@{origin[0][:9]}") not in ports:
                commit, gpu_then, npu_then, score, _ = origin
                gkey, nkey = f"{gpu_then}@{commit[:9]}^", f"{npu_then}@{commit[:9]}"
                ports.add((gkey, nkey))
                launchers[gkey] = _git(gitdir, "show", f"{commit}^:{gpu_then}")
                launchers[nkey] = _git(gitdir, "show", f"{commit}:{npu_then}")
                parsed[gkey], parsed[nkey] = items(launchers[gkey]), items(launchers[nkey])
                pairs.append(Pair(rel, gkey, f"git C{score:03d} as {npu_then}", similarity(parsed[nkey], parsed[gkey]),
                                  npu_key=nkey))
                continue
        best: tuple[float, int, str] | None = None
        if match in ("nearest", "history"):
            entry = entry_point(parsed[rel])
            for cand in gpu:
                if entry and not entry & entry_point(parsed[cand]):
                    continue
                score = (similarity(parsed[rel], parsed[cand]),
                         int(cand.rsplit("/", 1)[0] == rel.rsplit("/", 1)[0]), cand)
                if best is None or score[:2] > best[:2]:
                    best = score
        if best and best[0] >= min_similarity:
            pairs.append(Pair(rel, best[2], f"~{best[0]:.2f}", best[0]))
        else:
            unpaired.append(rel if not best else f"{rel} (nearest {best[2]}, {best[0]:.2f})")
    pairs.sort(key=lambda p: p.npu)
    return pairs, unpaired, parsed, launchers


# ---------------------------------------------------------------------------------------------- conversion

def output_flag() -> tuple[str, list[str]]:
    """The option `convert` writes one file with today (`--out`, `--output` or `-o`) and the extra flags it
    accepts (`--no-cache`, `-q`)."""
    text = subprocess.run([sys.executable, "-m", "npu_port", "convert", "--help"], capture_output=True,
                          text=True, cwd=ROOT).stdout
    options = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))
    flag = next((f for f in ("--out", "--output", "-o") if f in options), "--out")
    extra = [f for f in ("--no-cache", "-q") if f in options]
    return flag, extra


def convert(gpu: Path, out: Path, flag: str, extra: list[str]) -> str:
    cmd = [sys.executable, "-m", "npu_port", "convert", str(gpu), "--target", "ascend", "--extras", flag,
           str(out), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if not out.is_file():
        return (done.stderr or done.stdout or f"exit {done.returncode}").strip().splitlines()[-1]
    return ""


# -------------------------------------------------------------------------------------------------- measure

def table_actions(path: Path = SETTINGS) -> dict[str, str]:
    """key -> action (add, leave) of the framework-settings table's rows."""
    table = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {row["key"]: row["action"] for section in ("verl_overrides", "env") for row in table.get(section, [])}


def compare(pair: Pair, g: set[Item], n: set[Item], o: set[Item], actions: dict[str, str] | None = None) -> None:
    gkeys = {i.ident for i in g}
    okeys = {i.ident for i in o}
    npu_only = sorted((i for i in n if i.ident not in gkeys), key=str)
    pair.npu_only = [str(i) for i in npu_only]
    pair.npu_only_produced = [str(i) for i in npu_only if i in o]
    actions = actions or {}
    pair.settings = [str(i) for i in npu_only if actions.get(i.key) == "add"]
    pair.settings_produced = [str(i) for i in npu_only if actions.get(i.key) == "add" and i in o]
    pair.left = [str(i) for i in npu_only if actions.get(i.key) == "leave"]
    changed = sorted((i for i in n if i.ident in gkeys and i not in g), key=str)
    pair.changed = [str(i) for i in changed]
    pair.changed_produced = [str(i) for i in changed if i in o]
    shared = sorted({i for i in n if i.ident in gkeys}, key=str)
    shared_keys = sorted({i.ident for i in shared})
    label = {i.ident: (i.key if i.kind != "env" else f"export {i.key}") for i in shared}
    pair.all_kept = [label[k] for k in shared_keys]
    pair.all_kept_kept = [label[k] for k in shared_keys if k in okeys]
    gpu_named = [k for k in shared_keys if k[0] != "cmd" and GPU_NAMED.search(k[1])]
    pair.gpu_kept = [label[k] for k in gpu_named]
    pair.gpu_kept_kept = [label[k] for k in gpu_named if k in okeys]
    pair.extras = sorted(str(i) for i in o if i not in g and i not in n)


def measure(src: Path, match: str, min_similarity: float, recurring: int, work: Path,
            gitdir: Path | None = None, min_score: int = 60) -> tuple[list[Pair], list[str]]:
    pairs, unpaired, parsed, texts = find_pairs(src, match, min_similarity, gitdir, min_score)
    flag, extra = output_flag()
    actions = table_actions()
    for k, pair in enumerate(pairs):
        gpu = work / "in" / f"{k:02d}" / Path(pair.gpu.split("@")[0]).name
        gpu.parent.mkdir(parents=True)
        gpu.write_text(texts[pair.gpu], encoding="utf-8")
        out = work / "out" / f"{k:02d}_{gpu.name}"
        pair.failed = convert(gpu, out, flag, extra)
        o = items(out.read_text(encoding="utf-8", errors="replace")) if not pair.failed else set()
        compare(pair, parsed[pair.gpu], parsed[pair.npu_key or pair.npu], o, actions)
    counts = Counter(item for p in pairs for item in set(p.npu_only))
    for pair in pairs:
        pair.recurring = [i for i in pair.npu_only if counts[i] >= recurring]
        pair.recurring_produced = [i for i in pair.npu_only_produced if counts[i] >= recurring]
    return pairs, unpaired


def ratio(x: int, y: int) -> str:
    return f"{x}/{y}" + (f" ({100 * x / y:.0f}%)" if y else "")


COLUMNS = [("npu-lines", "npu_only_produced", "npu_only"), ("recurring", "recurring_produced", "recurring"),
           ("settings", "settings_produced", "settings"),
           ("changed", "changed_produced", "changed"), ("gpu-kept", "gpu_kept_kept", "gpu_kept"),
           ("all-kept", "all_kept_kept", "all_kept")]


def totals(pairs: list[Pair]) -> dict[str, list[int]]:
    out = {name: [sum(len(getattr(p, x)) for p in pairs), sum(len(getattr(p, y)) for p in pairs)]
           for name, x, y in COLUMNS}
    out["extras"] = [sum(len(p.extras) for p in pairs)]
    out["left"] = [sum(len(p.left) for p in pairs)]
    return out


def missing_counts(pairs: list[Pair]) -> list[dict]:
    """The maintainers' items the outputs lack, most often missed first: `new` for an NPU-only item, `value`
    for a value they changed; with the pairs that miss it and the pairs whose NPU launcher has it so."""
    missed: Counter = Counter()
    have: Counter = Counter()
    for p in pairs:
        for tag, wanted, got in (("new", p.npu_only, p.npu_only_produced), ("value", p.changed, p.changed_produced)):
            have.update((i, tag) for i in set(wanted))
            missed.update((i, tag) for i in set(wanted) - set(got))
    return [{"item": i, "kind": tag, "pairs_missing": n, "pairs_with": have[(i, tag)]}
            for (i, tag), n in sorted(missed.items(), key=lambda kv: (-kv[1], kv[0][1], kv[0][0]))]


def show(pair: Pair) -> None:
    print(f"{pair.npu_key or pair.npu}  <-  {pair.gpu}  ({pair.how})")
    if pair.failed:
        print(f"  convert failed: {pair.failed}")
    sections = [
        ("NPU-only items produced", pair.npu_only_produced),
        ("NPU-only items missing", sorted(set(pair.npu_only) - set(pair.npu_only_produced))),
        ("changed values produced", pair.changed_produced),
        ("changed values missing", sorted(set(pair.changed) - set(pair.changed_produced))),
        ("kept keys lost by the output", sorted(set(pair.all_kept) - set(pair.all_kept_kept))),
        ("extras (in the output, in neither launcher)", pair.extras),
    ]
    for title, rows in sections:
        print(f"  {title}: {len(rows)}")
        for row in rows:
            print(f"    {row}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", type=Path, help="a verl checkout or snapshot (default: the mirror's)")
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--match", choices=["name", "nearest", "history"], default="nearest",
                        help="pair NPU launchers by name only, also with their nearest GPU launcher, or also with "
                             "the GPU launcher git's history says they were copied from (needs a git directory)")
    parser.add_argument("--min-score", type=int, default=60, help="--match history: least git copy score")
    parser.add_argument("--min-similarity", type=float, default=0.5)
    parser.add_argument("--recurring", type=int, default=3,
                        help="an NPU-only item counts as recurring when at least this many pairs have it")
    parser.add_argument("--top", type=int, default=15, help="most frequent missing NPU-only items to list")
    parser.add_argument("--show", metavar="PAIR", help="list the items of the pair whose NPU path contains PAIR")
    parser.add_argument("--keep", action="store_true", help="keep the export and the converted outputs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="npu-port-verl-pairs-"))
    commit = ""
    src = args.src
    gitdir: Path | None = None
    if src is None:
        gitdir = git_dir(args.mirror, MIRROR_STEM)
        if gitdir is None:
            print(f"no snapshot under {args.mirror}/{MIRROR_STEM} (fetch github:volcengine/verl)", file=sys.stderr)
            return 2
        src = work / "verl"
        commit = export(gitdir, src)
    elif (src / ".git").exists():
        gitdir = Path(subprocess.run(["git", "-C", str(src), "rev-parse", "--absolute-git-dir"],
                                     capture_output=True, text=True).stdout.strip())
        commit = _git(gitdir, "rev-parse", "HEAD").strip()
    (work / "out").mkdir()
    if args.match == "history" and gitdir is None:
        print("--match history needs a git directory: SRC a checkout, or the mirror's snapshot", file=sys.stderr)
        return 2
    try:
        pairs, unpaired = measure(src, args.match, args.min_similarity, args.recurring, work, gitdir,
                                  args.min_score)
    finally:
        if not args.keep:
            subprocess.run(["rm", "-rf", str(work)])
        else:
            print(f"export and outputs: {work}", file=sys.stderr)
    missing = missing_counts(pairs)
    if args.show:
        chosen = [p for p in pairs if args.show in p.npu]
        if not chosen:
            print(f"no pair's NPU launcher path contains {args.show!r}", file=sys.stderr)
            return 2
        for pair in chosen:
            show(pair)
        return 0
    if args.json:
        print(json.dumps({"commit": commit, "pairs": [asdict(p) for p in pairs], "unpaired": unpaired,
                          "totals": totals(pairs), "missing": missing}, indent=2))
        return 0
    if commit:
        print(f"verl {commit}")
    cols = ["npu launcher", "gpu launcher", "paired", *[c[0] for c in COLUMNS], "extras"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for p in pairs:
        cells = [p.npu, p.gpu, p.how + (" FAILED" if p.failed else ""),
                 *[ratio(len(getattr(p, x)), len(getattr(p, y))) for _, x, y in COLUMNS], str(len(p.extras))]
        print("| " + " | ".join(cells) + " |")
    tot = totals(pairs)
    print("| **total** | " + f"{len(pairs)} pairs | | "
          + " | ".join(ratio(*tot[name]) for name, _, _ in COLUMNS) + f" | {tot['extras'][0]} |")
    if unpaired:
        print(f"\nNPU launchers without a GPU twin ({len(unpaired)}):")
        for rel in unpaired:
            print(f"  {rel}")
    for kind, title in (("new", "the maintainers' NPU-only items"),
                        ("value", "values the maintainers changed (keys in both launchers)")):
        print(f"\n{title} most often missing from the outputs (pairs that miss it / pairs that"
              " have it):")
        for row in [r for r in missing if r["kind"] == kind][:args.top]:
            print(f"  {row['pairs_missing']:3d}/{row['pairs_with']:<3d} {row['item']}")
    left = Counter(i for p in pairs for i in set(p.left))
    print(f"\nNPU-only items the framework-settings table leaves alone on purpose ({sum(left.values())}; its `why`"
          " says why):")
    for item, n in left.most_common(args.top):
        print(f"  {n:3d} {item}")
    extras = Counter(i for p in pairs for i in set(p.extras))
    print("\nitems the tool added that the maintainers did not write (pairs):")
    for item, n in extras.most_common(args.top):
        print(f"  {n:3d} {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

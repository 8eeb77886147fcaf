"""The cache never decides an output on its own word: a truncated, corrupted, swapped or malformed entry
(or stat-index entry) is ignored, the file converted again and the entry rewritten, with one warning;
and a file name that is not UTF-8 passes through the cache and the summary."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bulk_support import CUDA_MODEL, PLAIN_MODULE, tree_digest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli

ROOT = Path(__file__).resolve().parent.parent
HUMAN = "import torch\nimport cupy\n\ndef f(x):\n    torch.cuda.set_device(0)\n    return x.cuda()\n"


def convert(*args):
    return CliRunner().invoke(cli, ["convert", *map(str, args)], catch_exceptions=False)


def _age(root: Path, seconds: int = 3600) -> None:
    """Files last modified long before any index is written: the stat index trusts them (no sleeping)."""
    then = time.time() - seconds
    for p in root.rglob("*"):
        if not p.is_symlink():
            os.utime(p, (then, then))


def _tree(root: Path) -> Path:
    """Every kind a run caches or skips, and none that fails (exit 0): converted, unchanged and
    skipped Python, shell, YAML, findings for a human, two files with the same bytes, and a hard link
    whose two names are of different languages (the same inode, so the same stat)."""
    src = root / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "scripts").mkdir()
    for i in range(4):
        (src / "pkg" / f"model_{i}.py").write_text(CUDA_MODEL.format(i=i))
        (src / "pkg" / f"util_{i}.py").write_text(PLAIN_MODULE.format(i=i))
        (src / "scripts" / f"run_{i}.sh").write_text(f"#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1\npython t.py {i}\n")
        (src / f"cfg_{i}.yaml").write_text(f"trainer:\n  device: cuda\n  steps: {i}\n")
    (src / "human.py").write_text(HUMAN)
    (src / "same.py").write_text(CUDA_MODEL.format(i=7))
    (src / "same_too.py").write_text(CUDA_MODEL.format(i=7))
    (src / "smi.sh").write_text("nvidia-smi\n")  # converted as shell; as Python, skipped by the prefilter
    os.link(src / "smi.sh", src / "smi.py")
    _age(src)
    return src


def _ok(result) -> None:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output


def _warnings(result) -> list[str]:
    assert "warning" not in result.stdout  # stdout may carry code: never a word about the cache
    return [line for line in result.stderr.splitlines() if line.startswith("warning:")]


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.glob("*/??/*") if p.is_file())


def _entry_of(cache: Path, rel: str) -> Path:
    found = [p for p in _entries(cache) if json.loads(p.read_bytes().partition(b"\n")[0])["rel"] == rel]
    assert len(found) == 1, rel
    return found[0]


def _index(cache: Path) -> Path:
    (found,) = cache.glob("*/stat-index.json")
    return found


@pytest.fixture
def tree(tmp_path):
    src = _tree(tmp_path)
    ref = tmp_path / "ref"
    _ok(convert(src, "--out", ref, "--no-cache"))
    assert b".npu()" in (ref / "pkg" / "model_0.py").read_bytes()
    return src, tree_digest(ref)


def test_a_truncated_entry_is_converted_again_and_rewritten(tmp_path, tree):
    src, want = tree
    cache = tmp_path / "cache"
    first = convert(src, "--out", tmp_path / "out1", "--cache-dir", cache)
    _ok(first)
    assert not _warnings(first)
    entry = _entry_of(cache, "pkg/model_0.py")
    good = entry.read_bytes()
    entry.write_bytes(good[:-7])  # the payload cut short: once written as the output itself

    second = convert(src, "--out", tmp_path / "out2", "--cache-dir", cache)
    _ok(second)
    assert tree_digest(tmp_path / "out2") == want
    assert _warnings(second) == [f"warning: 1 damaged cache entry was ignored and rebuilt in {cache}"]
    assert entry.read_bytes() == good  # rewritten

    third = convert(src, "--out", tmp_path / "out3", "--cache-dir", cache)
    _ok(third)
    assert not _warnings(third)
    assert tree_digest(tmp_path / "out3") == want


def test_a_truncated_entry_never_lands_over_the_source_in_place(tmp_path, tree):
    src, want = tree
    cache = tmp_path / "cache"
    originals = {p: p.read_bytes() for p in src.rglob("*") if p.is_file()}
    _ok(convert(src, "--in-place", "--force", "--cache-dir", cache))
    for p, data in originals.items():  # back to the sources the cache has entries for
        p.unlink()
        p.write_bytes(data)
    for rel in ("pkg/model_1.py", "scripts/run_2.sh"):
        entry = _entry_of(cache, rel)
        entry.write_bytes(entry.read_bytes()[:-3])

    again = convert(src, "--in-place", "--force", "--cache-dir", cache)
    _ok(again)
    assert len(_warnings(again)) == 1 and "2 damaged cache entries" in again.stderr
    got = tree_digest(src)
    assert {k: got[k] for k in want} == want
    assert b".npu()" in (src / "pkg" / "model_1.py").read_bytes()


def test_an_index_entry_moved_to_a_hard_link_of_another_language_is_not_trusted(tmp_path, tree):
    """smi.py and smi.sh share an inode, so their stats match: only the entry's seal, which binds it
    to its path, tells that the entry for smi.py (skipped) is not smi.sh's (converted)."""
    src, want = tree
    cache = tmp_path / "cache"
    _ok(convert(src, "--out", tmp_path / "out1", "--cache-dir", cache))
    index = _index(cache)
    doc = json.loads(index.read_bytes())
    files = doc["files"]
    assert files["smi.py"][4] == "skipped" and files["smi.sh"][4] != "skipped"
    files["smi.sh"] = files["smi.py"]
    index.write_text(json.dumps(doc))

    again = convert(src, "--out", tmp_path / "out2", "--cache-dir", cache)
    _ok(again)
    assert tree_digest(tmp_path / "out2") == want
    assert (tmp_path / "out2" / "smi.sh").read_text() == "npu-smi info\n"
    assert len(_warnings(again)) == 1


def _flip(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return b"x"
    i = rng.randrange(len(data))
    return data[:i] + bytes([data[i] ^ rng.randint(1, 255)]) + data[i + 1:]


INDEX_DAMAGE = ("truncate", "flip", "random", "swap", "malformed", "other-digest")
ENTRY_DAMAGE = ("truncate", "flip", "swap", "random")


def _mutate_index(cache: Path, rng: random.Random, kind: str) -> str:
    index = _index(cache)
    raw = index.read_bytes()
    if kind in ("swap", "malformed", "other-digest"):
        try:
            doc = json.loads(raw)
            files = doc["files"]
            a, b = rng.sample(sorted(files), 2)
            if kind == "swap":
                files[a], files[b] = files[b], files[a]
            elif kind == "other-digest":  # another file's digest under this file's stat and seal
                files[a] = files[a][:4] + [rng.choice(sorted({v[4] for v in files.values()} - {files[a][4]}))] \
                    + files[a][5:]
            else:
                files[a] = rng.choice([
                    "junk", None, 7, [], files[a][:4], files[a] + ["x"], [True] + files[a][1:],
                    [str(files[a][0])] + files[a][1:], files[a][:4] + ["not-a-digest"] + files[a][5:],
                    files[a][:4] + [files[a][4].upper()] + files[a][5:], files[a][:5] + [None],
                ])
            index.write_text(json.dumps(doc))
            return f"index {kind} {a} {b}"
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            kind = "truncate"  # already broken this round: break it further
    if kind == "truncate":
        raw = raw[:rng.randrange(len(raw))] if raw else raw
    elif kind == "flip":
        raw = _flip(raw, rng)
    else:
        raw = rng.randbytes(rng.randint(0, 200))
    index.write_bytes(raw)
    return f"index {kind}"


def _mutate_entry(cache: Path, rng: random.Random, kind: str) -> str:
    entries = _entries(cache)
    target = rng.choice(entries)
    data = target.read_bytes()
    if kind == "truncate":
        target.write_bytes(data[:rng.randrange(len(data))] if data else data)
    elif kind == "flip":
        target.write_bytes(_flip(data, rng))
    elif kind == "swap":  # another file's entry under this one's name
        target.write_bytes(rng.choice([p for p in entries if p != target]).read_bytes())
    else:
        target.write_bytes(rng.randbytes(rng.randint(0, 300)))
    return f"entry {kind} {target.name}"


def _state(cache: Path) -> tuple[dict[Path, bytes], bytes]:
    return {p: p.read_bytes() for p in _entries(cache)}, _index(cache).read_bytes()


def _index_files(raw: bytes) -> dict:
    """What the index says of each file, without its time and seals (a rewrite has a new time)."""
    return {rel: entry[:5] for rel, entry in json.loads(raw)["files"].items()}


def test_random_damage_to_entries_and_the_index_never_changes_an_output(tmp_path, tree):
    src, want = tree
    cache = tmp_path / "cache"
    _ok(convert(src, "--out", tmp_path / "cold", "--cache-dir", cache))
    assert tree_digest(tmp_path / "cold") == want
    rng = random.Random(1234)
    # Every kind of damage once, in an order of the seed's choosing, then kinds at random.
    plan = [(_mutate_index, k) for k in INDEX_DAMAGE] + [(_mutate_entry, k) for k in ENTRY_DAMAGE]
    rng.shuffle(plan)
    plan += [(_mutate_index, rng.choice(INDEX_DAMAGE)) if rng.random() < 0.35
             else (_mutate_entry, rng.choice(ENTRY_DAMAGE)) for _ in range(30 - len(plan))]
    done = 0
    for round_ in range(30):
        before = _state(cache)
        changes = []
        for _ in range(min(rng.randint(1, 3), 30 - done)):
            mutate, kind = plan[done + len(changes)]
            changes.append(mutate(cache, rng, kind))
        done += len(changes)
        damaged = _state(cache) != before
        out = tmp_path / f"out{round_}"
        result = convert(src, "--out", out, "--cache-dir", cache)
        _ok(result)
        assert tree_digest(out) == want, changes
        warned = _warnings(result)
        assert len(warned) <= 1, warned
        # Every entry has one valid form, so any change is damage; but a flipped byte can leave JSON
        # that still says the same (a space turned into a tab), which is no damage at all.
        if damaged and not any(" flip" in c for c in changes):
            assert len(warned) == 1, (changes, result.stderr)
        entries, index = _state(cache)
        assert entries == before[0], changes  # every entry rewritten as it was
        assert _index_files(index) == _index_files(before[1]), changes
        if done >= 30:
            break
    assert done == 30
    final = convert(src, "--out", tmp_path / "final", "--cache-dir", cache)
    _ok(final)
    assert not _warnings(final)
    assert tree_digest(tmp_path / "final") == want


@pytest.mark.parametrize("summary", ["summary.md", "summary.html"])
def test_a_file_name_that_is_not_utf8_goes_through_the_cache_and_the_summary(tmp_path, summary):
    src = tmp_path / "repo"
    src.mkdir()
    try:
        (src / os.fsdecode(b"bad\xff.py")).write_bytes(b"x = y.cuda()\n")
    except (OSError, UnicodeError):
        pytest.skip("this file system takes only UTF-8 names")
    (src / "good.py").write_bytes(b"x = y.cuda()\n")
    _age(src)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
    for run in ("cold", "warm"):  # the default cache (the user's): written, then read back
        proc = subprocess.run([sys.executable, "-m", "npu_port.transpiler", "convert", "repo", "--out", f"out-{run}",
                               "--summary", summary], cwd=tmp_path, env=env, capture_output=True, timeout=120)
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "warning" not in err
        converted = tmp_path / f"out-{run}" / os.fsdecode(b"bad\xff.py")
        assert converted.read_bytes() == b"x = y.to(\"npu\")\n"
        shown = (tmp_path / summary).read_text(encoding="utf-8")
        assert "repo/bad\\xff.py" in shown and "repo/good.py" in shown
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "npu-port"
    assert list(cache.glob("*/??/*"))
    index = next(cache.glob("*/stat-index.json"))
    assert os.fsdecode(b"bad\xff.py") in json.loads(index.read_bytes())["files"]

"""The cache is not an attack surface: an entry nobody but this user's runs could have written never
reaches an output, a cache planted in the tree or the current folder is neither read nor written, a
cache file that is a link, FIFO or device is damage (never a hang), and --cache-dir never prunes or
marks a folder the tool did not make."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_port.transpiler.bulk import cache as cache_module
from npu_port.transpiler.bulk.cache import user_cache_dir
from npu_port.transpiler.cli import cli

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "import torch\n\ndef f(x):\n    return x.cuda()\n"
EVIL = b"import os\nos.system('echo pwned')\n"


def convert(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI as a user runs it (its own process: a hang is a timeout, never a stuck test run)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "npu_port.transpiler", "convert", *map(str, args)],
                           cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _repo(tmp_path: Path) -> Path:
    src = tmp_path / "repo"
    (src / "pkg").mkdir(parents=True)
    for i in range(3):
        (src / "pkg" / f"m{i}.py").write_text(SOURCE)
    return src


def _forge(root: Path) -> int:
    """Every entry of the cache in `root` rewritten to claim the converted text is EVIL, sealed as the
    tool seals them but with a key that is not this user's (a repository that ships a cache, a copy
    from another machine, anyone who knows the format). Returns how many were forged."""
    forged = 0
    for entry in root.glob("*/??/*"):
        head = json.loads(entry.read_bytes().partition(b"\n")[0])
        head.pop("checksum")
        head.update(status="converted", changed=True, length=len(EVIL))
        head["checksum"] = cache_module._checksum(os.urandom(32), head, EVIL)
        entry.write_bytes(json.dumps(head, sort_keys=True).encode() + b"\n" + EVIL)
        forged += 1
    return forged


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_cache_planted_in_the_repository_or_the_current_folder_is_neither_read_nor_written(tmp_path):
    src = _repo(tmp_path)
    for planted in (tmp_path / ".npu-port-cache", src / ".npu-port-cache"):  # real entries, then forged
        assert convert(src, "--out", tmp_path / "seed", "--force", "--cache-dir", planted).returncode == 0
        assert _forge(planted) == 3
    before = {p: _snapshot(p) for p in (src / ".npu-port-cache", tmp_path / ".npu-port-cache")}
    for cwd in (tmp_path, src):
        out = tmp_path / f"out-{cwd.name}"
        proc = convert(src, "--out", out, cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        assert not any(b"os.system" in p.read_bytes() for p in out.rglob("*.py"))
        assert all(b'.to("npu")' in p.read_bytes() for p in out.rglob("*.py"))
    assert {p: _snapshot(p) for p in before} == before  # not written either
    assert list(user_cache_dir().glob("*/??/*"))  # the run's own cache is the user's


def test_a_forged_entry_in_a_named_cache_never_reaches_the_output(tmp_path):
    src = _repo(tmp_path)
    cache = tmp_path / "cache"
    assert convert(src, "--out", tmp_path / "first", "--cache-dir", cache).returncode == 0
    assert _forge(cache) == 3  # the forger rewrites this user's real entries
    proc = convert(src, "--out", tmp_path / "second", "--cache-dir", cache)
    assert proc.returncode == 0, proc.stderr
    assert not any(b"os.system" in p.read_bytes() for p in (tmp_path / "second").rglob("*.py"))
    assert _snapshot(tmp_path / "second") == _snapshot(tmp_path / "first")
    assert "damaged cache entries were ignored" in proc.stderr


def test_the_key_is_private_and_made_once(tmp_path):
    from npu_port.transpiler.bulk.cache import user_secret

    first, second = user_secret(), user_secret()
    assert first is not None and first == second and len(first) == 32
    key = user_cache_dir() / "secret.key"
    assert key.stat().st_mode & 0o777 == 0o600
    os.chmod(key, 0o644)  # readable by others: no longer a secret, so no cache is trusted with it
    assert user_secret() is None


@pytest.mark.parametrize("damage", ["index-to-dev-zero", "index-fifo", "entry-fifo", "entry-to-dev-zero"])
def test_a_cache_file_that_is_not_a_regular_file_is_damage_not_a_hang(tmp_path, damage):
    src = _repo(tmp_path)
    cache = tmp_path / "cache"
    first = convert(src, "--out", tmp_path / "first", "--cache-dir", cache)
    assert first.returncode == 0, first.stderr
    kind, how = damage.split("-", 1)
    (target,) = cache.glob("*/stat-index.json") if kind == "index" else list(cache.glob("*/??/*"))[:1]
    target.unlink()
    if how == "fifo":
        os.mkfifo(target)
    else:
        os.symlink("/dev/zero", target)
    proc = convert(src, "--out", tmp_path / "second", "--cache-dir", cache)  # bounded: the timeout fails it
    assert proc.returncode == 0, proc.stderr
    assert _snapshot(tmp_path / "second") == _snapshot(tmp_path / "first")
    assert "Traceback" not in proc.stderr


def test_cache_dir_never_prunes_or_marks_a_users_folder(tmp_path):
    src = _repo(tmp_path)
    mine = tmp_path / "mine"
    for name in ("0123456789abcdef0123456789abcdef", "deadbeefdeadbeefdeadbeefdeadbeef", "notes"):
        (mine / name).mkdir(parents=True)
        (mine / name / "keep.txt").write_text("mine\n")
    before = _snapshot(mine)
    proc = convert(src, "--out", tmp_path / "out", "--cache-dir", mine)
    assert proc.returncode == 2 and "not npu-port's cache" in proc.stderr
    assert _snapshot(mine) == before and sorted(p.name for p in mine.iterdir()) == sorted(
        ["0123456789abcdef0123456789abcdef", "deadbeefdeadbeefdeadbeefdeadbeef", "notes"])
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.py"))


def test_cache_dir_takes_an_empty_or_its_own_folder(tmp_path):
    src = _repo(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    for run in ("a", "b"):  # marked on the first run, recognised on the second
        proc = convert(src, "--out", tmp_path / run, "--cache-dir", empty)
        assert proc.returncode == 0, proc.stderr
    assert "npu-port" in (empty / "CACHEDIR.TAG").read_text()
    assert list(empty.glob("*/??/*"))
    link = tmp_path / "link"
    link.symlink_to(empty)
    proc = convert(src, "--out", tmp_path / "c", "--cache-dir", link)
    assert proc.returncode == 2 and "not a folder" in proc.stderr


def test_a_check_run_uses_the_same_private_cache(tmp_path, monkeypatch):
    src = _repo(tmp_path)
    monkeypatch.chdir(src)
    result = CliRunner().invoke(cli, ["check", "--output-format", "json", "."], catch_exceptions=False)
    assert json.loads(result.stdout)["findings"]
    assert not (src / ".npu-port-cache").exists()
    assert list(user_cache_dir().glob("*/??/*"))

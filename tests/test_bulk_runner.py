"""The runner's own promises: cache hits skip the workers, largest files go first, results come back
in input order, and the cheap pre-checks tell bad files apart without parsing them."""

from __future__ import annotations

import os
import time

import pytest
from bulk_support import CUDA_MODEL, PLAIN_MODULE

from npu_port.transpiler.bulk import runner
from npu_port.transpiler.bulk.cache import Cache, StatIndex, fingerprint
from npu_port.transpiler.bulk.runner import RunConfig, discover, run
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import bracket_depth_exceeds, python2_hint
from npu_port.transpiler.core.settings import Settings

SETTINGS = Settings(jobs=2)
SECRET = bytes(range(32))  # a cache key of the tests' own


def _tree(tmp_path):
    src = tmp_path / "repo"
    src.mkdir()
    for i in range(12):
        (src / f"m{i:02}.py").write_text(CUDA_MODEL.format(i=i) * (1 + i % 4))
        (src / f"p{i:02}.py").write_text(PLAIN_MODULE.format(i=i))
    return src


class _Recording:
    """An executor stand-in that converts in process and records the order files were given in."""

    def __init__(self, *args, **kwargs):
        from npu_port.transpiler.bulk.worker import convert_task

        self._convert = convert_task
        self.given, self._done = [], []

    def submit(self, task):
        self.given.append(task.display)
        self._done.append(self._convert(task, SETTINGS))

    def poll(self, wait_s):
        done, self._done = self._done, []
        return done

    def pending(self):
        return len(self._done)

    def current(self):
        return None

    def close(self):
        pass


def test_warm_cache_answers_every_parsed_file_without_a_worker(tmp_path, monkeypatch):
    src = _tree(tmp_path)
    files = list(discover([src]))
    rules = Engine(SETTINGS).rules
    cache_root = tmp_path / "cache"
    cold = run(files, SETTINGS, lambda s, c, o: None, rules, RunConfig(cache=Cache(cache_root, SECRET)))
    parsed = [o for o in cold.outcomes if o.status in ("converted", "unchanged")]
    assert len(parsed) == 12 and cold.cache_hits == 0

    def no_workers(*args, **kwargs):
        raise AssertionError("a warm run must not need a worker")

    monkeypatch.setattr(runner, "ProcessExecutor", no_workers)
    got = {}
    warm = run(files, SETTINGS, lambda s, c, o: got.__setitem__(s.display, c.output), rules,
               RunConfig(cache=Cache(cache_root, SECRET)))
    assert warm.cache_hits == 12
    assert [(o.path, o.status, o.findings) for o in warm.outcomes] == \
        [(o.path, o.status, o.findings) for o in cold.outcomes]
    for f in files:
        ref = Engine(SETTINGS).convert(f.path.read_bytes(), f.display)
        assert got[f.display] == ref.output


def test_other_settings_or_rules_miss_the_cache(tmp_path):
    rules = Engine(SETTINGS).rules
    base = fingerprint(SETTINGS, rules)
    assert fingerprint(Settings(jobs=1), rules) == base  # parallelism never changes a result
    assert fingerprint(Settings(target="ascend", extras=True), rules) != base
    assert fingerprint(SETTINGS, rules[:-1]) != base


def _age(root, seconds=3600):
    for p in root.rglob("*"):
        os.utime(p, (time.time() - seconds, time.time() - seconds))


def test_a_rerun_reads_only_the_files_whose_metadata_changed(tmp_path, monkeypatch):
    import builtins

    src = _tree(tmp_path)
    _age(src)
    files = list(discover([src]))
    rules = Engine(SETTINGS).rules
    cache_root = tmp_path / "cache"
    cold = run(files, SETTINGS, lambda s, c, o: None, rules, RunConfig(cache=Cache(cache_root, SECRET)))

    changed = src / "p03.py"
    changed.write_text(PLAIN_MODULE.format(i=3) + "x = torch.zeros(1).cuda()\n")
    os.utime(changed, (time.time() - 1800, time.time() - 1800))
    reads = []

    def counting_open(path, *args, **kwargs):
        reads.append(str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(runner, "open", counting_open, raising=False)
    monkeypatch.setattr(runner, "ProcessExecutor", _Recording)
    warm = run(files, SETTINGS, lambda s, c, o: None, rules, RunConfig(cache=Cache(cache_root, SECRET)))
    with_news = {o.path for o in cold.outcomes if o.findings or o.status == "converted"}
    assert set(reads) == with_news | {str(changed)}  # the changed file, and the bytes behind reports
    assert [o.status for o in warm.outcomes if o.path != str(changed)] == \
        [o.status for o in cold.outcomes if o.path != str(changed)]
    assert next(o for o in warm.outcomes if o.path == str(changed)).status == "converted"


def test_a_file_modified_just_before_the_index_was_written_is_read_again(tmp_path, monkeypatch):
    import builtins

    src = _tree(tmp_path)
    files = list(discover([src]))
    rules = Engine(SETTINGS).rules
    # The index is written within its racy window of the files' last change, however long the run takes.
    last_change = max(f.path.stat().st_mtime_ns for f in files)
    monkeypatch.setattr(StatIndex, "clock", staticmethod(lambda: last_change + StatIndex.RACY_NS // 2))
    run(files, SETTINGS, lambda s, c, o: None, rules, RunConfig(cache=Cache(tmp_path / "cache", SECRET)))
    reads = []
    monkeypatch.setattr(runner, "open", lambda p, *a, **k: reads.append(p) or builtins.open(p, *a, **k),
                        raising=False)
    run(files, SETTINGS, lambda s, c, o: None, rules, RunConfig(cache=Cache(tmp_path / "cache", SECRET)))
    assert len(reads) >= len(files)


def test_a_run_keeps_only_the_most_recently_used_fingerprint_folders(tmp_path):
    from npu_port.transpiler.bulk.cache import KEEP_FINGERPRINTS

    src = _tree(tmp_path)
    cache_root = tmp_path / "cache"
    old = [cache_root / f"{i:032x}" for i in range(KEEP_FINGERPRINTS + 2)]
    for age, folder in enumerate(old):
        folder.mkdir(parents=True)
        os.utime(folder, (1_000_000 + age, 1_000_000 + age))  # old[-1] the most recent
    mine = cache_root / "notes"  # not a fingerprint: never touched
    mine.mkdir()
    rules = Engine(SETTINGS).rules
    run(list(discover([src])), SETTINGS, lambda s, c, o: None, rules, RunConfig(cache=Cache(cache_root, SECRET)))
    kept = sorted(p.name for p in cache_root.iterdir() if p.is_dir())
    used = fingerprint(SETTINGS, rules)
    assert kept == sorted([used, "notes", *(f.name for f in old[-(KEEP_FINGERPRINTS - 1):])])


def test_largest_files_go_first_and_results_come_back_in_input_order(tmp_path, monkeypatch):
    src = _tree(tmp_path)
    files = list(discover([src]))
    recorder = _Recording()
    monkeypatch.setattr(runner, "ProcessExecutor", lambda *a, **k: recorder)
    monkeypatch.setattr(runner, "INLINE_MAX_BYTES", 0)  # a pool from the first file on
    handed = []
    result = run(files, SETTINGS, lambda s, c, o: handed.append(s.display), config=RunConfig(ordered=True))
    sizes = [next(f for f in files if f.display == d).path.stat().st_size for d in recorder.given]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == 12
    assert handed == [f.display for f in files] == [o.path for o in result.outcomes]


def _no_pool(*args, **kwargs):
    raise AssertionError("a small run must not start a worker pool")


def test_a_small_run_converts_in_this_process_with_the_same_results(tmp_path, monkeypatch):
    src = _tree(tmp_path)
    files = list(discover([src]))
    pooled = {}
    monkeypatch.setattr(runner, "ProcessExecutor", lambda *a, **k: _Recording())
    monkeypatch.setattr(runner, "INLINE_MAX_BYTES", 0)
    run(files, SETTINGS, lambda s, c, o: pooled.__setitem__(s.display, (c.outcome, c.output)))
    monkeypatch.undo()
    monkeypatch.setattr(runner, "ProcessExecutor", _no_pool)
    inline = {}
    result = run(files, SETTINGS, lambda s, c, o: inline.__setitem__(s.display, (c.outcome, c.output)))
    assert inline == pooled and len([o for o in result.outcomes if o.status == "converted"]) == 12


def test_a_run_past_the_inline_bound_hands_every_file_to_the_pool_largest_first(tmp_path, monkeypatch):
    src = _tree(tmp_path)
    files = list(discover([src]))
    recorder = _Recording()
    monkeypatch.setattr(runner, "ProcessExecutor", lambda *a, **k: recorder)
    largest = sorted((f.path.stat().st_size for f in files if f.path.name.startswith("m")), reverse=True)
    monkeypatch.setattr(runner, "INLINE_MAX_BYTES", sum(largest[:3]))  # the fourth file to parse starts the pool
    run(files, SETTINGS, lambda s, c, o: None)
    sizes = [next(f for f in files if f.display == d).path.stat().st_size for d in recorder.given]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == 12


@pytest.mark.parametrize("depth,flagged", [(50, False), (200, False), (201, True), (3000, True)])
def test_bracket_depth_precheck(depth, flagged):
    assert bracket_depth_exceeds(b"x = " + b"(" * depth + b"1" + b")" * depth + b"\n") is flagged


def test_brackets_in_strings_do_not_count():
    assert not bracket_depth_exceeds(b"x = '" + b"(" * 500 + b"'\n# " + b"[" * 500 + b"\n")


def test_python2_hint():
    assert "print statement" in python2_hint(b"print 'hello'\n")
    assert "except X, e" in python2_hint(b"try:\n    pass\nexcept ValueError, e:\n    pass\n")
    assert python2_hint(b"print('hello')\nprint (x)\n") is None


def test_progress_is_a_bar_on_a_terminal_plain_lines_in_logs_and_nothing_when_quiet():
    import io

    from rich.console import Console

    from npu_port.transpiler.output.progress import BarReporter, LineReporter, Reporter, reporter_for

    assert isinstance(reporter_for(Console(file=io.StringIO(), force_terminal=True), quiet=False), BarReporter)
    assert type(reporter_for(Console(file=io.StringIO(), force_terminal=True), quiet=True)) is Reporter
    log = io.StringIO()
    console = Console(file=log, force_terminal=False, width=200)
    assert isinstance(reporter_for(console, quiet=False), LineReporter)
    lines = LineReporter(console, interval=0)
    lines.start(3)
    for name in ("a.py", "b.py", "c.py"):
        lines.advance(name)
    text = log.getvalue()
    assert "1/3 files (33%)" in text and "2/3 files" in text and "at b.py" in text
    assert "3/3" not in text  # the summary follows instead


def test_the_default_cache_is_the_users_and_never_in_an_input_tree_or_the_current_folder(tmp_path, monkeypatch):
    src = tmp_path / "repo"
    src.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for here in (tmp_path, src):
        monkeypatch.chdir(here)
        cache = Cache.open(None, [src])
        assert cache is not None and cache.root == tmp_path / "xdg" / "npu-port"
        assert (cache.root.stat().st_mode & 0o777) == 0o700
    assert not list(tmp_path.glob("**/.npu-port-cache"))
    # The user's cache folder inside the tree being converted: no cache rather than one in the tree.
    monkeypatch.setenv("XDG_CACHE_HOME", str(src / ".cache"))
    assert Cache.open(None, [src]) is None

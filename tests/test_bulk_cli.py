"""`convert` over a generated repository of every odd kind of file: the input untouched, the output
right file by file, --jobs 1 and 2 identical, the cache hit path, a second run on the output idle,
and crashes, hangs and rule bugs confined to their file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from bulk_support import EXPECTED_FAILURES, HAZARD_FAILURES, SMALL_MAX_BYTES, HazardRule, build_tree, tree_digest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core import registry
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import language_of
from npu_port.transpiler.core.settings import Settings


def convert(*args: str):
    result = CliRunner().invoke(cli, ["convert", *args], catch_exceptions=False)
    return result


def _report(path: Path) -> dict:
    return json.loads(path.read_text())


def _failed_names(report: dict) -> set[str]:
    return {Path(e["file"]).name for e in report["errors"]}


def _expected_failures() -> set[str]:
    langs = {r.LANGUAGE for r in registry.select_rules()}
    return {n for n in EXPECTED_FAILURES if language_of(n) in langs or n == "pipe.py"}


def _reference(data: bytes, name: str) -> bytes:
    """What the engine alone makes of one file: the runner must reproduce it exactly."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20000)  # as in the workers, for chain.py
    try:
        result = Engine(Settings(max_bytes=SMALL_MAX_BYTES)).convert(data, name, language_of(name, data[:128]))
    finally:
        sys.setrecursionlimit(limit)
    return result.output if result.output is not None else data


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The tree, converted once cold with two workers; the tests below read it."""
    root = tmp_path_factory.mktemp("bulk")
    src = build_tree(root, copies=60, hazards=False)
    before = tree_digest(src)
    out = root / "out"
    result = convert(str(src), "--out", str(out), "-j", "2", "--max-bytes", str(SMALL_MAX_BYTES),
                     "--cache-dir", str(root / "cache"), "--report", str(root / "report.json"))
    return root, src, out, before, result


def test_input_tree_is_never_modified(converted):
    root, src, out, before, result = converted
    assert tree_digest(src) == before
    assert len([k for k, v in before.items() if v != "dir"]) > 300


def test_bad_files_fail_alone_and_the_exit_code_says_so(converted):
    root, src, out, before, result = converted
    assert result.exit_code == 1, result.output
    report = _report(root / "report.json")
    assert _failed_names(report) == _expected_failures()
    errors = {Path(e["file"]).name: e["error"] for e in report["errors"]}
    assert "Python 2" in errors["py2.py"]
    assert "NUL" in errors["binary.py"]
    assert "too large" in errors["toolarge.py"]
    assert "nested too deeply" in errors["deep.py"]
    assert "not a regular file" in errors["pipe.py"]
    assert "UTF-8" in errors["bad_utf8.py"]
    assert "4 failed" not in result.output and "failed" in result.output


def test_output_is_the_engine_result_file_by_file(converted):
    root, src, out, before, result = converted
    got = tree_digest(out)
    failed = _expected_failures()
    for rel, what in before.items():
        p, q = src / rel, out / rel
        if what == "special":
            assert rel not in got, "a FIFO must not be copied"
        elif what.startswith("link:"):
            assert got[rel] == what, "links are copied as links, not followed"
        elif what != "dir":
            mode = what.split(":")[0]
            assert got[rel].split(":")[0] == mode, f"{rel}: mode not kept"
            data = p.read_bytes()
            want = data if p.name in failed else _reference(data, rel)
            assert q.read_bytes() == want, rel
    assert not any(k.startswith("pkg/loop/") or k.startswith("outside_dir/") for k in got)
    # Spot checks independent of the engine: the long chain converted in a worker, CRLF and BOM kept.
    assert b".npu()" in (out / "chain.py").read_bytes()
    crlf = (out / "crlf.py").read_bytes()
    assert b".npu()" in crlf and crlf.count(b"\n") == crlf.count(b"\r\n")
    assert (out / "bom.py").read_bytes().startswith(b"\xef\xbb\xbf")
    assert (out / "latin1.py").read_bytes() == _reference((src / "latin1.py").read_bytes(), "latin1.py")


def test_jobs_1_and_warm_cache_give_the_same_tree(converted):
    root, src, out, before, result = converted
    serial = root / "serial"
    r1 = convert(str(src), "--out", str(serial), "-j", "1", "--max-bytes", str(SMALL_MAX_BYTES), "--no-cache")
    assert r1.exit_code == 1
    assert tree_digest(serial) == tree_digest(out)
    warm = root / "warm"
    r2 = convert(str(src), "--out", str(warm), "-j", "2", "--max-bytes", str(SMALL_MAX_BYTES),
                 "--cache-dir", str(root / "cache"))
    assert r2.exit_code == 1
    assert list((root / "cache").rglob("*/*/*"))  # entries: the hit path itself is tested in test_bulk_runner
    assert tree_digest(warm) == tree_digest(out)
    assert not (src / ".npu-port-cache").exists()


def test_a_second_run_on_the_output_changes_nothing(converted):
    root, src, out, before, result = converted
    again = root / "again"
    r = convert(str(out), "--out", str(again), "--max-bytes", str(SMALL_MAX_BYTES), "--no-cache",
                "--report", str(root / "again.json"))
    report = _report(root / "again.json")
    assert not [f for f in report["findings"] if f["kind"] == "change"], r.output
    assert tree_digest(again) == tree_digest(out)


class SpinRule(HazardRule):
    """Test-only rule: spends CPU without end where a file names its marker (HazardRule's hang sleeps)."""

    ID = "test-spin"
    TRIGGERS = ("SPIN_HERE",)

    def visit_Name(self, node) -> None:
        while node.value == "SPIN_HERE":
            pass


@pytest.fixture
def with_hazard_rule(monkeypatch):
    from npu_port.transpiler.bulk import runner

    real = registry.all_rules()
    monkeypatch.setattr(registry, "all_rules", lambda: {**real, HazardRule.ID: HazardRule, SpinRule.ID: SpinRule})
    monkeypatch.setattr(runner, "INLINE_MAX_BYTES", 0)  # workers even for this small tree: a crash costs one


@pytest.mark.slow  # waits out a hang's timeout
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_crash_a_hang_and_a_rule_bug_cost_one_file_each(tmp_path, with_hazard_rule, jobs):
    src = tmp_path / "repo"
    src.mkdir()
    markers = {"crash.py": "CRASH_HERE", "hang.py": "HANG_HERE", "raises.py": "RAISE_HERE", "spin.py": "SPIN_HERE"}
    for name, marker in markers.items():
        (src / name).write_text(f"import torch\n{marker} = torch.ones(1).cuda()\n")
    for i in range(6):
        (src / f"ok_{i}.py").write_text(f"import torch\nx{i} = torch.ones(1).cuda()\n")
    out = tmp_path / "out"
    r = convert(str(src), "--out", str(out), "-j", jobs, "--timeout", "1", "--no-cache",
                "--select", f"tensor-cuda-method,{HazardRule.ID},{SpinRule.ID}",
                "--report", str(tmp_path / "r.json"))
    assert r.exit_code == 1, r.output
    errors = {Path(e["file"]).name: e["error"] for e in _report(tmp_path / "r.json")["errors"]}
    assert set(errors) == HAZARD_FAILURES | {"spin.py"}
    assert "SIGSEGV" in errors["crash.py"]
    # --timeout counts CPU time; a file that waits without using any gets four times that in wall time.
    assert errors["spin.py"].startswith("timed out after 1s of CPU time")
    assert errors["hang.py"].startswith("timed out: no result after 4s of wall-clock time")
    assert "ValueError: a rule bug" in errors["raises.py"]
    for i in range(6):
        assert (out / f"ok_{i}.py").read_text() == f"import torch\nx{i} = torch.ones(1).npu()\n"
    for name in [*HAZARD_FAILURES, "spin.py"]:
        assert (out / name).read_bytes() == (src / name).read_bytes()


def test_the_cpu_limit_and_the_wall_allowance_hold_in_this_process_too(with_hazard_rule):
    from npu_port.transpiler.bulk.executors import InlineExecutor
    from npu_port.transpiler.bulk.worker import Task

    settings = Settings(select=(SpinRule.ID,))
    inline = InlineExecutor([(settings, [SpinRule])], timeout=0.2)
    inline.submit(Task(0, "spin.py", "spin.py", "python", data=b"SPIN_HERE = 1\n"))
    (result,) = inline.poll(0)
    assert result.outcome.status == "failed" and result.outcome.error.startswith("timed out after 0.2s of CPU time")
    assert result.digest is None  # never cached: a later run tries again

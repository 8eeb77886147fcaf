"""`npu-port check`: findings, exit codes, --strict, --statistics, policy flags and the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from check_fakes import GPU_SOURCE, fake_rules  # noqa: F401 (fixture)
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings


def run_cli(*args: str, cwd: Path | None = None):
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(cli, list(args), catch_exceptions=False)
    with runner.isolated_filesystem(temp_dir=cwd):
        return runner.invoke(cli, list(args), catch_exceptions=False)


FAKES = ("--select", "test-cuda-sync,test-triton")  # only the test doubles: exact results stay stable


def check_json(*args: str) -> tuple[int, dict]:
    result = run_cli("check", "--isolated", "--output-format", "json", *args)
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture
def gpu_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(GPU_SOURCE, encoding="utf-8")
    return path


def test_every_change_convert_would_make_is_an_error_with_its_fix(fake_rules, gpu_file):
    code, doc = check_json(*FAKES, str(gpu_file))
    assert code == 1
    changes = [f for f in doc["findings"] if f["kind"] == "change"]
    assert [(f["rule"], f["line"], f["col"], f["severity"]) for f in changes] == [("test-cuda-sync", 6, 5, "error")]
    assert changes[0]["fix"] == "becomes: torch.npu.synchronize()"
    # What convert reports but cannot change stays a warning, with its hint.
    warnings = [f for f in doc["findings"] if f["severity"] == "warning"]
    assert [(f["rule"], f["line"], f["hint"]) for f in warnings] == [
        ("test-triton", 2, "use torch_npu fused operators")]
    # check never modifies its input
    assert gpu_file.read_text(encoding="utf-8") == GPU_SOURCE


def test_check_errors_are_exactly_the_changes_convert_makes(fake_rules, gpu_file):
    engine = Engine(Settings())
    converted = engine.convert(gpu_file.read_bytes(), str(gpu_file))
    want = sorted((f.line, f.col, f.rule) for f in converted.outcome.changes)
    _, doc = check_json(str(gpu_file))  # every default rule, fakes included
    got = sorted((f["line"], f["col"], f["rule"]) for f in doc["findings"] if f["kind"] == "change")
    assert got == want and want


def test_converted_file_passes(fake_rules, gpu_file, tmp_path):
    out = tmp_path / "out.py"
    assert run_cli("convert", "--isolated", *FAKES, str(gpu_file), "--out", str(out)).exit_code == 0
    code, doc = check_json(*FAKES, str(out))
    assert code == 0
    assert doc["summary"]["errors"] == 0 and doc["summary"]["warnings"] == 1


def test_exit_0_when_clean(tmp_path):
    path = tmp_path / "clean.py"
    path.write_text("import torch\nx = torch.zeros(3)\n", encoding="utf-8")
    result = run_cli("check", "--isolated", str(path))
    assert result.exit_code == 0, result.output
    assert "passed" in result.stdout


def test_exit_1_on_error_and_text_report_groups_by_file_with_source(tmp_path):
    path = tmp_path / "serve.py"
    path.write_text("from vllm import LLM\nllm = LLM(model='m', npu_memory_utilization=0.8)\n", encoding="utf-8")
    result = run_cli("check", "--isolated", str(path))
    assert result.exit_code == 1
    out = result.stdout
    assert out.splitlines()[0] == str(path)
    assert "2:22  error  unknown-framework-arg" in out
    assert "2 | llm = LLM(model='m', npu_memory_utilization=0.8)" in out
    assert "fix: use `gpu_memory_utilization`" in out


def test_strict_makes_warnings_count(fake_rules, tmp_path):
    path = tmp_path / "k.py"
    path.write_text("import triton\n", encoding="utf-8")
    assert run_cli("check", "--isolated", *FAKES, str(path)).exit_code == 0
    assert run_cli("check", "--isolated", *FAKES, "--strict", str(path)).exit_code == 1


@pytest.mark.parametrize("args", [
    ["check", "/no/such/file.py"],
    ["check", "--isolated", "--select", "no-such-rule", "."],
    ["check", "--isolated", "--output-format", "xml", "."],
    ["check"],
    ["check", "--isolated", "--summary", "out.txt", "."],
])
def test_exit_2_on_usage_errors(args):
    result = run_cli(*args)
    assert result.exit_code == 2, result.output


def test_exit_2_on_internal_error(fake_rules, gpu_file, monkeypatch):
    from check_fakes import FakeCudaSynchronize

    def boom(self, original, updated):
        raise RuntimeError("rule bug")

    monkeypatch.setattr(FakeCudaSynchronize, "leave_Attribute", boom)
    result = run_cli("check", "--isolated", *FAKES, str(gpu_file))
    assert result.exit_code == 2
    assert "internal error: RuntimeError: rule bug" in result.stderr


def test_unparsable_file_is_an_error_not_a_crash(tmp_path):
    # The prefilter never parses a file no rule has a trigger in, so the broken file names vLLM.
    good = tmp_path / "good.py"
    good.write_text("x = 1\n", encoding="utf-8")
    bad = tmp_path / "bad.py"
    bad.write_text("from vllm import LLM\nLLM(device=\n", encoding="utf-8")
    code, doc = check_json(str(tmp_path))
    assert code == 1 and doc["errors"][0]["file"] == str(bad) and "syntax error" in doc["errors"][0]["error"]


def test_policy_flags(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from . import sibling\nimport agentic_rl\n", encoding="utf-8")
    assert check_json(str(path))[0] == 0  # off unless asked for
    code, doc = check_json("--forbid", "agentic_rl,opencode", "--no-relative", str(path))
    assert code == 1
    assert [(f["line"], f["rule"]) for f in doc["findings"]] == [(1, "relative-import"), (2, "forbidden-import")]


def test_statistics_counts_per_rule(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("python -m verl.trainer.main_ppo trainer.n_npus_per_node=8 actor_rollout_ref.rollout.npu_memory_utilization=1\n")
    result = run_cli("check", "--isolated", "--statistics", str(path))
    assert result.exit_code == 1
    row = next(l for l in result.stdout.splitlines() if "unknown-framework-arg-sh" in l and "error" in l
               and "│" in l)
    assert row.split("│")[1].strip() == "2"
    _, doc = check_json("--statistics", str(path))
    assert doc["summary"]["statistics"] == [
        {"rule": "unknown-framework-arg-sh", "severity": "error", "count": 2, "fixable": 0}]


def test_ignore_comment_silences_a_check_rule(tmp_path):
    path = tmp_path / "serve.py"
    path.write_text("from vllm import LLM\nLLM(model='m', npu_memory_utilization=0.8)  # npu-port: ignore[unknown-framework-arg]\n")
    assert run_cli("check", "--isolated", str(path)).exit_code == 0


def test_summary_markdown_and_html(fake_rules, gpu_file, tmp_path):
    md, page = tmp_path / "summary.md", tmp_path / "summary.html"
    run_cli("check", "--isolated", *FAKES, "--summary", str(md), str(gpu_file))
    text = md.read_text()
    # check writes nothing: the summary says what would change, in the words convert --check uses
    assert "1 would change;" in text and "## Files that would change" in text
    assert f"- `{gpu_file}`: 1 changes" in text
    assert "| `test-cuda-sync` | 1 |" in text
    assert "### `test-triton`" in text and f"`{gpu_file}:2:1` warning" in text
    run_cli("convert", "--isolated", *FAKES, "--summary", str(page), "--diff", str(gpu_file))
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<code>test-cuda-sync</code></td><td>1</td>" in html
    assert "<h2>Files that would change</h2>" in html  # --diff writes nothing either


def test_no_cache_leaves_no_cache_folder_and_finds_the_same(fake_rules, tmp_path, monkeypatch):
    tree = tmp_path / "proj"
    tree.mkdir()
    (tree / "train.py").write_text(GPU_SOURCE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "xdg" / "npu-port"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache.parent))  # a cached run writes the user's cache folder
    args = ["check", "--isolated", "--output-format", "json", *FAKES, str(tree)]
    plain = run_cli(*args, "--no-cache")
    assert not cache.exists()
    cached = run_cli(*args)
    assert list(cache.glob("*/??/*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj", "xdg"]
    assert plain.exit_code == cached.exit_code == 1
    assert json.loads(plain.stdout)["findings"] == json.loads(cached.stdout)["findings"]


def _edited(lines: list[str], rng) -> list[str]:
    """`lines` with a few rewritten in place: to new text, to another line of the file, to a blank."""
    out = list(lines)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(out))
        out[i] = rng.choice([out[i] + "  # npu", out[i].replace("cuda", "npu").replace("self", "me"),
                             rng.choice(lines), "x = 1", "", out[i - 1]])
    return out


def test_line_opcodes_are_difflibs_on_in_place_rewrites():
    """check's fix texts come from a line diff; lines rewritten in place are diffed without difflib's
    matcher where its answer is certain. Both must agree, and the short path must be taken."""
    import difflib
    import random

    from npu_port.transpiler.check import _line_opcodes

    rng = random.Random(7)
    sources = [p.read_text(encoding="utf-8").splitlines() for p in sorted(Path(__file__).parent.glob("test_*.py"))]
    for lines in sources:
        for _ in range(4):
            after = _edited(lines, rng)
            assert _line_opcodes(lines, after) == difflib.SequenceMatcher(None, lines, after, autojunk=False).get_opcodes()
    # the diagonal case: the matcher is not asked at all
    lines = sources[0]
    after = [line.replace("import", "import  ") for line in lines]
    real = difflib.SequenceMatcher(None, lines, after, autojunk=False).get_opcodes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(difflib, "SequenceMatcher", None)
        assert _line_opcodes(lines, after) == real

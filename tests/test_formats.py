"""The report formats of `check`: JSON (documented schema), SARIF 2.1.0 (validated against the
official schema), GitHub workflow annotations and text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from check_fakes import GPU_SOURCE, fake_rules  # noqa: F401 (fixture)
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.report import REPORT_SCHEMA_VERSION

DATA = Path(__file__).resolve().parent / "data"
DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(GPU_SOURCE, encoding="utf-8")
    (tmp_path / "run.sh").write_text("vllm serve m --npu-memory-utilization 0.9\n", encoding="utf-8")
    (tmp_path / "with space.py").write_text("from vllm import LLM\nLLM(npu_memory_utilization=0.5)\n", encoding="utf-8")
    (tmp_path / "broken.py").write_text("from vllm import LLM\nLLM(npu_memory_utilization=\n", encoding="utf-8")
    return tmp_path


def _check(fmt: str, path: Path):
    select = ["--select", "test-cuda-sync,test-triton,check"]  # test doubles and the check rules
    result = CliRunner().invoke(cli, ["check", "--isolated", *select, "--output-format", fmt, str(path)],
                                catch_exceptions=False)
    assert result.exit_code == 1
    return result.stdout


def sarif_validator() -> jsonschema.Draft202012Validator:
    # Not jsonschema.validate(): that first checks the schema against its meta-schema, and the
    # published SARIF schema fails it (an `anyOf` sits inside region's `properties`), which only
    # matters for a property literally named "anyOf".
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def test_sarif_is_valid_against_the_sarif_2_1_0_schema(fake_rules, project):
    doc = json.loads(_check("sarif", project))
    sarif_validator().validate(doc)
    run = doc["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    results = run["results"]
    assert {r["ruleId"] for r in results} == set(rules)
    assert all(rules[r["ruleIndex"]] == r["ruleId"] for r in results)
    change = next(r for r in results if r["ruleId"] == "test-cuda-sync")
    assert change["level"] == "error"
    region = change["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (6, 5)
    replacement = change["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert replacement["deletedRegion"] == {"startLine": 6, "endLine": 6}
    assert replacement["insertedContent"]["text"] == "    torch.npu.synchronize()\n"
    assert next(r for r in results if r["ruleId"] == "test-triton")["level"] == "warning"
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert any(u.endswith("with%20space.py") for u in uris)
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert len(notes) == 1 and "syntax error" in notes[0]["message"]["text"]


def test_sarif_schema_rejects_a_broken_log():
    """The validation above can fail: a log without `version` is refused."""
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator().validate({"runs": []})
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator().validate({"version": "2.1.0", "runs": [{"tool": {"driver": {}}, "results": []}]})


def test_github_annotations(fake_rules, project):
    lines = _check("github", project).splitlines()
    pattern = re.compile(r"^::(error|warning|notice) file=[^,:]+(,line=\d+,col=\d+)?,title=[^:]+::.+$")
    assert lines and all(pattern.match(line) for line in lines), lines
    assert f"::error file={project}/train.py,line=6,col=5,title=test-cuda-sync::" in "\n".join(lines)
    assert any(line.startswith(f"::warning file={project}/train.py,line=2,col=1,title=test-triton::")
               for line in lines)
    assert any(line.startswith(f"::error file={project}/broken.py,title=npu-port::cannot check") for line in lines)


def test_json_report_follows_the_documented_schema(fake_rules, project):
    doc = json.loads(_check("json", project))
    assert doc["schema_version"] == REPORT_SCHEMA_VERSION
    documented = (DOCS / "report-schema.md").read_text(encoding="utf-8")
    for key in doc["summary"]:
        assert f"`{key}`" in documented, f"summary key {key} is not documented"
    for finding in doc["findings"]:
        for key in finding:
            assert f"`{key}`" in documented, f"finding key {key} is not documented"
        assert finding["severity"] in ("error", "warning", "info")
    assert doc["summary"]["errors"] == sum(f["severity"] == "error" for f in doc["findings"])
    assert doc["summary"]["exit_code"] == 1
    assert [e["file"] for e in doc["errors"]] == [str(project / "broken.py")]
    statuses = {f["file"]: f["status"] for f in doc["files"]}
    assert len(statuses) == doc["summary"]["files"] and statuses[str(project / "broken.py")] == "failed"
    assert set(statuses.values()) <= {"converted", "unchanged", "skipped", "copied", "failed"}


def test_text_report(fake_rules, project):
    out = _check("text", project)
    assert f"{project}/train.py\n  2:1  warning  test-triton" in out
    assert "    6:5  error  test-cuda-sync" not in out  # findings are indented two spaces under the file
    assert "  6:5  error  test-cuda-sync  CUDA left over: torch.cuda.synchronize -> torch.npu.synchronize" in out
    assert "        6 |     torch.cuda.synchronize()" in out
    assert "    fix: becomes: torch.npu.synchronize()" in out
    assert "cannot check: syntax error" in out
    assert re.search(r"failed: \d+ errors, 1 warnings, 0 notes, 1 files could not be checked; 4 files checked", out)


def test_output_file(fake_rules, project, tmp_path):
    target = tmp_path / "report.sarif"
    result = CliRunner().invoke(cli, ["check", "--isolated", "--select", "test-cuda-sync", "--output-format",
                                      "sarif", "-o", str(target),
                                      str(project / "train.py")], catch_exceptions=False)
    assert result.exit_code == 1 and result.stdout == ""
    assert json.loads(target.read_text())["version"] == "2.1.0"


def test_convert_report_has_the_text_summarys_counts_and_every_fix(fake_rules, project, tmp_path):
    (project / "bad.py").write_text("import torch\ndef (:\n    torch.cuda.synchronize()\n", encoding="utf-8")
    report = tmp_path / "report.json"
    result = CliRunner().invoke(cli, ["convert", "--isolated", "--select", "test-cuda-sync,test-triton", "--no-cache",
                                      str(project), "--check", "--report", str(report)], catch_exceptions=False)
    doc = json.loads(report.read_text())
    summary, findings = doc["summary"], doc["findings"]
    documented = (DOCS / "report-schema.md").read_text(encoding="utf-8")
    for key in summary:
        assert f"`{key}`" in documented, f"summary key {key} is not documented"
    assert summary["exit_code"] == result.exit_code == 1  # bad.py
    assert summary["files"] == 5 and summary["files_failed"] == len(doc["errors"]) == 1
    changes = [f for f in findings if f["kind"] == "change"]
    assert summary["changes"] == len(changes) == sum(summary["changes_per_rule"].values()) > 0
    assert summary["warnings"] == sum(f["kind"] == "finding" and f["severity"] == "warning" for f in findings)
    assert all(f["fix"] == "becomes: torch.npu.synchronize()" for f in changes)
    assert f"{summary['converted']} would convert" in result.stderr

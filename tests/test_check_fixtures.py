"""`check` over the whole fixture tree, for every rule present and future:

- on a GPU fixture (`*.input.*`) it reports, as errors, exactly the changes `convert` makes, and
  besides them exactly the errors the case's `.findings` file lists (none without one);
- on a converted fixture (`*.expected.*`) it reports no error, also with the check rules on.
"""

from __future__ import annotations

import pytest
from fixture_cases import all_cases, parse_finding_line

from npu_port.transpiler.check import CHECK_GROUP, run_check
from npu_port.transpiler.core.config import load_config
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.settings import Settings

CASES = all_cases()
CHECK_RULES = sorted(i for i, r in all_rules().items() if r.GROUP == CHECK_GROUP)


def _config(path, select, case):
    options = dict(case.options)
    cli = {"select": list(select), "extras": case.extras}
    if "forbid" in options:
        cli["forbid"] = list(options["forbid"])
    return load_config([path], cli, isolated=True)


def _check(path, select, case):
    return run_check([path], _config(path, select, case), extra_options=case.options)


def _expected_errors(case) -> list[str]:
    return sorted(line for line in case.expected_findings() if parse_finding_line(line)[2] == "error")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_check_on_gpu_fixture_reports_what_convert_changes(case):
    engine = Engine(Settings(select=case.select, extras=case.extras, options_extra=case.options))
    converted = engine.convert(case.input.read_bytes(), str(case.input))
    want_changes = sorted(f"{f.line}:{f.col} {f.rule}" for f in converted.outcome.changes)

    report = _check(case.input, case.select, case)
    assert not report.failed, report.failed[0].error
    errors = [f for f in report.findings if f.severity == "error"]
    assert sorted(f"{f.line}:{f.col} {f.rule}" for f in errors if f.kind == "change") == want_changes
    # A rule's own case runs that rule; an example runs every default and check rule.
    others = sorted(f"{f.line}:{f.col} {f.rule} error: {f.message}" for f in errors if f.kind != "change")
    assert others == _expected_errors(case)
    assert report.exit_code() == (1 if errors else 0)


@pytest.mark.parametrize("case", [c for c in CASES if c.expected], ids=[c.id for c in CASES if c.expected])
def test_check_on_converted_fixture_reports_no_error(case):
    # A rule's fixture shows its change alone: the `import torch_npu` its torch_npu names need is
    # torch-npu-import's change, which a whole conversion makes (torch-npu-unbound judges that pair).
    checks = CHECK_RULES if "torch-npu-import" in case.select else [r for r in CHECK_RULES if r != "torch-npu-unbound"]
    select = list(case.select) + checks if case.select else []
    report = _check(case.expected, select, case)
    errors = [f"{f.line}:{f.col} {f.rule}: {f.message}" for f in report.findings if f.severity == "error"]
    assert errors == [] and not report.failed

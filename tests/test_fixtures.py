"""Every fixture: expected output, unchanged when it must be, exactly the expected findings (none
without a `.findings` file), valid output, and idempotent."""

from __future__ import annotations

import pytest
from fixture_cases import all_cases, assert_valid, finding_line, update_requested, write_findings

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.settings import Settings

CASES = all_cases()


def _engine(case) -> Engine:
    return Engine(Settings(select=case.select, extras=case.extras, options_extra=case.options))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixture(case):
    data = case.input.read_bytes()
    engine = _engine(case)
    result = engine.convert(data, case.convert_path)
    assert result.outcome.status != "failed", result.outcome.error
    out = result.output if result.output is not None else data
    want = case.expected.read_bytes() if case.expected else data
    assert out.decode("utf-8", "replace") == want.decode("utf-8", "replace")
    assert out == want
    assert_valid(case.input.name, out)
    findings = [f for f in result.outcome.findings if f.kind == "finding"]
    if update_requested():
        write_findings(case, findings)
    assert "\n" not in "".join(f.message for f in findings), "a finding's message is one line"
    assert sorted(finding_line(f) for f in findings) == case.expected_findings(), \
        f"{case.findings_path.name}: rerun with NPU_PORT_UPDATE_FIXTURES=1 and review the diff"
    again = engine.convert(out, case.convert_path)
    assert again.output is None, "a second run changed the output again"


def test_every_rule_has_a_changing_and_a_must_not_change_fixture():
    # A report-only rule's "changing" case is one with expected findings.
    changing = {c.select[0] for c in CASES if c.select and (c.expected or c.findings)}
    unchanged = {c.select[0] for c in CASES if c.select and not c.expected and not c.findings}
    missing = [(rid, rid in changing, rid in unchanged) for rid in all_rules()
               if rid not in changing or rid not in unchanged]
    assert not missing, f"rules lacking fixtures (id, has change case, has no-change case): {missing}"

"""Every fixture again with --keep-cuda: the device-agnostic output in `<case>.keep-cuda.expected.<ext>`
(none: the input comes out unchanged), findings that differ from the default mode's exactly as
`<case>.keep-cuda.findings` says (`+ ` only with --keep-cuda, `- ` only without; no file: none), valid
output, and idempotent in both modes: converting the output again with --keep-cuda changes nothing, and
neither does the default mode where --keep-cuda ported everything (no `kept for CUDA` warning).

`NPU_PORT_UPDATE_FIXTURES=1` rewrites the `.keep-cuda.*` files from what the rules do now: review the diff.
"""

from __future__ import annotations

import pytest
from fixture_cases import all_cases, assert_valid, expected_lines, finding_line, update_requested

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings

CASES = all_cases()


def _differences(keep_cuda, default) -> list[str]:
    """How the --keep-cuda findings differ from the default mode's: `+ LINE` only with --keep-cuda, `- LINE`
    only without (a `.keep-cuda.findings` file lists these; the findings both modes share are the case's own)."""
    kept, plain = [finding_line(f) for f in keep_cuda], [finding_line(f) for f in default]
    return sorted([f"+ {line}" for line in kept if line not in plain] + [f"- {line}" for line in plain if line not in kept])


def _engine(case, keep_cuda: bool) -> Engine:
    return Engine(Settings(select=case.select, extras=case.extras, options_extra=case.options, keep_cuda=keep_cuda))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_keep_cuda_fixture(case):
    data = case.input.read_bytes()
    name = case.convert_path  # (as test_fixtures converts it: beside a package the case reads, its place there)
    engine = _engine(case, keep_cuda=True)
    result = engine.convert(data, name)
    assert result.outcome.status != "failed", result.outcome.error
    out = result.output if result.output is not None else data
    findings = [f for f in result.outcome.findings if f.kind == "finding"]
    default = [f for f in _engine(case, keep_cuda=False).convert(data, name).outcome.findings if f.kind == "finding"]
    differences = _differences(findings, default)
    if update_requested():
        if out != data:
            case.keep_cuda_expected.write_bytes(out)
        else:
            case.keep_cuda_expected.unlink(missing_ok=True)
        if differences:
            case.keep_cuda_findings_path.write_text("".join(d + "\n" for d in differences), encoding="utf-8")
        else:
            case.keep_cuda_findings_path.unlink(missing_ok=True)
    want = case.keep_cuda_expected.read_bytes() if case.keep_cuda_expected.exists() else data
    assert out.decode("utf-8", "replace") == want.decode("utf-8", "replace")
    assert out == want
    assert_valid(case.input.name, out)
    assert differences == expected_lines(case.keep_cuda_findings_path), \
        f"{case.keep_cuda_findings_path.name}: rerun with NPU_PORT_UPDATE_FIXTURES=1 and review the diff"
    assert engine.convert(out, name).output is None, "a second --keep-cuda run changed the output again"
    if out != data and not any("kept for CUDA" in f.message for f in findings):
        assert _engine(case, keep_cuda=False).convert(out, name).output is None, \
            "the default mode changed a --keep-cuda output"


def test_keep_cuda_fixtures_exist_for_every_rule_that_changes_code():
    """Each rule that changes code in a fixture shows its --keep-cuda form there too: a device-agnostic
    output, or the finding that says why the line is kept for CUDA."""
    changing = {c.select[0] for c in CASES if c.select and c.expected}
    shown = {c.select[0] for c in CASES if c.select and (c.keep_cuda_expected.exists()
                                                        or c.keep_cuda_findings_path.exists())}
    assert not sorted(changing - shown)


def test_a_device_agnostic_choice_stays_one_operand():
    """`x.type == "cuda"` -> `x.type == (a if c else b)`: without the parentheses Python reads
    `(x.type == a) if c else b`, a branch that runs whatever the device. No output may hold a conditional
    whose body or else-part is a comparison or an operation (no input has one)."""
    import ast

    outputs = sorted({c.input.with_name(c.input.name.replace(".input.", ".keep-cuda.expected."))
                      for c in CASES if c.input.suffix == ".py"})
    outputs = [p for p in outputs if p.exists()]
    assert outputs
    wrong = []
    for path in outputs:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.IfExp) and isinstance(node.body, (ast.Compare, ast.BinOp)) \
                    or isinstance(node, ast.IfExp) and isinstance(node.orelse, (ast.Compare, ast.BinOp)):
                wrong.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert not wrong, wrong

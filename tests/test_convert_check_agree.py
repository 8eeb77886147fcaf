"""`convert` never writes what `check` flags (issue 34: the two commands read one body of knowledge).

Every fixture input (fixtures/rules/*/ and fixtures/examples/) is converted with every default rule (and the
extras where the case asks for them), in the default mode and with --keep-cuda, and the output is checked as
`check` checks a tree: the default rules (whatever they would still change is CUDA left over, an error) and
the check group. On a line convert wrote, check may report:
- no error that checking the input does not report too (same rule and message): convert's own writing;
- in the default mode, nothing it would change either: a line convert rewrote and left CUDA on.
--keep-cuda output keeps CUDA on purpose (the device-agnostic forms, what has none), which `check`, a
validator of NPU code, reads as left over: there only the first holds. Errors that were in the input
(an invented keyword beside the device argument convert removed) are the input's, not convert's.

test_check_fixtures holds the narrower promise, per rule: the case's own expected output under its own
rule and the check group.
"""

from __future__ import annotations

import difflib

import pytest
from fixture_cases import all_cases

from npu_port.transpiler.check import CHECK_GROUP
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import all_rules, select_specs
from npu_port.transpiler.core.settings import Settings

CASES = all_cases()
CHECK_RULES = tuple(sorted(i for i, r in all_rules().items() if r.GROUP == CHECK_GROUP))


def _written_lines(before: str, after: str) -> set[int]:
    """The 1-based lines of `after` that convert wrote (replaced or inserted)."""
    out: set[int] = set()
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
    return out


def _check_rules(extras: bool) -> tuple[str, ...]:
    return tuple(sorted({r.ID for r in select_specs((), (), extras)} | set(CHECK_RULES)))


@pytest.mark.parametrize("keep_cuda", [False, True], ids=["default", "keep-cuda"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_check_flags_no_line_convert_wrote(case, keep_cuda):
    data = case.input.read_bytes()
    path = str(case.input)
    converted = Engine(Settings(extras=case.extras, keep_cuda=keep_cuda, options_extra=case.options)).convert(data, path)
    if converted.output is None:
        return  # nothing written
    written = _written_lines(data.decode("utf-8", "replace"), converted.output.decode("utf-8", "replace"))
    rules = _check_rules(case.extras)
    checked = _check(converted.output, path, rules, case)
    before = {(f.rule, f.message) for f in _check(data, path, rules, case) if f.severity == "error"}
    wrong = sorted(f"{f.line}:{f.col} {f.rule}: {f.message}" for f in checked if f.line in written and (
        f.kind == "change" and not keep_cuda or f.kind != "change" and f.severity == "error"
        and (f.rule, f.message) not in before))
    assert wrong == [], "\n" + converted.output.decode("utf-8", "replace")


def _check(data: bytes, path: str, rules: tuple[str, ...], case) -> list:
    checked = Engine(Settings(select=rules, extras=case.extras, options_extra=case.options)).convert(data, path)
    assert checked.outcome.status != "failed", checked.outcome.error
    return checked.outcome.findings

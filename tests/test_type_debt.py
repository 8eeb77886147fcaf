"""mypy checks the whole package (`python tools/typecheck.py`, a step of .ci/run): no module is exempted
from it, and no setting turns its errors off (issue 38 emptied the `ignore_errors` list)."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_no_module_is_exempted_from_the_type_check() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    exempted = [override["module"] for override in mypy.get("overrides", []) if override.get("ignore_errors")]
    assert exempted == []
    assert not mypy.get("ignore_errors")


def test_ci_runs_the_type_check() -> None:
    assert 'python "$repo/tools/typecheck.py"' in (ROOT / ".ci" / "run").read_text(encoding="utf-8")

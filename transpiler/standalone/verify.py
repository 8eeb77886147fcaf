"""The promise checked on every result: it parses, and imports no stripped package, relatively or at all.

Uses the same helpers as `npu-port check`, so both commands agree on what a forbidden import is.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from npu_port.transpiler.analysis.import_policy import forbidden_imports, relative_imports
from npu_port.transpiler.standalone.errors import Problem, StandaloneError


def import_violations(code: str, packages: Sequence[str], path: str) -> list[Problem]:
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [Problem(path, exc.lineno or 1, exc.offset or 1, "result", f"does not parse: {exc.msg}")]
    problems = [Problem(path, s.line, s.col, s.text, f"imports the stripped package {pkg}")
                for s, pkg in forbidden_imports(tree, packages)]
    problems += [Problem(path, s.line, s.col, s.text, "relative import") for s in relative_imports(tree)]
    return problems


def verify_standalone(code: str, packages: Sequence[str], path: str) -> None:
    """Raise if the generated script breaks the promise (a bug in npu-port, reported instead of written)."""
    problems = import_violations(code, packages, f"{path} (generated)")
    if problems:
        raise StandaloneError(problems)

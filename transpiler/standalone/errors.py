"""What `standalone` cannot do statically, said precisely enough to act on."""

from __future__ import annotations

from dataclasses import dataclass

from npu_port.transpiler.core.report import Finding

RULE_ID = "standalone-unresolved"


@dataclass(frozen=True, order=True)
class Problem:
    """One construct that cannot be inlined: where it is, what it is, why, and what to do."""

    path: str
    line: int
    col: int
    construct: str  # the source of the construct, e.g. `importlib.import_module("agentic_rl.x")`
    reason: str
    hint: str = ""

    def message(self) -> str:
        return f"{self.construct}: {self.reason}"

    def render(self) -> str:
        tail = f" (hint: {self.hint})" if self.hint else ""
        return f"{self.path}:{self.line}:{self.col}: error: {self.message()}{tail}"

    def to_finding(self) -> Finding:
        return Finding(self.path, self.line, self.col, RULE_ID, "warning", self.message(), hint=self.hint)


class StandaloneError(Exception):
    """Raised when a script cannot be made standalone; nothing has been written."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(set(problems))
        super().__init__("\n".join(p.render() for p in self.problems))

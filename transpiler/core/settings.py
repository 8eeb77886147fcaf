"""Everything a run needs to know, in one value that can be shipped to worker processes."""

from __future__ import annotations

from dataclasses import dataclass, field

from npu_port.transpiler.core.rules import RunOptions
from npu_port.transpiler.core.files import DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class Settings:
    target: str = "ascend"
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extras: bool = False
    jobs: int = 1
    max_bytes: int = DEFAULT_MAX_BYTES
    runtime_env_profile: str | None = None
    options_extra: tuple[tuple[str, object], ...] = field(default=())

    def run_options(self) -> RunOptions:
        return RunOptions(target=self.target, runtime_env_profile=self.runtime_env_profile,
                          extra=dict(self.options_extra))

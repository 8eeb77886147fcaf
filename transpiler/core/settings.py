"""Everything a run needs to know, in one value that can be shipped to worker processes."""

from __future__ import annotations

from dataclasses import dataclass, field

from npu_port.transpiler.core.files import DEFAULT_MAX_BYTES
from npu_port.transpiler.core.rules import RunOptions

# The run options that travel by name in Settings.options_extra (RunOptions' fields of the same names).
RULE_OPTIONS = ("forbid", "rules_files", "verl_version", "verl_unpinned")


@dataclass(frozen=True)
class Settings:
    target: str = "ascend"
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extras: bool = False
    keep_cuda: bool = False  # device-agnostic output (RunOptions.keep_cuda)
    torch_version: str | None = None  # the oldest torch that output must run on; None: the newest known
    jobs: int = 1
    max_bytes: int = DEFAULT_MAX_BYTES
    runtime_env_profile: str | None = None
    # (name, values) of the rule options a run sets, one of RULE_OPTIONS each: a tuple keeps Settings
    # hashable, as the engine caches need.
    options_extra: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    def run_options(self) -> RunOptions:
        extra = dict(self.options_extra)
        unknown = sorted(set(extra) - set(RULE_OPTIONS))
        if unknown:
            raise ValueError(f"unknown rule option(s) {', '.join(unknown)} (known: {', '.join(RULE_OPTIONS)})")
        return RunOptions(target=self.target, keep_cuda=self.keep_cuda, torch_version=self.torch_version,
                          runtime_env_profile=self.runtime_env_profile,
                          rules_files=tuple(extra.get("rules_files", ())), forbid=tuple(extra.get("forbid", ())),
                          verl_version=next(iter(extra.get("verl_version", ())), None),
                          verl_unpinned=bool(extra.get("verl_unpinned")))

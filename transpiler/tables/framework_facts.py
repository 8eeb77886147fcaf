"""Framework argument facts shared by the `unknown-framework-arg*` checks.

Sources: ../shared/research/framework_ground_truth.md (vLLM 0.33 wheel, VERL HEAD and 0.9.1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# Names that hand ports invent by swapping gpu -> npu, with what the real frameworks use instead.
INVENTED_NAMES = {
    "npu_memory_utilization": ("gpu_memory_utilization",
                               "vLLM, vllm-ascend, VERL and MindSpeed-RL keep `gpu_memory_utilization` on NPU"),
    "n_npus_per_node": ("n_gpus_per_node",
                        "VERL keeps `trainer.n_gpus_per_node` on NPU; its value is the NPU count"),
}

# Keywords a framework call does not accept (any more), keyed by the callable's qualified name.

# `npu_memory_utilization`, `--npu-memory-utilization`, `n_npus_per_node`, as whole words.
_INVENTED_RE = re.compile(
    r"(?<![A-Za-z0-9_])(" + "|".join(n.replace("_", "[_-]") for n in INVENTED_NAMES) + r")(?![A-Za-z0-9_])")


def invented_names_in(text: str) -> Iterator[tuple[int, str]]:
    """(offset, canonical name) for each invented name in `text`."""
    for m in _INVENTED_RE.finditer(text):
        yield m.start(), m.group(1).replace("-", "_")


def code_part(line: str) -> str:
    """A shell or YAML line up to its comment: a `#` at the start or after a blank, outside quotes."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line

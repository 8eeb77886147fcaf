"""vLLM's NCCL communicator and its vllm-ascend counterpart (codemods/data/<target>/communicators.yaml):
shared by the rule that ports the import (vllm-pyhccl) and the one that reports what cannot be ported
(unsupported-cuda-libs), so a line is never both changed and reported as left."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Optional

from npu_port.transpiler.tables.mapping import load_table


@dataclass(frozen=True)
class Communicator:
    cuda: str  # vllm.distributed.device_communicators.pynccl.PyNcclCommunicator
    npu: str
    cuda_only_methods: tuple[str, ...]

    def method_missing_on_npu(self, text: str) -> Optional[str]:
        """A method the file calls that only the CUDA communicator has (on any object: a file that calls
        `.send(` at all is not ported blind), or None."""
        for method in self.cuda_only_methods:
            if re.search(rf"\.{method}\s*\(", text):
                return method
        return None


@cache
def communicators(target: str) -> dict[str, Communicator]:
    rows = load_table(target, "communicators")["rows"]
    return {r["cuda"]: Communicator(r["cuda"], r["npu"], tuple(r["cuda_only_methods"])) for r in rows}


def portable_communicator(target: str, qualified: str, text: str) -> Optional[Communicator]:
    """The row for an imported name that the file can port (it calls no CUDA-only method), or None."""
    row = communicators(target).get(qualified)
    return row if row is not None and row.method_missing_on_npu(text) is None else None


def portable_statement(target: str, module: str, names: list[str], text: str) -> bool:
    """Whether `from module import names` moves to the counterparts whole (vllm-pyhccl): every name has a row
    the file can port, and their counterparts live in one module. A statement that moves in part does not."""
    rows = [portable_communicator(target, f"{module}.{n}", text) for n in names]
    if not rows or any(r is None for r in rows):
        return False
    return len({r.npu.rsplit(".", 1)[0] for r in rows if r is not None}) == 1

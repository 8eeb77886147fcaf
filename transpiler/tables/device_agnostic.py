"""Which torch release has which device-agnostic form (codemods/data/<target>/device_agnostic.yaml), and
what a --keep-cuda run says about the torch its output needs."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Optional

from npu_port.transpiler.analysis.project_pins import lowest_torch
from npu_port.transpiler.tables.mapping import load_table


def release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:2])


@cache
def facts(target: str) -> dict:
    return load_table(target, "device_agnostic")


@cache
def portable_forms(target: str) -> dict:
    """torch.cuda name (dotted under torch.cuda) -> its device-agnostic forms, from portable_torch.yaml."""
    return load_table(target, "portable_torch")["names"]


def torch_for_output(target: str, chosen: Optional[str], paths: Iterable[Path]) -> tuple[str, str]:
    """(the oldest torch the output must run on, one sentence saying which, why and what that means):
    `chosen` (--torch-version / torch-version) wins, then the lowest torch the project accepts (its torch or
    torch-npu pins, or the torch a pinned vLLM / VERL release requires: analysis/project_pins.py), then the
    oldest torch a snapshotted torch-npu release pairs with."""
    data = facts(target)
    accelerator = data["torch"]["since"]["current_accelerator"]
    if chosen:
        version, why = chosen, f"torch {chosen} (as asked)"
    else:
        pin = lowest_torch(paths, data.get("implied_torch") or {})
        minor = ".".join(pin.version.split(".")[:2]) if pin else ""
        oldest = data["torch"]["oldest"]
        version, why = (minor, f"torch {minor} ({pin.where})" if " requires torch " in pin.where
                        else f"torch {minor} ({pin.where} accepts it)") if pin \
            else (oldest, f"torch {oldest} (no torch, vllm or verl pin found near the inputs: the oldest torch "
                          "a torch-npu release of the snapshot pairs with)")
    if release(version) >= release(accelerator):
        return version, f"--keep-cuda: the output must run on {why}: torch.accelerator where it has the function"
    return version, (f"--keep-cuda: the output must run on {why}, older than torch {accelerator} (torch.accelerator): "
                     "the explicit form `... if hasattr(torch, \"npu\") else ...` is written instead")

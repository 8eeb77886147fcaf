"""Which torch release has which device-agnostic form (codemods/data/<target>/device_agnostic.yaml), and
what a --keep-cuda run says about the torch its output needs."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Optional

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.tables.project_pins import lowest_torch


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
    """(the oldest torch the output must run on, a sentence saying why and what that means): `chosen`
    (--torch-version / torch-version) wins, then the project's own pin, then the newest known release."""
    data = facts(target)
    accelerator = data["torch"]["since"]["current_accelerator"]
    if chosen:
        version, why = chosen, f"torch {chosen} (as asked)"
    else:
        pin = lowest_torch(paths)
        minor = ".".join(pin.version.split(".")[:2]) if pin else ""
        version, why = (minor, f"torch {minor} ({pin.where} accepts it)") if pin \
            else (data["torch"]["newest"], f"torch {data['torch']['newest']} (no torch pin found near the inputs)")
    if release(version) >= release(accelerator):
        return version, f"--keep-cuda: the output must run on {why}: torch.accelerator and torch.get_device_module()"
    return version, (f"--keep-cuda: the output must run on {why}, older than torch {accelerator} (torch.accelerator): "
                     "the explicit form `... if hasattr(torch, \"npu\") else ...` is written instead")

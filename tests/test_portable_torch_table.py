"""codemods/data/ascend/portable_torch.yaml against the torch device-API snapshot (torch_device_api.json).

Every device-agnostic form the table names must exist in the torch release of its `since` and in every
later one, torch_npu must support it there (the npu counterpart, the allocator, the graph registry, the
amp hooks), and `since` must be the earliest such release: a stale table fails here instead of emitting
code the installed torch cannot run.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from npu_port.transpiler.tables import api_facts

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = json.loads((ROOT / "codemods" / "data" / "api" / "torch_device_api.json").read_text(encoding="utf-8"))
TABLE = yaml.safe_load((ROOT / "codemods" / "data" / "ascend" / "portable_torch.yaml").read_text(encoding="utf-8"))
CUDA_ROWS = yaml.safe_load((ROOT / "codemods" / "data" / "ascend" / "torch_cuda.yaml").read_text(encoding="utf-8"))
FORMS = ("accelerator", "amp", "torch", "device_module", "none")


def minor_key(minor: str) -> tuple[int, ...]:
    return tuple(int(part) for part in minor.split("."))


TORCH = dict(sorted(SNAPSHOT["torch"].items(), key=lambda item: minor_key(item[0])))
TORCH_NPU = dict(sorted(SNAPSHOT["torch_npu"].items(), key=lambda item: minor_key(item[0])))


def mapped_cuda_rows() -> dict[str, dict]:
    """The torch_cuda.yaml rows that map a torch.cuda name to torch.npu (by the name under torch.cuda)."""
    return {row["cuda"][len("torch.cuda."):]: row for row in CUDA_ROWS["rows"]
            if row["cuda"].startswith("torch.cuda.") and row["status"] in ("same", "analogue")}


def form_of(entry: dict) -> str:
    (form,) = [key for key in FORMS if key in entry]
    return form


def npu_has(minor: str, dotted: str) -> bool:
    """torch.npu.<dotted> in that torch_npu release; below the top level, only the newest release is recorded
    (codemods/data/api/torch_npu.json), so a submodule's name is checked there."""
    head, _, rest = dotted.partition(".")
    if head not in TORCH_NPU[minor]["npu_names"]:
        return False
    if not rest:
        return True
    module, _, name = f"torch.npu.{dotted}".rpartition(".")
    return api_facts.load("torch_npu").has(module, name)


def holds(form: str, name: str, cuda_name: str, minor: str) -> bool:
    """Whether `form: name` works on both devices with torch `minor` and the torch-npu of the same minor."""
    torch = TORCH.get(minor)
    npu = TORCH_NPU.get(minor)
    if torch is None:
        return False
    accelerator = torch["accelerator"] or {}
    if form == "accelerator":
        record = accelerator.get(name)
        if record is None:
            return False
        if npu is None:
            return True  # torch 2.2: no torch-npu release to pair with
        npu_row = mapped_cuda_rows()[cuda_name]["npu"][len("torch.npu."):]
        renamed = any(call["name"] == "npu" for call in npu["registers"]["privateuse1_name"])
        if not npu_has(minor, npu_row) or not renamed:
            return False
        defined_in = record.get("defined_in", "torch.accelerator")
        if defined_in == "torch.accelerator.memory" and torch["accelerator_memory_needs_device_allocator"]:
            return npu["allocator_base"] == "c10::DeviceAllocator"
        if defined_in == "torch.accelerator.graphs":
            return npu["links"]["GraphImplRegistry"]
        return npu["links"]["DeviceGuardImplRegistrar"]
    if form == "amp":
        # The device type comes from torch.accelerator.current_accelerator().type.
        if torch["amp"].get(name) is None or "current_accelerator" not in accelerator:
            return False
        if npu is None:
            return True
        if name == "GradScaler":
            return all(npu["implements_ops"].values())
        needs = torch["amp"]["autocast_privateuse1_needs"] or []
        return all(func in npu["npu_names"] for func in needs)
    if form == "torch":
        return bool(torch["top_level"].get(name))
    if form == "device_module":
        # Spelled `(torch.npu if hasattr(torch, "npu") else torch.cuda).NAME` (codemods/_device_agnostic.py:
        # torch.get_device_module() returns torch.cpu on a host without an accelerator): torch.npu must have it.
        return npu is None or npu_has(minor, name)
    raise AssertionError(form)


def earliest(form: str, name: str, cuda_name: str) -> str | None:
    """The first minor from which the form holds in every later release of the snapshot."""
    found = None
    for minor in reversed(TORCH):
        if not holds(form, name, cuda_name, minor):
            break
        found = minor
    return found


def entries() -> list[tuple[str, dict]]:
    return sorted(TABLE["names"].items())


def test_every_mapped_cuda_name_has_an_entry_and_no_other():
    assert set(TABLE["names"]) == set(mapped_cuda_rows())


@pytest.mark.parametrize(("cuda_name", "entry"), entries(), ids=[name for name, _ in entries()])
def test_entry_is_backed_by_the_snapshot(cuda_name, entry):
    forms = [entry] + ([entry["older"]] if "older" in entry else [])
    if "note" in entry:
        assert entry["note"] in TABLE["notes"]
    for form_entry in forms:
        form = form_of(form_entry)
        if form == "none":
            assert isinstance(form_entry["none"], str) and form_entry["none"]
            # Nothing named like the CUDA name is in torch.npu, or a form would have been given.
            assert not npu_has(next(reversed(TORCH_NPU)), cuda_name)
            continue
        since = form_entry["since"]
        assert since in TORCH, f"{cuda_name}: since {since} is not a snapshotted torch minor"
        later = [m for m in TORCH if minor_key(m) >= minor_key(since)]
        absent = [m for m in later if not holds(form, form_entry[form], cuda_name, m)]
        assert not absent, f"{cuda_name}: {form}: {form_entry[form]} does not hold in torch {absent}"
        assert earliest(form, form_entry[form], cuda_name) == since, f"{cuda_name}: since could be earlier"
    if "older" in entry:
        assert minor_key(entry["older"]["since"]) < minor_key(entry["since"])


def test_check_fails_on_a_name_torch_accelerator_lacks():
    # The test must be able to fail: torch.accelerator had no memory_allocated before 2.9, nor a
    # set_device_idx-free spelling before 2.6.
    assert not holds("accelerator", "memory_allocated", "memory_allocated", "2.8")
    assert not holds("accelerator", "current_device_index", "current_device", "2.5")
    assert not holds("device_module", "ExternalStream", "ExternalStream", "2.9")
    assert earliest("accelerator", "memory_allocated", "memory_allocated") == "2.13"


def test_snapshot_headline_facts():
    """The versions issue 16's rules depend on, as the wheels say them."""
    def first(predicate) -> str:
        return next(m for m, facts in TORCH.items() if predicate(facts))

    assert first(lambda f: f["accelerator"] is not None) == "2.6"
    assert first(lambda f: "current_accelerator" in (f["accelerator"] or {})) == "2.6"
    assert first(lambda f: "current_device_index" in (f["accelerator"] or {})) == "2.6"
    assert first(lambda f: "memory_allocated" in (f["accelerator"] or {})) == "2.9"
    assert first(lambda f: (f["get_device_module"] or {}).get("no_argument_is_current_accelerator")) == "2.4"
    assert first(lambda f: f["distributed"]["get_default_backend_for_device"] is not None) == "2.6"
    assert first(lambda f: f["distributed"]["backend_none_uses_device_map"]) == "2.1"
    # torch_npu registers hccl and lccl for "npu" in the order its torch keeps the right one.
    assert {pair["npu_default_backend"] for pair in SNAPSHOT["pairs"].values()} == {"hccl"}


def test_snapshot_records_its_wheels():
    for group in (TORCH, TORCH_NPU):
        for minor, facts in group.items():
            assert facts["wheel"].endswith(".whl") and facts["version"] in facts["wheel"]
            assert ".".join(facts["version"].split(".")[:2]) == minor
    assert SNAPSHOT["generated_by"] == "python -m tools.torch_device_api_snapshot"

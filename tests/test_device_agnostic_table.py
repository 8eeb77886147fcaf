"""The facts --keep-cuda writes by (codemods/data/ascend/device_agnostic.yaml) hold in the snapshots: each
torch form exists from its `since` release on (and not before, so `since` is the earliest), and verl's
helpers exist in every snapshotted verl release that has verl.utils.device."""

from __future__ import annotations

import json

from npu_port.transpiler.tables import api_facts
from npu_port.transpiler.tables.device_agnostic import facts, release

SNAPSHOT = json.loads((api_facts.SNAPSHOT_DIR / "torch_device_api.json").read_text(encoding="utf-8"))["torch"]


def _has(version: str, form: str) -> bool:
    torch = SNAPSHOT[version]
    if form == "current_accelerator":
        return all(n in (torch.get("accelerator") or {}) for n in ("current_accelerator", "is_available"))
    if form == "get_device_module":
        return bool((torch.get("get_device_module") or {}).get("no_argument_is_current_accelerator"))
    raise AssertionError(f"no check for {form}")


def test_each_torch_form_exists_from_its_release_on_and_not_before():
    for form, since in facts("ascend")["torch"]["since"].items():
        holds = [v for v in SNAPSHOT if _has(v, form)]
        assert holds, form
        first = min(holds, key=release)
        assert since == first, f"{form}: since {since}, but the snapshot has it from {first}"
        assert all(_has(v, form) for v in SNAPSHOT if release(v) >= release(since)), form


def test_the_newest_torch_is_the_newest_snapshotted():
    assert facts("ascend")["torch"]["newest"] == max(SNAPSHOT, key=release)


def test_the_verl_helpers_exist_in_the_snapshotted_releases():
    releases = sorted((api_facts.SNAPSHOT_DIR / "releases").glob("verl-*.json"))
    checked = 0
    for path in releases:
        modules = json.loads(path.read_text(encoding="utf-8")).get("modules", {})
        if "verl.utils.device" not in modules:
            continue
        checked += 1
        assert release(json.loads(path.read_text(encoding="utf-8"))["version"]) >= release(facts("ascend")["verl"]["since"])
        for helper in facts("ascend")["verl"]["helpers"].values():
            module, name = helper.rsplit(".", 1)
            assert name in modules[module], f"{path.name}: {helper}"
    assert checked >= 2

"""Table rows that can be wrong without any fixture noticing: a row a rule's prefilter never lets through never
runs (every library of unsupported_libraries.yaml and distribution of cuda_only_packages.yaml must match its
rule's triggers), and a name a row writes must exist in every torch-npu release of the API snapshot."""

from __future__ import annotations

import json
import re
from pathlib import Path

from npu_port.codemods._cuda_packages import TRIGGER_PATTERN
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.tables.mapping import load_table


def test_every_unsupported_library_passes_the_prefilter():
    rule = all_rules()["unsupported-cuda-libs"]
    missing = [row["module"] for row in load_table("ascend", "unsupported_libraries")["rows"]
               if not any(t in row["module"] for t in rule.TRIGGERS)
               and not any(re.search(p, row["module"]) for p in rule.TRIGGER_PATTERNS)]
    assert missing == []


def test_every_cuda_only_distribution_passes_the_prefilter():
    rows = load_table("ascend", "cuda_only_packages")["rows"]
    missing = [row["name"] for row in rows if row["name"] and not re.search(TRIGGER_PATTERN, row["name"])]
    assert missing == []


def test_amp_state_names_exist_in_every_torch_npu_release_of_the_snapshot():
    snapshot = json.loads((Path(__file__).resolve().parent.parent / "codemods" / "data" / "api"
                           / "torch_device_api.json").read_text())["torch_npu"]
    wanted = {row["npu"].removeprefix("torch.npu.") for row in load_table("ascend", "amp_state")["calls"]}
    missing = {version: sorted(wanted - set(api["npu_names"])) for version, api in snapshot.items()
               if wanted - set(api["npu_names"])}
    assert len(snapshot) >= 10 and missing == {}

"""A row a rule's prefilter never lets through is a row that never runs: every library of
unsupported_libraries.yaml and every distribution of cuda_only_packages.yaml is matched by its rule's triggers."""

from __future__ import annotations

import re

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

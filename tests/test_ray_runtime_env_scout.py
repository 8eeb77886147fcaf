"""ray-runtime-env's scout: it declines a file only where the rule, run alone without the prefilter,
changes and reports nothing (the same check as tests/test_prefilter_facts.py, for this rule's shapes:
verl's workers import ray and never call ray.init)."""

from __future__ import annotations

import pytest

from npu_port.transpiler.analysis.source_facts import scan
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.rules import RunOptions
from npu_port.transpiler.core.settings import Settings

RULE = all_rules()["ray-runtime-env"]

# (source, whether the scout may decline it): each accepted one is a near miss the rule acts on.
CASES = [
    ("import ray\n@ray.remote\nclass W:\n    def __init__(self):\n        self.x = ray.get(ref)\n", True),
    ('RAY = "ray"\ndef init():\n    return RAY\n', True),  # names ray and init, imports nothing under ray
    ("import os\nos.environ['HCCL_CONNECT_TIMEOUT'] = '9'\ninit()\n", True),
    ("import ray\nray.init()\n", False),
    ("import ray as r\nr.init(num_cpus=1)\n", False),
    ("from ray import init as start\nstart()\n", False),
    ("def main():\n    import ray\n    ray.init(**kwargs)\n", False),  # reported, not changed
    ("import ray\nray.\\\n    init(runtime_env={'env_vars': {}})\n", False),
]


@pytest.mark.parametrize("source,declines", CASES, ids=range(len(CASES)))
def test_the_scout_declines_only_where_the_rule_does_nothing(source, declines):
    data = source.encode()
    wanted = RULE.scout(scan(data, "t.py"), RunOptions())
    assert wanted is not declines
    result = Engine(Settings(select=("ray-runtime-env",)), rules=[RULE], prefilter=False).convert(data, "t.py")
    acts = result.output is not None or bool(result.outcome.findings)
    assert acts is not declines, result.outcome.findings

"""torch-cuda-api keeps the CUDA test of an `if` that guards a name staying CUDA-only: in its body, or
after it in its function when the body exits. Bodies already found to hold no staying name are not
rendered again (a piece of a clean text is clean): the notes must be the same wherever the `if` sits."""

from __future__ import annotations

import pytest

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.settings import Settings

RULE = all_rules()["torch-cuda-api"]
GUARD = "this test guards `torch.cuda.get_device_capability`"
STAYS = "torch.cuda.get_device_capability()"

# (source, the lines whose `if` test is noted as a guard)
CASES = [
    (f"import torch\nif torch.cuda.is_available():\n    x = {STAYS}\n", [2]),
    # the outer body holds the name, so the inner one is rendered too
    (f"import torch\nif torch.cuda.is_available():\n    if torch.cuda.is_available():\n        x = {STAYS}\n", [2, 3]),
    # a clean outer body: the inner `if` is not rendered, and an `elif` of it is clean too
    ("import torch\nif torch.cuda.is_available():\n    if torch.cuda.is_available():\n        x = 1\n"
     "    elif torch.cuda.is_available():\n        x = 2\n"
     f"elif torch.cuda.is_available():\n    y = {STAYS}\n", [7]),
    # an exiting `if` guards the rest of its function, whatever clean body encloses it
    ("import torch\ndef f():\n    if torch.cuda.is_available():\n        if not torch.cuda.is_available():\n"
     f"            return\n    if not torch.cuda.is_available():\n        return\n    return {STAYS}\n", [4, 6]),
    # a clean function body: no `if` in it is a guard, in a nested function neither
    ("import torch\ndef f():\n    if not torch.cuda.is_available():\n        return\n    def g():\n"
     "        if not torch.cuda.is_available():\n            return\n        return 1\n    return g\n"
     f"def h():\n    if not torch.cuda.is_available():\n        return\n    return {STAYS}\n", [11]),
    ("import torch\nif torch.cuda.is_available(): x = 1\nif torch.cuda.is_available(): "
     f"y = {STAYS}\n", [3]),
]


@pytest.mark.parametrize("source,lines", CASES, ids=range(len(CASES)))
def test_an_if_is_noted_where_it_guards_a_staying_name(source, lines):
    result = Engine(Settings(), rules=[RULE], prefilter=False).convert(source.encode(), "t.py")
    noted = sorted(f.line for f in result.outcome.findings if GUARD in f.message)
    assert noted == lines, result.outcome.findings

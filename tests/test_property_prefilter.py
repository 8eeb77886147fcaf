"""The prefilter is exact: no rule changes or reports anything in a file that lacks its triggers, so
skipping such files never loses a rewrite. Checked over every fixture, the generated bulk sources and
random programs, with prefiltering off against on."""

from __future__ import annotations

import functools
import re
import sys

import libcst as cst
import pytest
from bulk_support import CUDA_MODEL, PLAIN_MODULE
from fixture_cases import all_cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_port.transpiler.core.engine import Engine, Triggers
from npu_port.transpiler.core.files import language_of
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.rules import Rule
from npu_port.transpiler.core.settings import Settings

RULES = list(all_rules().values())
EVERY_RULE = Settings(select=("ALL",)) if RULES else Settings()

# Sources whose rewrites are known: the fixtures, plus CUDA-flavoured code in the bulk tree's shape.
SOURCES = [(c.input.name.replace(".input", ""), c.input.read_bytes()) for c in all_cases()] + [
    ("model.py", CUDA_MODEL.format(i=3).encode()),
    ("plain.py", PLAIN_MODULE.format(i=3).encode()),
]


def _triggers_present(rule: type[Rule], data: bytes) -> bool:
    if not rule.TRIGGERS and not rule.TRIGGER_PATTERNS:
        return True
    return any(t.encode() in data for t in rule.TRIGGERS) or any(
        re.search(p.encode(), data) for p in rule.TRIGGER_PATTERNS)


def _assert_exact(name: str, data: bytes) -> None:
    language = language_of(name, data[:128])
    unfiltered = Engine(EVERY_RULE, prefilter=False).convert(data, name, language)
    filtered = Engine(EVERY_RULE).convert(data, name, language)
    assert filtered.output == unfiltered.output, f"{name}: the prefilter skipped a file a rule changes"
    if unfiltered.outcome.status != "failed":
        assert sorted(filtered.outcome.findings) == sorted(unfiltered.outcome.findings)
    by_id = all_rules()
    for finding in unfiltered.outcome.findings:
        rule = by_id[finding.rule]
        if rule.FOLLOWS_CHANGES and finding.kind == "change" and len({f.rule for f in unfiltered.outcome.findings}) > 1:
            continue
        assert _triggers_present(rule, data), \
            f"{name}: {rule.ID} acted at line {finding.line} but none of its triggers occurs"


@pytest.mark.parametrize("name,data", SOURCES, ids=[n for n, _ in SOURCES])
def test_prefilter_is_exact_on_known_sources(name, data):
    _assert_exact(name, data)


# The check rules' triggers name what their reports stand on, not the NPU's name anywhere: values spelled
# with escapes, "hccl" in another case for Ray, torch.npu under another name.
CHECK_SOURCES = {
    "escaped_values.py": 'if d == "\\x6epu":\n    pass\nelif d == "n\\x70u":\n    pass\n',
    "continued_value.py": 'device = ["\\\nnpu", "npu"]\n',
    "ray_hccl.py": 'import ray.util.collective as col\ncol.init_collective_group(2, 0, "Hccl")\n',
    "ray_hccl_module.py": 'from ray.util import collective\ncollective.init_collective_group(2, 0, backend="HCCL")\n',
    "ray_hccl_alias.py": 'import torch\nfrom ray.util.collective import init_collective_group as icg\nicg(2, 0, "hccl")\n',
    "npu_alias.py": 'import torch\nfrom torch import npu as dev\ndev.synchronise()\n',
}


@pytest.mark.parametrize("name", sorted(CHECK_SOURCES))
def test_the_check_rules_triggers_hold_what_they_report(name):
    data = CHECK_SOURCES[name].encode()
    _assert_exact(name, data)
    found = Engine(EVERY_RULE, prefilter=False).convert(data, name, "python").outcome.findings
    expected = "unknown-npu-api" if name == "npu_alias.py" else "broken-device-dispatch"
    assert expected in {f.rule for f in found}


def test_hccl_in_a_ray_file_reaches_broken_device_dispatch_only_where_ray_util_collective_may_be_named():
    engine = Engine(Settings(select=("broken-device-dispatch",)))
    torch_group = b'import ray\nimport torch.distributed as dist\ndist.init_process_group(backend="hccl")\n'
    assert engine.needs_parse(torch_group, "python") == []  # torch.distributed takes "hccl": nothing to report
    assert engine.needs_parse(CHECK_SOURCES["ray_hccl_alias.py"].encode(), "python")


@pytest.mark.slow  # every rule over every fixture
def test_every_rule_alone_leaves_a_source_without_its_triggers_alone():
    for rule in RULES:
        engine = Engine(Settings(), rules=[rule], prefilter=False)
        for name, data in SOURCES:
            if language_of(name, data[:128]) != rule.LANGUAGE or _triggers_present(rule, data):
                continue
            result = engine.convert(data, name)
            assert result.output is None and not result.outcome.findings, (rule.ID, name)


class _NoTrigger(Rule):
    ID = "test-no-trigger"
    LANGUAGE = "python"
    SAFETY = "safe"
    TRIGGERS = ()


def test_a_rule_without_triggers_makes_every_file_parsed():
    engine = Engine(Settings(), rules=[_NoTrigger])
    assert engine.needs_parse(b"x = 1\n", "python") == [_NoTrigger]


@given(st.lists(st.sampled_from(["cuda", "CUDA", "npu", "torch", "nccl", "x", " ", "\n", ".", "_", "é"]),
                max_size=12))
def test_the_trigger_search_agrees_with_each_rule_trigger(parts):
    text = "".join(parts)
    hit, _ = Triggers(RULES).search(text.encode())
    assert hit == [r for r in RULES if r.matches(text)]


# Random programs: hypothesmith's grammar-shaped code with CUDA constructs spliced between statements.
CUDA_SNIPPETS = [
    "import torch", "import torch as T", "from torch import cuda", "import torch.cuda as tc",
    "x = torch.zeros(2).cuda()", "torch.cuda.synchronize()", "if t.is_cuda: pass",
    "d = torch.device('cuda:0')", "T.cuda.empty_cache()", "tc.current_device()", "m = net.cuda(0)",
    "torch.cuda.manual_seed_all(1)", "s = torch.cuda.Stream()", "def f(cuda): return cuda",
    # Look-alikes in prose next to the real thing, for the scouts: only the real ones may change.
    "# torch.cuda.synchronize() and backend='nccl' in a comment", "print('moving to cuda with nccl')",
    '"""A docstring on torch.cuda, nccl and CUDA_VISIBLE_DEVICES."""', "x = x.to(f'cuda:{i}')",
    "import torch.distributed as dist", "dist.init_process_group(backend='nccl')", "s = 'cu' 'da'",
    "import os", "os.environ['CUDA_VISIBLE_DEVICES'] = '0'", "d = torch.device('cu\\x64a:0')",
    "from vllm import LLM", "llm = LLM(model='m', device='cuda')", "import triton",
    "import subprocess", "subprocess.run(['nvidia-smi'])", "if 'npu' in name: x = torch.cuda.Stream()",
]


def _splice(parts: tuple[list[str], str, list[str]]) -> str:
    before, body, after = parts
    return "\n".join(before) + "\n" + body + ("" if body.endswith("\n") else "\n") + "\n".join(after) + "\n"


@functools.cache
def _grammar_programs() -> st.SearchStrategy[str]:
    import hypothesmith  # building the grammar strategy takes seconds: once per run, when a test draws

    return hypothesmith.from_grammar()


def programs() -> st.SearchStrategy[str]:
    """Random programs among CUDA snippets; the grammar is built when first drawn from, not when tests
    are collected (here and in test_scout.py)."""
    snippets = st.lists(st.sampled_from(CUDA_SNIPPETS), max_size=4)
    return st.tuples(snippets, st.deferred(lambda: _grammar_programs()), snippets).map(_splice)


@pytest.mark.slow  # the first test to draw builds the grammar
@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # random programs call literals: `"a"()`
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_programs_convert_cleanly_idempotently_and_exactly(source):
    from npu_port.transpiler.bulk.worker import Task, convert_task, raise_recursion_limit

    data = source.encode("utf-8")
    try:
        cst.parse_module(data)
    except Exception:
        return  # hypothesmith's grammar admits a few programs LibCST rejects; not the converter's concern
    limit = sys.getrecursionlimit()
    raise_recursion_limit()
    try:
        first = convert_task(Task(0, "prog.py", "prog.py", "python", data), EVERY_RULE)
        assert first.outcome.status != "failed", first.outcome.error
        out = first.output if first.output is not None else data
        cst.parse_module(out)  # the output parses...
        if _compiles(data):
            compile(out, "prog.py", "exec", dont_inherit=True)  # ...and compiles where the input did
        again = convert_task(Task(0, "prog.py", "prog.py", "python", out), EVERY_RULE)
        assert again.output is None, "converting the output again changed it"
        _assert_exact("prog.py", data)
    finally:
        sys.setrecursionlimit(limit)


def _compiles(data: bytes) -> bool:
    try:
        compile(data, "prog.py", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False

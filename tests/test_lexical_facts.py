"""The lexical answers the check rules' scouts give before they ask for an `ast` (SourceFacts.code_imports,
dotted_chains, literals): each must hold everything the `ast` holds, so that a lexical no is never a lost
finding. Checked on every fixture and odd text of the scout tests, on NPU-flavoured shapes, and on random
programs with those shapes spliced in."""

from __future__ import annotations

import ast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_property_prefilter import _grammar_programs, _splice
from test_scout import CASES

from npu_port.codemods.check_device_dispatch import _may_hold_two_npu_values, _may_report, _may_report_lexically
from npu_port.codemods.check_npu_api import _may_name_a_missing_api, _outermost_chains
from npu_port.transpiler.analysis.source_facts import SourceFacts, dotted, scan

# What a converted tree is full of, and the spellings that hide a name or a value from a naive reading.
NPU_SNIPPETS = [
    "import torch", "import torch_npu", "import torch_npu as tn", "from torch import npu",
    "from torch_npu.contrib import transfer_to_npu", "from torch_npu import npu_rms_norm as rms, npu_nope",
    "torch.npu.synchronize()", "torch.npu.synchronise()", "x = (torch).npu.synchronise()",
    "x = ((torch  # c\n  ).npu\n  .no_such)()", "y = torch.npu. \\\n    no_such()", "tn.npu_nope(1)", "npu.nope",
    "def f():\n    from torch import npu as n\n    return n.no_such()", "z = [torch.npu.Stream()][0].query()",
    'd = "npu" if torch.npu.is_available() else "npu"', 'd = ("npu") if a else ("n" "pu")',
    'if name == "npu":\n    pass', 'if name == ( # c\n        "npu"):\n    pass', 'DEVICES = "npu", "npu"',
    'DEVICES = [("npu"), "cpu", "npu"]', 'D = {"npu", "np\\x75"}', 'k = ("device " "npu")', 'e = f"npu:{i}"',
    'import ray', 'ray.util.collective.init_collective_group(1, 0, "HCCL")', 'backend = "hccl"',
    'x = torch.zeros(1, device="npu")', 'r = "npu:0".split(":")[0]',
    "match (torch).npu.nope:\n    case _:\n        pass", "return(torch).npu.nope",
]
NPU_SOURCES = [
    "\n".join(NPU_SNIPPETS[i:i + k]) + "\n" for k in (2, 3, 5) for i in range(0, len(NPU_SNIPPETS) - k + 1)
]
SOURCES = [d.decode("utf-8", "replace") for _, d in CASES] + NPU_SOURCES


def _facts(source: str) -> tuple[SourceFacts, tuple]:
    facts = scan(source.encode("utf-8"))
    return facts, (facts.nodes or ())


def _check_imports_and_chains(source: str) -> None:
    facts, nodes = _facts(source)
    if facts.code_imports is None or not nodes:
        return
    lexical = {ast.dump(s) for s in facts.code_imports}
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assert ast.dump(node) in lexical, (ast.dump(node), source)
    for name in _outermost_chains(nodes, frozenset(dotted(n).partition(".")[0] for n in nodes  # type: ignore[union-attr]
                                                   if isinstance(n, ast.Attribute) and dotted(n))):
        for prefix in {name.partition(".")[0], ".".join(name.split(".")[:2])}:
            chains = facts.dotted_chains(frozenset({prefix}))
            assert chains is not None and name in chains, (name, prefix, source)


def _check_screens(source: str) -> None:
    facts, nodes = _facts(source)
    if not nodes:
        return
    collective = facts.may_name("ray.util.collective")
    if _may_report(nodes, collective):
        assert _may_hold_two_npu_values(facts.strings), source
        assert facts.literals is not None and _may_report_lexically(facts.literals, collective), source
    imports = facts.code_imports
    if imports is not None and _may_name_a_missing_api(nodes, lambda prefixes: _outermost_chains(nodes, prefixes)):
        assert _may_name_a_missing_api(imports, facts.dotted_chains), source


@pytest.mark.parametrize("source", SOURCES)
def test_the_lexer_finds_every_import_and_name_chain_of_the_ast(source):
    _check_imports_and_chains(source)


@pytest.mark.parametrize("source", SOURCES)
def test_a_lexical_no_of_the_check_scouts_is_an_ast_no_too(source):
    _check_screens(source)


def test_the_screens_decide_the_shapes_they_were_written_for():
    """Not only always yes: the lexical answers settle the common shapes of a port without an ast."""
    plain = scan(b'import torch\nimport torch_npu\ntorch.npu.synchronize()\nx = torch.zeros(1, device="npu")\n'
                 b'y = torch.ones(1, device="npu")\nf(a, "npu")\n')
    assert not _may_name_a_missing_api(plain.code_imports or (), plain.dotted_chains)
    assert not _may_report_lexically(plain.literals or (), False)
    typo = scan(b"import torch\nx = (torch\n  ).npu.synchronise()\n")
    assert _may_name_a_missing_api(typo.code_imports or (), typo.dotted_chains)
    for shape in (b'd = "npu" if a else "npu"\n', b'if a == "npu": pass\nif a == "npu": pass\n', b'L = ["npu", "npu"]\n'):
        assert _may_report_lexically(scan(shape).literals or (), False), shape


def test_dotted_chains_start_with_whole_names():
    facts = scan(b"import torch\na = torch.npu_x.y\nb = (torch\n  ).npu.z\nc = torch.npu\nd = f(torch.npu).w\n")
    assert facts.dotted_chains(frozenset({"torch.npu"})) == ("torch.npu.z", "torch.npu", "torch.npu")
    assert facts.dotted_chains(frozenset({"torch"})) == ("torch.npu_x.y", "torch.npu.z", "torch.npu", "torch.npu")


def test_literal_contexts_name_the_tokens_beside_each_literal():
    facts = scan(b'x = ("npu") if a else f"npu:{i}"\nif d == ( # c\n  "npu"): pass\nL = ["np" "u", b"npu"]\n')
    found = [(lit.texts, lit.before, lit.after, lit.glued) for lit in facts.literals or ()]
    assert found == [
        (("npu",), "=", "if", False),
        (("npu:{i}", "npu:"), "else", "if", False),  # the f-string's head too; its prefix is no token
        (("npu",), "==", ":", False),
        (("np",), "[", "", False),
        (("u",), "", ",", True),
        (("npu",), ",", "]", False),
    ]
    assert scan(b'x = "never closed\n').literals is None


def test_lexical_imports_are_none_where_the_lexer_cannot_vouch_for_them():
    assert scan('import torch as é\n'.encode()).code_imports is None  # non-ASCII code
    assert scan(b'x = "never closed\n').code_imports is None
    assert scan(b"x = 1\n").code_imports == ()


@st.composite
def _npu_programs(draw) -> str:
    snippets = st.lists(st.sampled_from(NPU_SNIPPETS), max_size=4)
    return _splice((draw(snippets), draw(st.deferred(lambda: _grammar_programs())), draw(snippets)))


@pytest.mark.slow  # the first test to draw builds the grammar
@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(_npu_programs())
@example(source="\nfrom.\x0cimport*\n\n")  # a form feed between tokens (found by hypothesis in CI)
def test_the_lexical_answers_hold_on_random_programs(source):
    _check_imports_and_chains(source)
    _check_screens(source)

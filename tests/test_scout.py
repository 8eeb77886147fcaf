"""The second prefilter stage: the lexical facts of a Python file, and the rules' scouts that decide from
them whether a LibCST parse could change or report anything. A scout may say yes too often (a parse
for nothing), never no too often (a lost rewrite); these tests hold each scout to that."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from test_property_prefilter import SOURCES, programs

from npu_port.transpiler.analysis.source_facts import scan
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import language_of
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.rules import Rule, RunOptions
from npu_port.transpiler.core.settings import Settings

# Rules with a scout of their own (the default one says yes to every file).
PYTHON_RULES = [r for r in all_rules().values()
                if r.LANGUAGE == "python" and r.scout.__func__ is not Rule.scout.__func__]

# Shapes where the text a rule acts on hides in an odd spelling, next to look-alikes it must ignore.
TRICKY = {
    "escaped.py": 'import torch\nx = torch.zeros(1).to("cu\\x64a")\n',
    "fstring_code.py": 'import torch\nprint(f"{torch.cuda.device_count()} devices")\n',
    "fstring_head.py": 'import torch\nd = torch.device(f"cuda:{rank}")\n',
    "concatenated.py": 'import torch\nd = torch.device("cuda" ":0")\n',
    "keyword_env.py": 'import os\nenv = dict(os.environ)\nenv.update(CUDA_VISIBLE_DEVICES="0")\n',
    "comment_only.py": 'import torch\n# torch.cuda.synchronize() was here; backend="nccl"\nx = 1\n',
    "docstring_only.py": 'import torch\ndef f():\n    """Moves x to cuda with nccl."""\n    return 1\n',
    "log_only.py": 'import logging\nlogging.info("cuda is not used; nccl neither; vllm device=")\n',
    "hash_in_string.py": 'import torch\ns = "# not a comment"; torch.cuda.synchronize()\n',
    "quote_in_comment.py": "import torch\n# don't stop here\ntorch.cuda.synchronize()\n",
    "raw_bytes.py": "import torch\nx = rb'cuda\\'s'\ny = b\"cuda\"\nz = torch.device('cuda')\n",
    "continued.py": 'import torch\nd = torch.device("cu\\\nda")\n',
    "if_keyword.py": 'import torch\nif"cuda"==torch.zeros(1).device.type: pass\n',
    "alias_vllm.py": 'from vllm import LLM as Engine\nllm = Engine(model="m", device="cuda")\n',
    "ray_method.py": 'import ray\nActor.options(num_gpus=1).remote()\n',
    "smi.py": 'import subprocess\nsubprocess.run(["nvidia-smi", "-L"])\n',
    "triton_star.py": 'from triton import *\n@jit\ndef k(): pass\n',
    "ext.py": 'import fused_adam_cuda\n',
    "dynamic.py": 'import importlib\nm = importlib.import_module("flash_attn")\n',
    "unterminated.py": 'import torch\nx = "cuda\ntorch.cuda.synchronize()\n',
    "continued_import.py": 'import os, \\\n    fused_adam_cuda\n',
    "triton_from.py": 'from triton import jit\n@jit\ndef k(): pass\n',
    "wrapped_triton.py": 'from vllm.triton_utils import triton\n@triton.jit\ndef k(): pass\n',
    "platform_is_cuda.py": 'from vllm.platforms import current_platform\nok = current_platform.is_cuda()\n',
    "attention_backends.py": 'import torch\nfrom vllm.attention import backends\nb = backends.FLASH\n',
    "nested_fstring.py": 'import torch\nprint(f"{torch.device("cuda")}")\n',  # Python 3.12 syntax
    # The file's last word, with no newline after it, next to an f-string body: two words, not one.
    "fstring_then_last_word.py": "x = f'cuda:{0}'\nfrom torch import cuda",
}
CASES = [(n, d) for n, d in SOURCES if language_of(n, d[:128]) == "python"] + [
    (n, t.encode()) for n, t in TRICKY.items()]


def test_comments_and_plain_strings_are_not_code():
    facts = scan(b'import torch  # torch.cuda here\nlog("cuda nccl")\n')
    assert {"import", "torch", "log"} <= facts.words
    assert "cuda" not in facts.words and "nccl" not in facts.words
    assert facts.strings == ("cuda nccl",)
    assert not facts.unsure


def test_fstring_bodies_are_code_and_strings_with_their_head():
    facts = scan(b'x = f"cuda:{torch.cuda.current_device()}"\n')
    assert {"torch", "cuda", "current_device"} <= facts.words
    assert "cuda:" in facts.strings and "cuda:{torch.cuda.current_device()}" in facts.strings


@pytest.mark.parametrize("source,strings", [
    (b"x = 'it\\'s'  # q'\n", ("it\\'s", "it's")),
    (b'x = """a "b" \'c\' """\n', ('a "b" \'c\' ',)),
    (b"x = Rb'\\d'\n", ("\\d",)),
    (b'x = "cu\\x64a"\n', ("cu\\x64a", "cuda")),
    (b'x = b"\\x41"\n', ("\\x41", "A")),
    (b'x = "# no comment"; y = 1\n', ("# no comment",)),
])
def test_literals_are_read_as_python_reads_them(source, strings):
    facts = scan(source)
    assert facts.strings == strings
    assert "no" not in facts.words and "comment" not in facts.words


def test_an_fstring_split_by_a_nested_quote_makes_the_facts_unsure():
    assert scan(b'x = f"{d["cuda"]}"\n').unsure
    assert not scan(b'x = f"{d[0]:>{w}}"\n').unsure


def test_what_the_lexer_does_not_understand_makes_every_question_yes():
    facts = scan(b'x = "never closed\ny = 1\n')
    assert facts.unsure
    assert facts.has_word("anything") and facts.any_string(lambda s: False) and facts.may_name("a.b")


@pytest.mark.parametrize("rule", PYTHON_RULES, ids=[r.ID for r in PYTHON_RULES])
def test_a_rule_does_nothing_where_its_scout_declines(rule):
    engine = Engine(Settings(), rules=[rule], prefilter=False)
    options = RunOptions()
    declined = 0
    for name, data in CASES:
        if rule.scout(scan(data), options):
            continue
        declined += 1
        result = engine.convert(data, name)
        assert result.output is None and not result.outcome.findings, (rule.ID, name, result.outcome.findings)
    assert declined, f"{rule.ID}: its scout accepts every source, so this test checks nothing"


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_the_engine_with_scouts_converts_like_the_engine_without(name):
    data = TRICKY[name].encode()
    every = Settings(select=("ALL",))
    full = Engine(every, prefilter=False).convert(data, name)
    scouted = Engine(every).convert(data, name)
    assert scouted.output == full.output
    assert sorted(scouted.outcome.findings) == sorted(full.outcome.findings)


@pytest.mark.parametrize("name", ["comment_only.py", "docstring_only.py", "log_only.py"])
def test_cuda_in_prose_alone_is_not_parsed(name):
    data = TRICKY[name].encode()
    engine = Engine(Settings())
    assert engine.triggered(data, "python")[0], "the byte prefilter alone would parse it"
    assert engine.needs_parse(data, "python") == []


def test_a_file_one_rule_wants_runs_that_rule_and_the_rules_that_follow_changes():
    engine = Engine(Settings())
    chosen = {r.ID for r in engine.needs_parse(TRICKY["fstring_head.py"].encode(), "python")}
    assert "device-string" in chosen and "torch-npu-import" in chosen
    assert "vllm-device-arg" not in chosen and "unsupported-cuda-libs" not in chosen



def test_imported_roots_cover_every_import_form():
    facts = scan(b"import a.b as c, d\nfrom e.f import (g,\n h)\nimport x, \\\n   y_cuda\nif 1: import z\n"
                 b"raise E from F\nimport triton\nfrom . import rel\nfrom vllm.utils import numba; import w\n"
                 b"# import commented\ns = 'import quoted'\nfrom p.q import (\n    r,\n)\nimport importlib\n"
                 b"import fromage\n")
    assert facts.imported_roots == {"a", "d", "e", "x", "y_cuda", "z", "triton", "vllm", "w", "p", "importlib",
                                    "fromage"}


def test_the_last_word_of_a_file_without_a_final_newline_stays_a_word_next_to_an_fstring():
    for tail in (b"", b"\n"):
        data = b"x = f'cuda:{0}'\nfrom torch import cuda" + tail
        assert {"cuda", "torch", "import"} <= scan(data).words, tail
        result = Engine(Settings()).convert(data, "last_word.py")
        assert result.output == b"x = f'cuda:{0}'\nimport torch_npu\nfrom torch import npu" + tail


def test_quotes_inside_an_fstring_do_not_make_the_facts_unsure():
    facts = scan(b"x = f\"{cfg['device']}\"\n")
    assert not facts.unsure and "cfg" in facts.words


def _tokens(source: str):
    import io
    import tokenize

    return list(tokenize.generate_tokens(io.StringIO(source).readline))


def _literal_body(token: str) -> str:
    quote_at = min(i for i in (token.find("'"), token.find('"')) if i >= 0)
    quote = token[quote_at:quote_at + 3] if token[quote_at:quote_at + 3] in ("'''", '"""') else token[quote_at]
    return token[quote_at + len(quote):len(token) - len(quote)]


def _check_lexer_against_tokenize(source: str) -> None:
    import tokenize

    try:
        tokens = _tokens(source)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return
    facts = scan(source.encode("utf-8"))
    if facts.unsure:
        return
    for tok in tokens:
        if tok.type == tokenize.NAME and tok.string.isascii():
            assert tok.string in facts.words, (tok.string, source)
        elif tok.type == tokenize.STRING:  # the facts hold the bytes as latin-1: ASCII as it is
            body = _literal_body(tok.string).encode("utf-8").decode("latin-1")
            assert body in facts.strings, (tok.string, source)


def test_the_lexer_agrees_with_pythons_tokenizer_on_every_fixture():
    for _name, data in CASES:
        _check_lexer_against_tokenize(data.decode("utf-8"))


@pytest.mark.slow  # random programs from the Python grammar (built once, by the first test to draw)
@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_the_lexer_never_misses_a_name_or_a_literal_of_a_random_program(source):
    _check_lexer_against_tokenize(source)
    _check_lexer_against_tokenize(source.rstrip("\r\n"))  # a file need not end with a newline

"""The cheap text tests that spare the device-dispatch analysis its renderings and searches, and the
engine's fast path for patch targets: each says no only where the full test would find nothing."""

from __future__ import annotations

import re

import libcst as cst
import pytest

from npu_port.transpiler.analysis.dispatch import DISPATCH_PARAMETER, FileDispatch, code, guards_below
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.npu_patching import PATCHING_IMPORT
from npu_port.transpiler.core.python_source import _patch_targets


def _shapes(text: str) -> FileDispatch:
    return FileDispatch.of("m.py", text)


def test_words_compared_with_the_npu_name_either_way_round():
    text = ('if self.device_name == "npu":\n    pass\nif "NPU" != backend: pass\nx = a == "npu:0"\n'
            'if kind=="cuda": pass\n')
    assert _shapes(text).compared_with_npu == {"device_name", "backend", "a"}


def test_overlapping_comparisons_are_all_found():
    # The second comparison (`npu_x == "npu`) starts inside the first one's match, where finditer
    # would not look again.
    text = 'note = x == "npu_x == "npu"\n'
    assert _shapes(text).compared_with_npu == {"x", "npu_x"}


def test_a_name_that_is_not_one_word_is_never_ruled_out():
    shapes = _shapes('import torch_npu\nif x == "npu": pass\n')
    assert shapes.may_compare_with_npu("x")
    assert not shapes.may_compare_with_npu("device")
    assert shapes.may_compare_with_npu("cfg.device")  # the lookup's regex is searched for it as before


def test_no_quoted_npu_no_scan():
    assert _shapes("import torch_npu\ntorch.npu.synchronize()\n").compared_with_npu == frozenset()


def _function(source: str) -> cst.FunctionDef:
    node = cst.parse_module(source).body[0]
    assert isinstance(node, cst.FunctionDef)
    return node


@pytest.mark.parametrize("source, guarded", [
    ('def f(device_name="cuda"):\n    if device_name == "npu":\n        import torch_npu\n', True),
    ('def f(device_name="cuda"):\n    return torch.zeros(1, device=device_name)\n'
     'def g(d="cuda"):\n    return d == "npu"\n', False),
    ('def f(device="cuda"):\n    return torch_npu  # a comment: device == "npu"\n', True),
])
def test_parameter_defaults_as_before(source, guarded):
    shapes = _shapes(source)
    fn = _function(source)
    found = guards_below(fn, shapes, lambda node: None)
    assert [g for _, g in found] == ([DISPATCH_PARAMETER] if guarded else [])
    # The full test on the rendered body agrees, and a name it finds is always one the scan found.
    body = code(fn.body)
    for p in fn.params.params:
        name = re.escape(p.name.value)
        hit = re.search(rf"""\b{name}\s*(?:==|!=)\s*["'](?:npu|NPU)|["'](?:npu|NPU)["']\s*(?:==|!=)\s*{name}\b""", body)
        assert bool(hit) == guarded
        assert not hit or shapes.may_compare_with_npu(p.name.value)


def test_setting_lookup_default_needs_the_setting_compared():
    source = ('import torch_npu\nname = kwargs.get("device_name", "cuda")\nother = kwargs.get("dtype", "cuda")\n'
              'if self.device_name == "npu":\n    pass\n')
    shapes = _shapes(source)
    module = cst.parse_module(source)
    calls = [s.body[0].value for s in module.body[1:3]]  # type: ignore[attr-defined]
    assert [g for _, g in guards_below(calls[0], shapes, lambda node: None)] == [DISPATCH_PARAMETER]
    assert guards_below(calls[1], shapes, lambda node: None) == []


@pytest.mark.parametrize("call, patched", [
    ('setattr(torch.cuda, "Event", torch.npu.Event)', True),
    ('monkeypatch.setattr("torch.cuda.is_available", lambda: True)', True),
    ('mock.patch.object(torch.cuda, "synchronize")', True),
    ('unittest.mock.patch("torch.cuda.device_count")', True),
    ('my.helpers.patch("torch.cuda.x")', True),
    ('register(torch.cuda)', False),
    ('obj.patched(torch.cuda)', False),
    ('factory()(torch.cuda)', False),
    ('setattr()', False),
])
def test_patch_targets_of_calls(call, patched):
    node = cst.parse_expression(call)
    assert bool(_patch_targets(node)) == patched


@pytest.mark.parametrize("expression, dotted", [
    ("torch.cuda.synchronize", "torch.cuda.synchronize"), ("torch", "torch"), ("(torch).cuda", "torch.cuda"),
    ("f().cuda", None), ("a[0].b", None), ("'torch.cuda'", None), ("torch . cuda", "torch.cuda"),
])
def test_dotted_name(expression, dotted):
    assert dotted_name(cst.parse_expression(expression)) == dotted


def _reference(path: str, text: str) -> dict:
    """FileDispatch.of's answers as plain searches of the whole text (what it computed before it searched
    only where each pattern's literal starts occur)."""
    from npu_port.transpiler.analysis import dispatch as d

    npu = d.NPU_WORD.search(text) is not None
    return {"npu": npu, "npu_code": npu and d._NPU_CODE.search(text) is not None,
            "nvidia_tests": d._NVIDIA_TEST.search(text) is not None,
            "module_by_name": d._TORCH_GETATTR.search(text) is not None,
            "cuda_flags": re.search(r"\b(?:use_)?(?:cuda|gpu)\s*=", text) is not None,
            "rocm_variables": d._ROCM_VARIABLES.search(text) is not None,
            "stack": bool(d._NVIDIA_STACK_IMPORT.search(text)), "native": bool(d._NPU_FRAMEWORK_IMPORT.search(text) or PATCHING_IMPORT.search(text)),
            "predicate": d._NPU_PREDICATE.search(text) is not None, "resolvers": d._RESOLVERS.search(text) is not None,
            "compared": {m.group(1) for m in _overlapping(r"""\b(\w+)\s*(?:==|!=)\s*["'](?:npu|NPU)""", text)}
            | {m.group(1) for m in _overlapping(r"""["'](?:npu|NPU)["']\s*(?:==|!=)\s*(\w+)\b""", text)}}


def _overlapping(pattern: str, text: str):
    compiled = re.compile(pattern)
    match = compiled.search(text)
    while match:
        yield match
        match = compiled.search(text, match.start() + 1)


def _answers(path: str, text: str) -> dict:
    from npu_port.transpiler.analysis import dispatch as d

    shapes = FileDispatch.of(path, text)
    return {"npu": shapes.npu, "npu_code": shapes.npu_code, "nvidia_tests": shapes.nvidia_tests,
            "module_by_name": shapes.module_by_name, "cuda_flags": shapes.cuda_flags,
            "rocm_variables": shapes.rocm_variables, "stack": shapes.nvidia_stack.startswith("it imports"),
            "native": shapes.npu_framework.startswith("it imports"),
            "predicate": "npu" in text and d._found_at(d._NPU_PREDICATE, text, ("is_",)),
            "resolvers": d._found_at(d._RESOLVERS, text, d._RESOLVER_NAMES), "compared": set(shapes.compared_with_npu)}


ODD_TEXTS = [
    "", "npu", "NPU", "xnpu npux Npu_ HCCL Ascend", "aſcend", "ascend", "é npu", "torch.npuX torch.npu.x", "is_npu_available()",
    "if  device\n   ==\t'npu:0': pass", "a === 'npu'", "x != \"NPU\"", "'npu' ==\u00a0dev", "use_cuda = 1", "use_gpu=2",
    "cuda =", "xcuda=1", "HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICESX", "is_nvidia", "torch.version.hip",
    "rocm_path", "getattr( torch , name)", "getattr(torch, 'cuda')", "import cupy", "  from nixl_x import y",
    "import vllm_ascend", "from mindspeed_llm import x", "from a import get_device_name", "ok = x == \"npu_x == \"npu\"",
    "\u00b7dev == 'npu'", "dév == 'npu'", "== 'npu'", "'npu'== 3",
]


@pytest.mark.parametrize("text", ODD_TEXTS)
def test_file_dispatch_answers_the_plain_searches(text):
    assert _answers("m.py", text) == _reference("m.py", text)


def test_file_dispatch_answers_the_plain_searches_on_the_fixtures():
    from fixture_cases import all_cases

    sources = [c.input for c in all_cases() if c.input.suffix == ".py"]
    assert sources
    for path in sources:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert _answers(str(path), text) == _reference(str(path), text), path

"""The plain-PyTorch rules tf32-hf32, profiler-npu, nvidia-smi and unsupported-cuda-libs: their tables
against the real torch_npu API, their triggers, and behaviour the fixtures do not pin down."""

from __future__ import annotations

import re

import pytest

from npu_port.codemods.cuda_version_probes import CudaVersionProbes, probes
from npu_port.codemods.nvidia_smi import NvidiaSmiToNpuSmi
from npu_port.codemods.profiler_npu import ProfilerToNpu, profiler_table
from npu_port.codemods.tf32_hf32 import TF32ToHF32, backend_rows
from npu_port.codemods.unsupported_cuda_libs import UnsupportedCudaLibraries, library_rows
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.tables import api_facts
from npu_port.transpiler.tables.mapping import load_table

RULES = (TF32ToHF32, ProfilerToNpu, NvidiaSmiToNpuSmi, UnsupportedCudaLibraries)
TABLES = ("backends", "profiler", "smi", "unsupported_libraries")
_NPU_NAME = re.compile(r"\b(?:torch_npu|torch\.npu)(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _npu_name_exists(dotted: str) -> bool:
    """The longest known module prefix of `dotted` must export the next component."""
    facts = api_facts.load("torch_npu")
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if facts.knows_module(module):
            return facts.has(module, parts[cut]) or facts.knows_module(".".join(parts[:cut + 1]))
    return False


def _strings(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key != "source":  # where a fact was read, not a name the tool emits or recommends
                yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


@pytest.mark.parametrize("table", TABLES)
def test_every_torch_npu_name_a_table_emits_or_recommends_exists(table):
    names = {m.group(0).rstrip(".") for text in _strings(load_table("ascend", table))
             for m in _NPU_NAME.finditer(text)}
    missing = sorted(n for n in names if not _npu_name_exists(n))
    assert not missing, f"{table}.yaml names torch_npu API the snapshot lacks: {missing}"


def test_profiler_moves_only_names_torch_npu_profiler_exports():
    table = profiler_table("ascend")
    facts = api_facts.load("torch_npu")
    assert table.move <= set(facts.names(table.npu_module))
    assert "record_function" not in table.move  # torch_npu.profiler lacks it: it must stay on torch.profiler


def test_hf32_targets_exist():
    exact, _ = backend_rows("ascend")
    renames = [row.npu for row in exact.values() if row.status == "rename"]
    assert renames == ["torch.npu.matmul.allow_hf32", "torch.npu.conv.allow_hf32"]
    assert all(_npu_name_exists(r) for r in renames)


def test_every_library_row_is_reachable_through_the_prefilter():
    for row in library_rows("ascend"):
        assert UnsupportedCudaLibraries.matches(f"import {row.module}"), row.module


def test_every_probe_row_is_reachable_through_the_prefilter():
    """The code spells every part of a name its imports resolve to: one part of each probe must trigger
    the rule; a variable and a program (in a string, as the rule reads them) must too."""
    table = probes("ascend")
    for name in (*table.reads, *table.calls, *table.capability_calls, *table.property_calls):
        assert any(CudaVersionProbes.matches(part) for part in name.split(".")), name
    for variable in table.env:
        assert CudaVersionProbes.matches(f'os.environ["{variable}"]'), variable
    for program in table.programs:
        assert CudaVersionProbes.matches(f'run(["/usr/bin/{program}", "-v"])'), program
        assert CudaVersionProbes.matches(f'run("{program}\\t-v")'), program


@pytest.mark.parametrize("rule", RULES, ids=[r.ID for r in RULES])
def test_docstring_has_the_user_doc_sections(rule):
    doc = rule.description()
    for section in ("What it does:", "Why:", "Example:", "Fix safety:"):
        assert section in doc, f"{rule.ID}: missing {section}"


def _convert(source: str, *rules: str):
    engine = Engine(Settings(select=rules))
    result = engine.convert(source.encode(), "case.py")
    out = result.output.decode() if result.output is not None else source
    return out, result.outcome.findings


def test_ignore_comment_keeps_a_profiler_import():
    src = "from torch.profiler import profile, record_function  # npu-port: ignore[profiler-npu]\n"
    out, findings = _convert(src, "profiler-npu")
    assert out == src
    assert not [f for f in findings if f.kind == "change"]


def test_profiler_split_keeps_other_statements_on_the_line():
    src = "import os; from torch.profiler import profile, record_function; x = 1\n"
    out, _ = _convert(src, "profiler-npu")
    assert out == ("import os; from torch_npu.profiler import profile; "
                   "from torch.profiler import record_function; x = 1\n")


def test_profiler_member_of_a_user_enum_named_like_torch_is_kept():
    src = "import torch\nclass ProfilerActivity:\n    CUDA = 1\nx = ProfilerActivity.CUDA\n"
    out, findings = _convert(src, "profiler-npu")
    assert out == src and not findings


def test_key_averages_is_only_reported_where_the_profiler_moved():
    untouched = "def f(prof):\n    return prof.key_averages()\n"
    assert _convert(untouched, "profiler-npu")[1] == []
    moved = "from torch.profiler import profile\n" + untouched
    findings = _convert(moved, "profiler-npu")[1]
    assert [(f.line, f.kind) for f in findings if f.kind == "finding"] == [(3, "finding")]


def test_hf32_rewrite_uses_the_local_torch_alias_inside_a_function():
    src = "def f():\n    import torch as T\n    from torch.backends import cudnn\n    cudnn.allow_tf32 = True\n"
    out, _ = _convert(src, "tf32-hf32")
    assert "    T.npu.conv.allow_hf32 = True\n" in out


@pytest.mark.parametrize("src", [
    'import subprocess\nsubprocess.run("nvidia-smi -q", shell=True)\n',
    'import subprocess\nsubprocess.run("nvidia-smi > out.txt", shell=True)\n',
    'import subprocess\nsubprocess.run("nvidia-smi > /dev/null")\n',  # no shell: `>` would be an argument
    'import subprocess\nsubprocess.run(["nvidia-smi"], stdout=open("smi.log", "w"))\n',
    'import os\nos.system(f"nvidia-smi -i {0}")\n',
])
def test_nvidia_smi_with_arguments_or_kept_output_is_not_rewritten(src):
    out, findings = _convert(src, "nvidia-smi")
    assert out == src
    assert any(f.kind == "finding" for f in findings)


def test_guarded_import_is_info_and_unguarded_is_warning():
    src = ("try:\n    import flash_attn\nexcept (ImportError, OSError):\n    flash_attn = None\n"
           "import cupy\n")
    findings = _convert(src, "unsupported-cuda-libs")[1]
    assert [(f.line, f.severity) for f in findings] == [(2, "info"), (5, "warning")]


def test_flash_attention_2_in_transformers_is_not_reported():
    src = ('from transformers import AutoModel\n'
           'm = AutoModel.from_pretrained("x", attn_implementation="flash_attention_2")\n')
    assert _convert(src, "unsupported-cuda-libs")[1] == []

"""What the prefilter gives the scouts beyond the lexical facts: the file's path and its `ast`. Each
decline is checked against the rule run alone without the prefilter: where the scout says no, the rule
must do nothing (tests/test_scout.py holds the scouts to the same on every fixture)."""

from __future__ import annotations

import libcst as cst
import pytest

from npu_port.transpiler.analysis.imports import bindings_of
from npu_port.transpiler.analysis.source_facts import scan
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.rules import RunOptions
from npu_port.transpiler.core.settings import Settings

RULES = all_rules()

# (rule id, path, source, whether its scout may decline it): each "declines" case is a shape real
# repositories have in numbers (vllm-ascend's own package, trl's usage docstrings, Triton's
# tl.extra.cuda, setup.py files without a CUDA-only requirement); each other one a near miss that the
# scout must keep accepting.
CASES = [
    # vllm-spawn-env: files that name vllm without importing it, or set the variable already.
    ("vllm-spawn-env", "t.py", 'PLATFORM = "vllm"\nimport torch\n', True),
    ("vllm-spawn-env", "t.py", 'import os\nos.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"\nfrom vllm import LLM\n',
     True),
    ("vllm-spawn-env", "t.py", "def f():\n    from vllm import LLM\n    return LLM\n", False),
    ("vllm-spawn-env", "t.py", "import vllm.distributed as d\n# VLLM_WORKER_MULTIPROC_METHOD unset\n", False),
    ("torch-npu-import", "repo/vllm_ascend/ops/x.py", "import torch\nx = torch.npu.current_device()\n", True),
    ("torch-npu-import", "repo/tools/x.py", "import torch\nx = torch.npu.current_device()\n", False),
    ("env-var-names", "scripts/serve.py",
     '"""Usage:\n\n    CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model m\n"""\nimport os\n'
     'def f():\n    """Run with CUDA_VISIBLE_DEVICES=1."""\n    return os.environ.get("HOME")\n', True),
    ("env-var-names", "scripts/serve.py", 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n', False),
    ("env-var-names", "scripts/serve.py", 'import os\nos.environ.update(CUDA_VISIBLE_DEVICES="0")\n', False),
    ("env-var-names", "scripts/serve.py",
     'import os\nNAME = "CUDA_VISIBLE_DEVICES"\n"""a string statement"""\nos.environ[NAME] = "0"\n', False),
    ("tensor-cuda-method", "ops/k.py",
     "import triton.language as tl\ndef k():\n    tl.extra.cuda.gdc_wait()\n", True),
    ("tensor-cuda-method", "ops/k.py", "from vllm.platforms import current_platform\nok = current_platform.is_cuda()\n",
     False),
    ("tensor-cuda-method", "ops/k.py", "import torch\nx = torch.zeros(1).cuda \\\n    ()\n", False),
    ("tensor-cuda-method", "ops/k.py", "import torch\nx = torch.zeros(1)\nok = x.is_cuda\n", False),
    ("tensor-cuda-method", "ops/k.py", "import torch\nm = torch.nn.Linear(1, 1)\n(m  # c\n .cuda)()\n", False),
    ("tensor-cuda-method", "ops/k.py", 'import torch\nprint(f"{torch.zeros(1).cuda()}")\n', False),
    ("tensor-cuda-method", "ops/k.py", "import torch\nx = torch.cuda.current_device()  # or t.cuda()\n", True),
    ("cuda-only-deps", "setup.py",
     'from setuptools import setup\nsetup(name="p", install_requires=["numpy", "torch>=2"])\n', True),
    ("cuda-only-deps", "setup.py",
     'from setuptools import setup\nsetup(name="p", install_requires=["numpy", "flash-attn>=2"])\n', False),
    ("cuda-only-deps", "collect_env.py", 'def pip_packages():\n    return run(["pip", "list"])\n', True),
    ("cuda-version-probes", "main_ppo.py", 'def f(config):\n    return config.tool == "nsys"\n', True),
    ("cuda-version-probes", "x.py", 'import subprocess\nsubprocess.run("nvcc\\t--version", shell=True)\n', False),
    ("cuda-version-probes", "x.py", 'import os\nhome = os.environ["CUDA_HOME"]\n', False),
    ("cuda-version-probes", "ops/k.py", 'import torch\ncores = torch.npu.get_device_properties(0).vector_core_num\n', True),
    # megatron-fusions: verl passes Megatron's keywords to helpers of its own before the config class sees them.
    ("megatron-fusions", "c.py", "def convert(hf):\n    return _base_config(hf, apply_rope_fusion=True)\n", True),
    ("megatron-fusions", "c.py",
     "from megatron.core.transformer import TransformerConfig as T\ncfg = T(num_layers=2, apply_rope_fusion=True)\n", False),
    ("megatron-fusions", "c.py", 'def f(cfg):\n    cfg["override_transformer_config"] = {"apply_rope_fusion": True}\n', False),
    ("megatron-fusions", "c.py", 'ARGS = ["+override_transformer_config.apply_rope_fusion=True"]\n', False),
    ("cuda-version-probes", "ops/k.py", 'import torch\np = torch.npu.get_device_properties(0)\nok = p.major >= 8\n', False),
    ("unsupported-cuda-libs", "t.py", 'import importlib\nkw = importlib.import_module("pkg.warmup")\n', True),
    ("unsupported-cuda-libs", "t.py", 'import importlib\nm = importlib.import_module("flash_attn")\n', False),
    # torch-cuda-api: `torch` and `cuda` both in the code, but no name the imports resolve under torch.cuda
    # (Triton's tl.extra.cuda, another module's `m.torch.cuda`, a tensor's `.cuda()`).
    ("torch-cuda-api", "ops/k.py",
     "import torch\nimport triton.language as tl\ndef k():\n    tl.extra.cuda.gdc_wait()\n    return torch.empty(1)\n",
     True),
    ("torch-cuda-api", "t.py", "import torch\nfrom vllm.distributed import comm\nstream = comm.torch.cuda.Stream\n", True),
    ("torch-cuda-api", "t.py", "import torch\nx = torch.zeros(1)\ny = x.cuda()\nz = torch.ones(1).cuda()\n", True),
    ("torch-cuda-api", "t.py", "import torch as T\nT.cuda.synchronize()\n", False),
    ("torch-cuda-api", "t.py", "import torch.nn\nx = (torch).cuda.current_device()\n", False),
    ("torch-cuda-api", "t.py", "import torch\nx = torch.\\\n    cuda.current_device()\n", False),
    ("torch-cuda-api", "t.py", "from torch import cuda\ncuda.synchronize()\n", False),
    ("torch-cuda-api", "t.py", "from torch import cuda as c\n", False),
    ("torch-cuda-api", "t.py", "import torch  \\\n    .cuda as tc\n", False),
    ("torch-cuda-api", "t.py", "from torch  \\\n    .cuda import Stream\n", False),
    # vllm-device-arg: vLLM files pass device= to torch, and verl re-exports its own LLM.
    ("vllm-device-arg", "r.py", 'from vllm import LLM\nimport torch\nx = torch.zeros(1, device="cuda")\nllm = LLM(model="m")\n',
     True),
    ("vllm-device-arg", "r.py", 'from verl.third_party.vllm import LLM\nllm = LLM(model="m", device="cuda")\n', True),
    ("vllm-device-arg", "r.py",
     'from vllm import LLM\nfrom vllm.distributed.device_communicators.pynccl import PyNcclCommunicator\n'
     'comm = PyNcclCommunicator(group, device=rank)\n', True),
    ("vllm-device-arg", "r.py", 'from vllm import LLM\ndef build(device="cuda", cls=LLM):\n    return cls\n', True),
    ("vllm-device-arg", "r.py", 'import vllm as v\nllm = v.LLM(model="m", device="cuda")\n', False),
    ("vllm-device-arg", "r.py", 'from vllm import LLM\nllm = LLM(model="m", device \\\n    = "cuda")\n', False),
    ("vllm-device-arg", "r.py",
     'from vllm import LLM\nllm = LLM(\n    model=get(("m")),  # the model )\n    device="cuda",\n)\n', False),
    ("vllm-device-arg", "r.py", 'from vllm import LLM\nprint(f"{LLM(model=\')\', device=\'cuda\')}")\n', False),
    ("vllm-device-arg", "r.py", 'from vllm import LLM as Engine\ndef f(dev):\n    return Engine(model="m", device=dev)\n',
     False),
    ("vllm-device-arg", "r.py",
     'def f():\n    import vllm.engine.arg_utils\n    return vllm.engine.arg_utils.EngineArgs(model="m", device="cuda")\n',
     False),
    # bitsandbytes-npu: trl names the class in imports, type hints, isinstance tests and docstrings.
    ("bitsandbytes-npu", "t.py",
     'from transformers import BitsAndBytesConfig\ndef f(q: "BitsAndBytesConfig | None" = None):\n'
     '    """q ([`~transformers.BitsAndBytesConfig`]): BitsAndBytesConfig(load_in_8bit=True)"""\n'
     '    return isinstance(q, BitsAndBytesConfig)\n', True),
    ("bitsandbytes-npu", "t.py", 'from transformers import BitsAndBytesConfig as B\nq = B(load_in_4bit=True)\n', False),
    ("bitsandbytes-npu", "t.py",
     'from transformers import (\n    BitsAndBytesConfig  # the config\n    as Q,\n)\nq = Q(load_in_8bit=True)\n', False),
    ("bitsandbytes-npu", "t.py",
     'from transformers import BitsAndBytesConfig\nq = (BitsAndBytesConfig) \\\n    (load_in_4bit=True, bnb_4bit_quant_type="fp4")\n',
     False),
    ("bitsandbytes-npu", "t.py", 'import transformers as t\nq = t.BitsAndBytesConfig(load_in_8bit=(True))\n', False),
    ("bitsandbytes-npu", "t.py",
     'from transformers.utils import quantization_config as qc\nq = qc.BitsAndBytesConfig(bnb_4bit_use_double_quant=True)\n',
     False),
    # amp-device, device-string, nccl-backend (the string-position rules) and verl-device: "cuda" (or "nccl")
    # in a list of language names or profiler contents, in a file that spells none of the rules' positions.
    ("amp-device", "sandbox/utils.py", 'SUPPORTED_LANGUAGES = ["python", "cuda", "rust"]\ndef run(code, language="python"):\n    return language in SUPPORTED_LANGUAGES\n', True),
    ("device-string", "sandbox/utils.py", 'SUPPORTED_LANGUAGES = ["python", "cuda", "rust"]\ndef run(code, language="python"):\n    return language in SUPPORTED_LANGUAGES\n', True),
    ("verl-device", "sandbox/utils.py", 'SUPPORTED_LANGUAGES = ["python", "cuda", "rust"]\ndef run(code, language="python"):\n    return language in SUPPORTED_LANGUAGES\n', True),
    ("amp-device", "profiler/config.py", 'from dataclasses import dataclass, field\n@dataclass\nclass ProfilerConfig:\n    contents: list[str] = field(default_factory=list)\n'
     '    def __post_init__(self):\n        support = ["cuda", "cpu"]\n        assert all(c in support for c in self.contents)\n', True),
    ("device-string", "profiler/config.py", 'from dataclasses import dataclass, field\n@dataclass\nclass ProfilerConfig:\n    contents: list[str] = field(default_factory=list)\n'
     '    def __post_init__(self):\n        support = ["cuda", "cpu"]\n        assert all(c in support for c in self.contents)\n', True),
    ("verl-device", "profiler/config.py", 'from dataclasses import dataclass, field\n@dataclass\nclass ProfilerConfig:\n    contents: list[str] = field(default_factory=list)\n'
     '    def __post_init__(self):\n        support = ["cuda", "cpu"]\n        assert all(c in support for c in self.contents)\n', True),
    ("device-string", "t.py", 'NAMES = ["cuda", "cpu"]\nTEMPLATE = f"""\n# write the result to stdout\nprint({NAMES})\n"""\n', True),  # an f-string's text counts as code: `to` without a dot
    ("nccl-backend", "t.py", 'BACKENDS = ["nccl", "gloo"]\n', True),
    ("verl-device", "t.py", 'import torch\nx = torch.zeros(1, device="cuda")\n', True),
    ("device-string", "t.py", 'import torch\nx = torch.zeros(1)\ny = x.\\\n    to("cuda")\n', False),
    ("device-string", "t.py", 'cfg = {"map_location": "cuda"}\n', False),
    ("device-string", "t.py", 'import argparse\np = argparse.ArgumentParser()\np.add_argument("--rollout-device", default="cuda")\n',
     False),
    ("device-string", "t.py", 'DEVICE = "cuda"\n', False),
    ("device-string", "t.py", 'def put(x, where):\n    return x.to(where)\nput(1, "cuda:0")\n', False),
    ("amp-device", "t.py", 'import torch\nwith torch.autocast("cuda"):\n    pass\n', False),
    ("amp-device", "t.py", 'import torch as T\nkind = "cuda"\nwith T.amp.autocast(device_type=kind):\n    pass\n', False),
    ("nccl-backend", "t.py", 'import torch.distributed as dist\ndist.init_process_group("nccl")\n', False),
    ("verl-device", "t.py", 'cfg["trainer"]["device"] = "cuda"\n', False),
    ("verl-device", "t.py", 'trainer = RayPPOTrainer(config=c, device_name="cuda")\n', False),
    ("verl-device", "t.py", 'from omegaconf import OmegaConf\nOmegaConf.update(cfg, "trainer.device", "cuda")\n', False),
    # unknown-npu-api, on the import statements and name chains the lexer finds: a port names torch.npu and
    # torch_npu all over, and only a name torch_npu lacks needs a parse.
    ("unknown-npu-api", "t.py", "import torch\nimport torch_npu\ntorch.npu.synchronize()\nx = torch_npu.npu_rms_norm\n",
     True),
    ("unknown-npu-api", "t.py", 'import torch\nprint("torch.npu.synchronise()")  # torch.npu.synchronise()\n', True),
    ("unknown-npu-api", "t.py", "import torch\nfrom torch import npu\nnpu.synchronize()\nx = y.npu.synchronise\n", True),
    ("unknown-npu-api", "t.py", "import torch\ntorch.npu.synchronise()\n", False),
    ("unknown-npu-api", "t.py", "import torch\nx = (torch).npu.synchronise()\n", False),
    ("unknown-npu-api", "t.py", "import torch\nx = ((torch  # c\n  ).npu\n  .synchronise)()\n", False),
    ("unknown-npu-api", "t.py", "import torch\nx = torch.npu. \\\n    synchronise()\n", False),
    ("unknown-npu-api", "t.py", "def f():\n    from torch import npu as n\n    return n.synchronise()\n", False),
    ("unknown-npu-api", "t.py", "import torch_npu.contrib.nope\n", False),
    ("unknown-npu-api", "t.py", "from torch_npu import (\n    npu_rms_norm,  # real\n    npu_nope,\n)\n", False),
    ("unknown-npu-api", "t.py", 'import torch\nprint(f"{torch.npu.synchronise()}")\n', False),
    # broken-device-dispatch, on the tokens beside each NPU literal: a port passes "npu" to many calls.
    ("broken-device-dispatch", "t.py",
     'import torch\nx = torch.zeros(1, device="npu")\ny = torch.ones(1, device="npu")\nf(a, "npu", b)\n', True),
    ("broken-device-dispatch", "t.py", 'msg = ("device " "npu")\nother = "npu"\nkind = ("n" "pu")\n', True),
    ("broken-device-dispatch", "t.py", 'import torch\nd = "npu" if torch.npu.is_available() else ("npu")\n', False),
    ("broken-device-dispatch", "t.py", 'def f(name):\n    if name == "npu":\n        return 1\n    if name == ( # c\n'
     '        "npu"):\n        return 2\n', False),
    ("broken-device-dispatch", "t.py", 'DEVICES = "npu", "npu"\n', False),
    ("broken-device-dispatch", "t.py", 'DEVICES = [("npu"), "cpu", "npu:0".split(":")[0], "npu"]\n', False),
    ("broken-device-dispatch", "t.py", 'DEVICES = ["n" "pu", "npu"]\n', False),
    ("broken-device-dispatch", "t.py", 'DEVICES = ["np\\x75", "npu"]\n', False),
    ("broken-device-dispatch", "t.py", 'import ray\nray.util.collective.init_collective_group(1, 0, "HCCL")\n', False),
]


# The cases a scout must accept although its rule leaves them alone (telling them apart would cost more than
# the parse); every other case a scout accepts is a near miss that its rule acts on.
ACCEPTED_FOR_NOTHING = {
    'import os\nNAME = "CUDA_VISIBLE_DEVICES"\n"""a string statement"""\nos.environ[NAME] = "0"\n',
    "from vllm.platforms import current_platform\nok = current_platform.is_cuda()\n",
    'DEVICES = ["n" "pu", "npu"]\n',  # broken-device-dispatch takes no glued literal for a value; its scout may
}


@pytest.mark.parametrize("rule_id,path,source,declines", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_scout_declines_only_where_its_rule_does_nothing(rule_id, path, source, declines):
    rule = RULES[rule_id]
    data = source.encode()
    wanted = rule.scout(scan(data, path), RunOptions())
    assert wanted is not declines, (rule_id, path)
    result = Engine(Settings(), rules=[rule], prefilter=False).convert(data, path)
    acts = result.output is not None or bool(result.outcome.findings)
    if not wanted:
        assert not acts, result.outcome.findings
    elif source not in ACCEPTED_FOR_NOTHING:
        assert acts, "a near miss the rule no longer acts on tests nothing"


def test_the_engine_gives_the_scouts_the_path_the_file_is_converted_under():
    data = b"import torch\nx = torch.npu.current_device()\n"
    engine = Engine(Settings())
    assert engine.needs_parse(data, "python", "repo/vllm_ascend/x.py") == []
    assert engine.needs_parse(data, "python", "repo/tools/x.py")
    assert engine.convert(data, "repo/vllm_ascend/x.py").outcome.status == "skipped"
    assert engine.convert(data, "repo/tools/x.py").outcome.findings


def test_a_file_without_an_ast_here_is_wanted_by_every_ast_question():
    facts = scan(b'import torch\nprint(f"{torch.device("cuda")}")\n')  # Python 3.12 syntax: unsure
    assert facts.tree is None and facts.any_node(lambda n: False) and facts.any_code_string(lambda s: False)
    facts = scan(b"def f(:\n    x.cuda()\n")  # a syntax error: no tree, so every question is yes
    assert facts.tree is None and facts.any_node(lambda n: False)


def test_code_strings_leave_out_string_statements_only():
    facts = scan(b'"""doc A"""\nx = "B"\ndef f():\n    "doc C"\n    return b"D", f"E{x}"\n')
    assert set(facts.code_strings or ()) == {"B", "D", "E"}


def test_the_code_text_has_no_comments_or_string_contents_but_fstring_bodies():
    facts = scan(b'x = "a.cuda()"  # b.cuda()\ny = f"{c.cuda()}"\nz = """d.cuda()"""\n')
    assert "a.cuda" not in facts.code and "b.cuda" not in facts.code and "d.cuda" not in facts.code
    assert "c.cuda()" in facts.code
    assert facts.short_strings == ("a.cuda()", "{c.cuda()}", "")  # the f-string's text and its head


def test_a_name_in_a_single_quoted_literal_needs_no_ast():
    facts = scan(b'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    assert facts.any_code_string(lambda s: "CUDA_VISIBLE_DEVICES" in s)
    assert "code_strings" not in vars(facts) and "tree" not in vars(facts)  # never parsed


def test_import_bindings_read_the_imports_as_the_rules_import_table_does():
    source = ("import a.b, c as d\nimport e.f as g\nfrom h.i import j, k as m\nfrom . import n\nfrom .o import p\n"
              "from q import *\ndef f():\n    import r\n    from s import t as u\n")
    module = cst.parse_module(source)
    found: list = []

    class Imports(cst.CSTVisitor):
        def visit_Import(self, node):
            found.extend((local, b.target) for local, b in bindings_of(node))

        def visit_ImportFrom(self, node):
            found.extend((local, b.target) for local, b in bindings_of(node))

    module.visit(Imports())
    facts = scan(source.encode())
    assert sorted(facts.import_bindings or ()) == sorted(found)
    assert facts.names_bound_toward(["h.i.j.x", "e.f.y", "a.z"]) == {"j", "g", "a"}
    assert scan(b"def f(:\n    import a\n").names_bound_toward(["a"]) is None  # no ast: the caller says yes

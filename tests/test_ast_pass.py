"""The report-only pass on `ast` (core/ast_pass) against the LibCST pass it stands in for: the same
findings in the same order on every fixture and on odd texts, or a decline (the LibCST path then)."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_port.transpiler.core import ast_pass, python_source
from npu_port.transpiler.core.cst_walk import transform
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.rules import PythonContext, RunOptions
from npu_port.transpiler.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = RunOptions()
TWINNED = [r for r in all_rules().values() if r.LANGUAGE == "python" and r.AST_TWIN]


def libcst_run(data: bytes, path: str, rule, options: RunOptions = OPTIONS):
    """(findings, whether the rule changed the file) of the LibCST pass."""
    module = python_source.parse(data, path)
    ctx = PythonContext(path, data.decode(module.encoding, errors="replace"), module, options)
    instance = rule(ctx)
    updated = transform(module, python_source._Dispatcher([instance], ctx))
    instance.finalize(module, updated)
    ctx.resolve_pending()
    return ctx.findings, ctx.changed


def libcst_findings(data: bytes, path: str, rule):
    return libcst_run(data, path, rule)[0]


def compare(data: bytes, rule, path: str = "x.py", options: RunOptions = OPTIONS):
    """The ast pass's findings (None: declined), having checked them against LibCST's, and that the
    LibCST pass changes nothing where the ast pass answers (a twin of a rule that rewrites declines where
    it would change the file)."""
    found = ast_pass.report(data, path, [rule], options)
    if found is not None:
        assert (found, False) == libcst_run(data, path, rule, options)
    return found


def test_some_rule_has_a_twin_and_twins_of_rules_that_change_code_are_held_to_declining():
    """The pass runs where every rule a file needs has a twin and answers only where none changes the
    file: `compare` holds every twin to it (a rule that rewrites, one that only follows other rules'
    changes, or a report-only one)."""
    assert TWINNED
    assert any(r.SAFETY != "report-only" and not r.FOLLOWS_CHANGES for r in TWINNED)


FIXTURES = sorted(p for p in (ROOT / "fixtures").rglob("*.py"))


@pytest.mark.parametrize("rule", TWINNED, ids=lambda r: r.ID)
def test_every_fixture_reads_the_same(rule):
    answered = 0
    for path in FIXTURES:
        data = path.read_bytes()
        try:
            python_source.parse(data, str(path))
        except python_source.SourceError:
            assert ast_pass.report(data, str(path), [rule], OPTIONS) in (None, [])
            continue
        answered += compare(data, rule, str(path)) is not None
    assert answered >= 0.8 * len(FIXTURES), "the ast pass declines most fixtures"


ODD = {
    "decorators": "import triton\n@ (triton.jit)\ndef k(x):\n    pass\n@triton.autotune(configs=[triton.Config({})])\n"
                  "@triton.jit\ndef k2(x):\n    return k[1](x)\n",
    "elif_chain": "import torch\nimport cupy as cp\nif torch.npu.is_available():\n    x = 1\nelif ok:\n    cp.asarray(1)\n"
                  "else:\n    if y:\n        cp.zeros(2)\n",
    "npu_twins": "import torch, pynvml\ndef seed(s):\n    torch.cuda.manual_seed(s); pynvml.nvmlInit()\n"
                 "    if is_npu_available():\n        torch.npu.manual_seed(s)\n",
    "test_comments": "import pynvml\nif (ready  # on npu\n    ):\n    pynvml.nvmlInit()\n",
    "from_modules": "import bitsandbytes\nfrom bitsandbytes.nn import Linear8bitLt as L\nx = L(1)\n",
    "try_suite": "try: import flash_attn\nexcept ImportError: flash_attn = None\nflash_attn.flash_attn_func(q)\n",
    "non_ascii": "import cupy as cp\nnom = 'é'; v = cp.asarray(nom)  # ü\nif x:\n\tw = 'ü' if y else cp.ones(1)\n",
    "async_and_class": "class A:\n    import xformers\n    async def f(self):\n        import xformers.ops as xops\n"
                       "        return xops.memory_efficient_attention(q)\n",
    "getattr_device": "import torch, pynvml\ndef mod(name):\n    pynvml.nvmlInit()\n    return getattr(torch, name)\n",
    "registry": "import pynvml\n@register(device='cuda')\ndef f(device='cuda'):\n    return pynvml.nvmlInit()\n",
    "cuda_flag": "import pynvml\nMergeOptions(cuda=pynvml.nvmlInit())\ntorch.load(f, cuda=pynvml.x)\n",
    "nvidia_tests": "import pynvml\nif is_nvidia and pynvml.ok and more:\n    pynvml.nvmlInit()\n"
                    "y = pynvml.a if torch.version.cuda else None\n",
    "subscript_tuple": "import cupy\nd = {}\nd['cuda', 'npu'] = cupy.asarray(1)\nx = ('cuda', 'npu', cupy.zeros(1))\n",
    "mapping": "import cupy\ndev = 'cuda' if name == 'gpu' else name\ncupy.asarray(dev)\n",
    "glued": "import torch\nload_inline(name='x', cuda_sources=None, sources=['a' '.cu'])\n"
             "from torch.utils.cpp_extension import load\n_ext = load(name='e', sources=[f'k.cu'])\n_ext.run(x)\n",
    "dynamic": "import importlib\nm = importlib.import_module('cupy')\nn = __import__('pynvml')\n",
    "patched": "import torch, cupy\ntorch.cuda.Stream = cupy.cuda.Stream\nsetattr(torch.cuda, 'x', cupy.y)\n",
    "binding_names": "import bitsandbytes\ndef f():\n    global bitsandbytes\n    try:\n        pass\n"
                     "    except ImportError as bitsandbytes:\n        pass\n",
    "lambda_walrus_match": "import cupy as cp\nf = lambda a=cp.ones(1): a\nif (n := cp.zeros(1)) is not None:\n"
                           "    match n:\n        case {'k': v}:\n            cp.asarray(v)\n",
    "compare_resolver": "from verl.utils.device import get_device_name\nimport pynvml\n"
                        "if get_device_name() == 'cuda':\n    pynvml.nvmlInit()\n",
    "npu_lookup": "import pynvml\ndef f(cfg, device='cuda'):\n    d = cfg.get('device', 'cuda')\n"
                  "    if device == 'npu' or d == 'npu':\n        return torch.npu\n    pynvml.nvmlInit()\n",
    "comments_beside": "import pynvml\ndev = 'x' if npu_ok else 'cuda'  # npu\nif (ok  # is_nvidia\n    ):\n"
                       "    pynvml.nvmlInit()\ny = (\n    # npu\n    a if b else pynvml.c)\nz = (a if b else pynvml.d)  # npu\n",
    "rocm": "import pynvml\ndef vis():\n    os.environ.get('HIP_VISIBLE_DEVICES')\n    pynvml.nvmlInit()\nis_hip = 1\n",
    # unknown-npu-api's shapes: names a port invented, through imports, aliases, parentheses and scopes.
    "npu_api_imports": "import torch, torch_npu.nope as tn\nimport torch_npu.profiling\nfrom torch_npu.contrib import x\n"
                   "from  torch_npu.nope2 import y\nfrom torch.npu import synchronise, amp\nfrom torch import npu as dm\n"
                   "from torch_npu.npu import * \nfrom . import torch_npu\n",
    "npu_api_chains": "import torch\ny = (torch\n  ).npu.nope2.z\nw = (torch.npu.nope3)\nv = ((torch).npu).nope4\n"
                  "u = torch.npu.Stream().nope5\nt = [torch.npu][0].nope6\ndef f():\n    import torch_npu as n\n"
                  "    return n.npu_nope(1), n.npu.synchronise\nclass C:\n    from torch import npu\n    x = npu.nvtx\n",
    "npu_api_ops": "import torch, torch_npu\ntorch_npu.npu_custom_op(1)\ntorch.ops.load_library('x.so')\n"
               "z = torch.npu.nope\nprint(f'{torch_npu.npu_other()}')\n",
    "npu_api_non_ascii": "import torch  # é\nnom = 'ü'; x = torch.npu.synchronise()  # ü\nfrom  torch_npu.ñope import y\n",
    "npu_api_continued": "import torch\nfrom \\\n    torch_npu.nope import y\n",
    # torch-npu-import's shapes: where a hand port's missing import would go.
    "npu_import_lines": "import numpy as np; import torch\nimport torch.nn\nx = torch.npu.current_device()\n",
    "npu_import_blocks": "if ok:\n    import numpy as np  # c\n    from torch import nn\nelif b:\n    import torch as T\n"
                         "else:\n    import torch\ntry:\n    pass\nfinally:\n    import torch.npu as tn\nx.npu(1)\n",
    "npu_import_suites": "if a: import torch\nwith x: import torch as T\nfrom torch import npu; import torch\n"
                         "torch.npu.synchronize()\n",
    "npu_import_scopes": "# header\nclass C:\n    import torch\ndef f():\n    import torch\n    return torch.npu.x()\n"
                         "match v:\n    case 1:\n        import torch\n",
    "npu_import_native": "import torch\nfrom vllm_ascend.utils import x\ntorch.npu.synchronize()\n",
    # torch-cuda-api's shapes in files it leaves as they are (and two it changes, where its twin declines).
    "cuda_api_patched": "import torch, torch_npu\ntorch.cuda.Event = torch.npu.Event\n"
                        "setattr(torch.cuda, 'Stream', torch.npu.Stream)\ntorch.cuda.set_device = lambda d: None\n",
    "cuda_api_staying": "import torch\nprint(torch.cuda.get_arch_list())\nx = torch.cuda.jiterator._create_jit_fn('c')\n"
                        "def f():\n    if not torch.cuda.is_available():  # guard\n        return None\n"
                        "    return torch.cuda.nvtx.range('r')\nif torch.cuda.is_available(): y = torch.cuda.get_arch_list()\n",
    "cuda_api_branches": "import torch\ndef sync(device):\n    if device == 'npu':\n        torch.npu.synchronize()\n"
                         "    elif device == 'cuda':\n        torch.cuda.synchronize()\n"
                         "is_cuda = torch.cuda.is_available()  # a probe beside the NPU\n",
    "cuda_api_imports": "import torch.cuda.jiterator as jit\nfrom torch.cuda import get_arch_list, jiterator\n"
                        "from torch.cuda.nvtx import *\nfrom . import cuda\n",
    "cuda_api_fstring": "import torch\nprint(f'{torch.cuda.get_arch_list()}')\n",
    "cuda_api_renamed": "import torch\nif ok:\n    torch.cuda.get_arch_list()\ntorch.cuda.synchronize()\n",
    "cuda_api_from_torch": "from torch import cuda\ncuda.get_arch_list()\n",
    # tf32-hf32's: settings that stay, a rename the file cannot spell, renames left in device dispatch.
    "tf32_settings": "import torch\ntorch.backends.cudnn.benchmark = True\nx = torch.backends.cuda.fp32_precision\n"
                     "if device == 'npu':\n    pass\nelse:\n    torch.backends.cuda.matmul.allow_tf32 = 1\n",
    "tf32_no_torch": "from torch.backends import cudnn\ncudnn.allow_tf32 = (0)\n",
    "tf32_renamed": "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n",
    # cuda-version-probes': reads, calls, the environment, programs run, capabilities compared.
    "probe_reads": "import torch, os, subprocess\nfrom torch.utils.cpp_extension import CUDA_HOME\n"
                   "v = torch.version.cuda\nprint(torch.version.cuda, f'{torch.backends.cudnn.version()}')\n"
                   "n = torch.backends.cudnn.version() or CUDA_HOME\nh = os.environ['CUDA_HOME'], os.getenv(key='CUDA_PATH')\n"
                   "os.environ['CUDA_HOME'] = '/x'\nsubprocess.run(['/usr/bin/nvcc', '-V']); os.system('nsys profile x')\n"
                   "e = os.environ[('CUDA_PATH')]\n",
    "probe_capability": "import torch\nmajor, *rest = torch.cuda.get_device_capability()\nif major >= 9: pass\n"
                        "ok = (torch.cuda.get_device_capability()) >= (8, 0)\np = torch.cuda.get_device_properties(0)\n"
                        "if p.major < 8 or torch.npu.get_device_capability()[0] == 7.5: pass\n"
                        "x = (rest, major) == (1, *rest)\n",
    "probe_names": "from torch.utils.cpp_extension import CUDA_HOME\ndef f(CUDA_HOME=CUDA_HOME):\n    return CUDA_HOME\n",
    # bitsandbytes-npu's: configs it reports on and leaves, one in device dispatch, one it changes.
    "bnb_reports": "from transformers import BitsAndBytesConfig as B\nB(load_in_8bit=True)\n"
                   "B(load_in_4bit=True, bnb_4bit_quant_type=kind, bnb_4bit_use_double_quant=use_dq)\n"
                   "B(load_in_4bit=ok, bnb_4bit_quant_type='fp4', bnb_4bit_use_double_quant=is_npu or x)\n"
                   "B(load_in_4bit=True, **kw)\nB(load_in_4bit=True, bnb_4bit_quant_type=b'nf4', bnb_4bit_use_double_quant=0)\n",
    # the string-position rules' (device-string, nccl-backend, amp-device): strings in positions left in
    # device dispatch, through variables and the file's own functions; calls that take no NPU value;
    # a value that keys a dict in the same call; glued literals; and strings they rewrite.
    "positions_left": "import torch, ray\nimport torch.distributed as dist\nif device == 'npu':\n    pass\nelse:\n"
                      "    def dev(d='cuda'):\n        return torch.zeros(1, device=d)\n    def pick():\n        return 'cuda'\n"
                      "    x = torch.ones(1).to('cuda:0')\n    torch.autocast('cuda')\n"
                      "    loc = f'cuda:{rank}'\n    torch.load(p, map_location=loc)\n    dev('cuda')\n"
                      "    dist.init_process_group(backend='nccl', pg_options={'nccl': 1})\n    y = pick()\n"
                      "    z = torch.zeros(1, device=pick())\n"
                      "ray.util.collective.init_collective_group(4, 0, backend='nccl')\n"
                      "print('using ' 'cuda', 'x' 'cuda')\nraise ValueError('device ' f'{d} is not cuda')\n"
                      "with torch.autocast('cpu'): pass\n",
    "positions_settings": "import argparse, torch\nfrom typing import Literal\nfrom unittest import mock\n"
                          "if is_torch_npu_available():\n    pass\nelif ok:\n    device: Literal['cpu', 'cuda'] = 'cuda'\n"
                          "    p = argparse.ArgumentParser(); p.add_argument('--device', default='cuda', choices=['cpu', 'cuda'])\n"
                          "    b = getattr(args, 'backend', 'nccl'); c = {'device': 'cuda', 'dist_backend': 'cuda:nccl'}\n"
                          "    mock.patch('torch.distributed.get_backend', return_value='nccl')\n"
                          "    if x.device.type == 'cuda' or str(x.device).startswith('cuda:'): pass\n",
    "positions_changed": "import torch\nx = torch.ones(1, device='cuda')\n",
    "positions_flow_changed": "import torch\ndef f(d):\n    return torch.ones(1, device=d)\nf('cuda')\n",
    "positions_glued_changed": "import torch\nx = torch.ones(1, device='cu' 'da')\ny = torch.ones(1).to('cuda' ':0')\n",
    # verl-device's: settings left in device dispatch, look-alikes it leaves, one it sets.
    "verl_left": "from omegaconf import OmegaConf\nd = {}\nx = d['trainer.device=cuda', 'y']\nprint('trainer.device=' 'cuda')\n"
                 "if is_npu_available():\n    pass\nelse:\n    t = RayPPOTrainer(config, device_name='cuda:0')\n"
                 "    config.trainer.device = 'cuda'; cfg['trainer']['device'] = 'cuda'\n"
                 "    o = ['trainer.device=cuda', '+trainer.device=cuda']; o.append(*['trainer.device=cuda'])\n"
                 "    OmegaConf.update(cfg, 'trainer.device', 'cuda')\n",
    "verl_changed": "t = RayPPOTrainer(config, device_name='cuda')\n",
    # env-var-names': names with no NPU equivalent in each kind of position, renames left (set beside the
    # NPU name, in device dispatch), and renames.
    "env_left": "import os, subprocess, ray\nfrom os import environ as E\nenv = os.environ.copy()\nenv['NCCL_IB_HCA'] = 'x'\n"
                "os.getenv(key='NCCL_IB_GID_INDEX'); 'NCCL_IB_TIMEOUT' in E; E.get('NCCL_P2P_DISABLE')\n"
                "subprocess.run(c, env=dict(NCCL_IB_HCA='y', **env))\nray.init(runtime_env={'env_vars': {'NCCL_IB_SL': '1'}})\n"
                "os.environ.update({'CUDA_VISIBLE_DEVICES': '0', 'ASCEND_RT_VISIBLE_DEVICES': '0'})\n"
                "d = dict(os.environ, CUDA_VISIBLE_DEVICES='1', ASCEND_RT_VISIBLE_DEVICES='1') | {'NCCL_IB_QPS': 2}\n"
                "E['CUDA_VISIBLE_DEVICES'] = E['ASCEND_RT_VISIBLE_DEVICES'] = '2'\nprint('CUDA_VISIBLE_DEVICES')\n"
                "if device == 'npu':\n    pass\nelse:\n    os.environ['CUDA_VISIBLE_DEVICES'] = '3'\n"
                "    os.environ.update(PYTORCH_CUDA_ALLOC_CONF='a')\n",
    "env_changed": "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
    "env_keyword_changed": "import os\nos.environ.update(NCCL_SOCKET_IFNAME='eth0')\n",
    # broken-device-dispatch's: dispatch that still tells the devices apart (answered: no finding), and
    # each shape it reports (declined: the LibCST rule reports it).
    "dispatch_sound": "import torch, ray\nfrom ray.util import collective\ndef a(d):\n    if d == 'npu':\n        pass\n"
                      "    elif d == 'cuda':\n        pass\n    return 'hccl' if d == 'npu' else 'nccl'\n"
                      "def b(d):\n    if d == 'npu':\n        return ['cuda', 'npu'], ('npu', *['x'])\n"
                      "if torch.npu.get_device_capability() >= (8, 0):\n    collective.init_collective_group(1, 0, 'nccl')\n"
                      "x = {'npu': 1, 'npu:0': 2}\ny = 'np' 'u' if ok else 'cpu'\n",
    "dispatch_arms": "backend = 'hccl' if on_gpu else 'hccl'\n",
    "dispatch_chain": "if name == 'npu':\n    pass\nelif name == 'npu':\n    pass\n",
    "dispatch_block": "def f(name):\n    for _ in x:\n        if name == 'npu':\n            pass\n"
                      "        if name == 'npu':\n            pass\n",
    "dispatch_else_if": "if name == 'npu':\n    pass\nelse:\n    if (name)  ==  'npu':\n        pass\n",
    "dispatch_list": "devices = ['npu', 'npu:0', 'npu']\n",
    "dispatch_starred": "devices = [*'npu', 'npu']\n",
    "dispatch_capability": "import torch\nmajor, minor = torch.npu.get_device_capability()\n",
    "dispatch_capability_index": "from torch import npu\nmajor = npu.get_device_capability(0)[0]\n",
    "dispatch_ray": "import ray.util.collective as col\ncol.init_collective_group(2, 0, backend='HCCL')\n",
    # ray-resource-keys': "GPU" as a value (answered: nothing renamed), and each place it renames one.
    "ray_values": "import ray\nfrom ray.util.placement_group import placement_group\n"
                  "name = 'NPU' if on_npu else 'GPU'\nnames = {'cuda': 'GPU'}\nok = name == 'GPU'\n"
                  "pg = placement_group([{'CPU': 2}] * 4)\nres = ray.cluster_resources().get('CPU', 0)\n"
                  "info = ray.cluster_resources()\ninfo = {}\nn = info.get('GPU', 0) if 'GPU' in info else info['GPU']\n",
    "ray_bundles": "from ray.util.placement_group import placement_group\npg = placement_group([{'GPU': 1}] * 4)\n",
    "ray_bundle_variable": "import ray\nbundle = {'GPU': 1, 'CPU': 2}\npg = ray.util.placement_group([bundle] * 2)\n",
    "ray_lookup": "import ray\nn = ray.cluster_resources().get('GPU', 0)\n",
    "ray_subscript": "import ray\nn = ray.available_resources()['GPU']\n",
    "ray_membership": "import ray\nok = 'GPU' in ray.cluster_resources()\n",
    "ray_variable": "import ray\nres = ray.available_resources()\nn = res.get('GPU', 0)\n",
    "ray_node_resources": "import ray\nfor node in ray.nodes():\n    n = node['Resources']['GPU']\n",
    # profiler-npu's: uses left in a file that picks the NPU at run time and in device dispatch, reports of
    # what torch_npu lacks (answered), and each change (declined).
    "profiler_left": "import torch\nfrom transformers import is_torch_npu_available\n"
                     "def trace(args):\n    acts = [torch.profiler.ProfilerActivity.CPU]\n"
                     "    if is_torch_npu_available():\n        acts.append(torch.profiler.ProfilerActivity.NPU)\n"
                     "    else:\n        acts.append(torch.profiler.ProfilerActivity.CUDA)\n"
                     "    p = torch.profiler.profile(activities=acts, use_cuda=True)\n"
                     "    p.key_averages(); torch.autograd.profiler.emit_nvtx()\n    return p\n",
    "profiler_reports": "import torch, torch_npu\nwith torch.autograd.profiler.profile(use_cuda=True) as prof:\n"
                        "    torch.autograd.profiler.emit_nvtx()\nx = torch_npu.profiler.ProfilerActivity.MTIA\n",
    "profiler_moved": "import torch\nwith torch.profiler.profile() as p:\n    pass\n",
    "profiler_import": "from torch.profiler import profile, record_function\n",
    "profiler_activity": "from torch_npu.profiler import ProfilerActivity\na = ProfilerActivity.CUDA\n",
    # vllm-pyhccl's: an import kept for a method vllm-ascend lacks, one in device dispatch, lines the rule
    # leaves (after a colon, after another statement), and a rewrite.
    "pyhccl_reported": "def init(g):\n    from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator\n    c = PyNcclCommunicator(g, device=0)\n    c.send(t, 1)\n",
    "pyhccl_left": "if is_npu_available():\n    pass\nelse:\n    from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator\n",
    "pyhccl_not_a_line": "if ok: from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator\nimport os; from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator\n",
    "pyhccl_changed": "from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator\n",
    "pyhccl_semicolon": "from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator \\\n ; import os\n",
    # ray-num-gpus': a dict given "num_gpus" and spread into a Ray call (in a function, at module level, in
    # a coroutine), Ray Train's use_gpu= (in parentheses), a num_gpus= no Ray call takes (answered), and a
    # num_gpus= Ray takes (declined: rewritten).
    "raygpus_indirect": "import ray\n\ndef make(cls, device):\n    options = {}\n    if device == 'cuda':\n"
                        "        options['num_gpus'] = 1\n    return cls.options(**options).remote()\n",
    "raygpus_module": "import ray\nopts = {'num_gpus': 1, 'num_cpus': 2}\nA = ray.remote(**opts)(f)\n"
                      "async def go(B):\n    o = {\"num_gpus\": 1}\n    return B.options(*a, **o)\n",
    "raygpus_scaling": "from ray.train import ScalingConfig\ncfg = (ScalingConfig(num_workers=2, use_gpu=True))\n",
    "raygpus_not_ray": "import ray\nf(num_gpus=1)\nx = {'num_gpus': 1}\ny = g(**x)\n",
    "raygpus_rewritten": "import ray\n@ray.remote(num_gpus=1)\nclass A:\n    pass\n",
    "bnb_changed": "import transformers\ntransformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4',"
                   " bnb_4bit_use_double_quant=True)\n",
}


@pytest.mark.parametrize("rule", TWINNED, ids=lambda r: r.ID)
@pytest.mark.parametrize("name", sorted(ODD))
def test_odd_texts_read_the_same_or_decline(rule, name):
    compare(ODD[name].encode("utf-8"), rule)


def test_most_odd_texts_are_answered():
    # Declining is always exact, so a pass that declined everything would pass the test above.
    rule = next(r for r in TWINNED if r.ID == "unsupported-cuda-libs")
    answered = [n for n, text in ODD.items() if compare(text.encode("utf-8"), rule) is not None]
    assert len(answered) >= len(ODD) - 3, sorted(set(ODD) - set(answered))


def test_most_npu_odd_texts_are_answered():
    rule = next(r for r in TWINNED if r.ID == "unknown-npu-api")
    texts = [n for n in ODD if n.startswith("npu_api_")]
    answered = [n for n in texts if compare(ODD[n].encode("utf-8"), rule)]  # findings, the same as LibCST's
    assert sorted(set(texts) - set(answered)) == ["npu_api_continued"]  # a from-import's module on another line


def test_the_npu_import_odd_texts_are_answered():
    rule = next(r for r in TWINNED if r.ID == "torch-npu-import")
    texts = [n for n in ODD if n.startswith("npu_import_")]
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in texts}
    assert [(f.line, f.col) for f in found["npu_import_lines"]] == [(1, 1)]  # the line, not its `import torch`
    assert not found["npu_import_native"] and all(found[n] for n in texts if n != "npu_import_native")


def test_the_cuda_api_odd_texts_are_answered_where_nothing_changes():
    rule = next(r for r in TWINNED if r.ID == "torch-cuda-api")
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in ODD if n.startswith("cuda_api_")}
    declined = sorted(n for n, f in found.items() if f is None)
    assert declined == ["cuda_api_from_torch", "cuda_api_fstring", "cuda_api_renamed"]  # two changes, an f-string
    assert all(found[n] for n in found if n not in declined)  # each with the LibCST rule's findings
    # and --keep-cuda's forms are the LibCST rule's alone (a mismatch would fail inside compare)
    assert compare(ODD["cuda_api_staying"].encode("utf-8"), rule, options=RunOptions(keep_cuda=True)) is None


def test_the_tf32_odd_texts_are_answered_where_nothing_changes():
    rule = next(r for r in TWINNED if r.ID == "tf32-hf32")
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in ODD if n.startswith("tf32_")}
    assert found["tf32_renamed"] is None
    assert len(found["tf32_settings"]) == 4 and len(found["tf32_no_torch"]) == 2


def test_the_probe_odd_texts_are_answered():
    rule = next(r for r in TWINNED if r.ID == "cuda-version-probes")
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in ODD if n.startswith("probe_")}
    assert found["probe_names"] is None  # a parameter named as the probe: LibCST reads its Name
    assert len(found["probe_reads"]) == 8 and len(found["probe_capability"]) == 4


def test_the_bitsandbytes_odd_texts_are_answered_where_nothing_changes():
    rule = next(r for r in TWINNED if r.ID == "bitsandbytes-npu")
    assert compare(ODD["bnb_changed"].encode("utf-8"), rule) is None
    assert len(compare(ODD["bnb_reports"].encode("utf-8"), rule)) == 6
    guarded = "import transformers\nif device == 'npu':\n    pass\nelse:\n    transformers.BitsAndBytesConfig(" \
              "load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=\\\n True)\n"
    assert libcst_run(guarded.encode("utf-8"), "x.py", rule)[0] and compare(guarded.encode("utf-8"), rule) is None


def test_the_string_position_odd_texts_are_answered_where_nothing_changes():
    rules = {r.ID: r for r in TWINNED if r.ID in ("device-string", "nccl-backend", "amp-device")}
    assert len(rules) == 3
    for rule in rules.values():
        for name in ("positions_changed", "positions_flow_changed", "positions_glued_changed"):
            compare(ODD[name].encode("utf-8"), rule)
    for name in ("positions_changed", "positions_flow_changed", "positions_glued_changed"):
        assert compare(ODD[name].encode("utf-8"), rules["device-string"]) is None
    for name in ("positions_left", "positions_settings"):
        found = {rid: compare(ODD[name].encode("utf-8"), rule) for rid, rule in rules.items()}
        assert all(f is not None for f in found.values()), name
        assert found["device-string"] and found["nccl-backend"], name


def test_the_verl_device_odd_texts_are_answered_where_nothing_changes():
    rule = next(r for r in TWINNED if r.ID == "verl-device")
    assert compare(ODD["verl_changed"].encode("utf-8"), rule) is None
    assert len(compare(ODD["verl_left"].encode("utf-8"), rule)) == 7


def test_the_env_var_odd_texts_are_answered_where_nothing_changes():
    rule = next(r for r in TWINNED if r.ID == "env-var-names")
    assert compare(ODD["env_changed"].encode("utf-8"), rule) is None
    assert compare(ODD["env_keyword_changed"].encode("utf-8"), rule) is None
    assert len(compare(ODD["env_left"].encode("utf-8"), rule)) == 11


def test_the_dispatch_odd_texts_are_answered_where_nothing_is_reported():
    rule = next(r for r in TWINNED if r.ID == "broken-device-dispatch")
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in ODD if n.startswith("dispatch_")}
    assert found.pop("dispatch_sound") == []
    assert all(f is None for f in found.values())
    # each one a finding of the LibCST rule but an `else` holding one `if`, which the twin reads as an `elif`
    reported = {n for n in found if libcst_findings(ODD[n].encode("utf-8"), "x.py", rule)}
    assert set(found) - reported == {"dispatch_else_if"}


def test_the_ray_resource_odd_texts_are_answered_where_nothing_is_renamed():
    rule = next(r for r in TWINNED if r.ID == "ray-resource-keys")
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in ODD if n.startswith("ray_")}
    assert found.pop("ray_values") == []
    assert all(f is None for f in found.values())
    assert all(libcst_run(ODD[n].encode("utf-8"), "x.py", rule)[1] for n in found)  # each one renamed by LibCST


def test_the_profiler_odd_texts_are_answered_where_nothing_changes():
    rule = next(r for r in TWINNED if r.ID == "profiler-npu")
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in ODD if n.startswith("profiler_")}
    assert len(found["profiler_left"]) == 8 and len(found["profiler_reports"]) == 3
    assert [n for n, f in found.items() if f is None] == ["profiler_moved", "profiler_import", "profiler_activity"]


def test_the_pyhccl_odd_texts_are_answered_where_nothing_changes():
    rule = next(r for r in TWINNED if r.ID == "vllm-pyhccl")
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in ODD if n.startswith("pyhccl_")}
    assert [(f.line, f.col) for f in found["pyhccl_reported"]] == [(2, 5)] and len(found["pyhccl_left"]) == 1
    assert found["pyhccl_not_a_line"] == [] and found["pyhccl_changed"] is None and found["pyhccl_semicolon"] is None


def test_the_ray_num_gpus_odd_texts_are_answered_where_nothing_changes():
    rule = next(r for r in TWINNED if r.ID == "ray-num-gpus")
    found = {n: compare(ODD[n].encode("utf-8"), rule) for n in ODD if n.startswith("raygpus_")}
    assert [(f.line, f.col) for f in found["raygpus_indirect"]] == [(6, 9)]
    assert [(f.line, f.col) for f in found["raygpus_module"]] == [(5, 5), (2, 1)]  # a scope's, as it closes
    assert [(f.line, f.col) for f in found["raygpus_scaling"]] == [(2, 8)]
    assert found["raygpus_not_ray"] == [] and found["raygpus_rewritten"] is None


def test_declines_what_it_cannot_read_exactly():
    rule = next(r for r in TWINNED if r.ID == "unsupported-cuda-libs")
    for text in ("import cupy  # npu-port: ignore\n", "import cupy\r\nx = 1\rcupy.a()\n", "\ufeffimport cupy\n",
                 "import cupy\nx = (1 +\n"):
        assert ast_pass.report(text.encode("utf-8"), "x.py", [rule], OPTIONS) is None


def test_the_engine_reads_a_report_only_file_without_libcst(monkeypatch):
    data = b"import pynvml\nimport torch\n\npynvml.nvmlInit()\nprint(torch.ones(1))\n"
    engine = Engine(Settings())
    rules = engine.needs_parse(data, "python", "x.py")
    assert [r.ID for r in rules] == ["unsupported-cuda-libs"]  # torch-npu-import follows no change here
    expected = libcst_findings(data, "x.py", rules[0])

    def no_libcst(*args, **kwargs):
        raise AssertionError("parsed with LibCST")

    monkeypatch.setattr(python_source, "parse", no_libcst)
    converted = engine.convert(data, "x.py")
    assert converted.output is None and converted.outcome.findings == expected and expected

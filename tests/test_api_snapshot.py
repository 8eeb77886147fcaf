"""The committed API snapshot holds the upstream facts rules rely on, and the extractor reads wheels right.

Only the committed JSON and tiny wheels built in tmp_path are read: no network, no upstream imports.
"""
from __future__ import annotations

import ast
import json
import subprocess
import textwrap
import zipfile
from pathlib import Path

import pytest

from npu_port.transpiler.tables import api_facts
from tools import api_snapshot as snap
from tools import torch_npu_exports

EXPECTED_VERSIONS = {
    "torch_npu": "2.14.0",
    "vllm": "0.33.0",
    "verl": "0.9.1",
    "ray": "2.60.0",
    "transformers": "5.24.0",
    "mindspeed_rl": None,  # a master commit in no release: named by its commit (issue 37)
}


# ---- the committed snapshot ----------------------------------------------------------------------------------

@pytest.mark.parametrize("package", sorted(EXPECTED_VERSIONS))
def test_snapshot_records_provenance(package):
    facts = api_facts.load(package)
    assert facts.version == EXPECTED_VERSIONS[package]
    assert facts.raw["generated_by"] == snap.GENERATED_BY
    if package == "mindspeed_rl":
        assert len(facts.commit) == 40
        assert facts.raw["setup_version"] == "2.1.0" and facts.label == f"git {facts.commit[:10]}"
    else:
        assert facts.raw["wheel"].endswith(".whl") and facts.version in facts.raw["wheel"]


def test_snapshot_stays_compact():
    total = sum(p.stat().st_size for p in api_facts.SNAPSHOT_DIR.glob("*.json"))
    assert total < 1_000_000
    # torch_device_api.json is not one package's snapshot: the torch releases per minor (tools/torch_device_api_snapshot.py).
    assert [p for p in api_facts.available() if p != "torch_device_api"] == sorted(EXPECTED_VERSIONS)


def test_vllm_llm_constructor_has_no_device_and_no_npu_memory_utilization():
    vllm = api_facts.load("vllm")
    for kw in ("gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size", "enforce_eager"):
        assert vllm.accepts_keyword("vllm.LLM.__init__", kw), kw
    for kw in ("device", "npu_memory_utilization"):
        assert not vllm.accepts_keyword("vllm.LLM.__init__", kw), kw
        assert not vllm.accepts_keyword("vllm.EngineArgs", kw), kw
    # pipeline_parallel_size reaches EngineArgs only through LLM's **kwargs
    own = {p["name"] for p in vllm.signature("vllm.LLM.__init__")}
    assert "pipeline_parallel_size" not in own and "gpu_memory_utilization" in own
    assert vllm.accepts_keyword("vllm.engine.arg_utils.EngineArgs", "pipeline_parallel_size")


def test_vllm_sampling_params_and_exports():
    vllm = api_facts.load("vllm")
    fields = {p["name"] for p in vllm.signature("vllm.SamplingParams")}
    assert {"temperature", "top_p", "max_tokens", "n"} <= fields
    assert vllm.has("vllm", "LLM") and vllm.has("vllm", "SamplingParams")
    assert {"generate", "chat"} <= set(vllm.names("vllm.LLM"))
    assert vllm.has("vllm.envs", "VLLM_WORKER_MULTIPROC_METHOD")
    assert not vllm.has("vllm.envs", "VLLM_USE_V1")


def test_verl_config_keys():
    verl = api_facts.load("verl")
    assert verl.has_config_key("actor_rollout_ref.rollout.gpu_memory_utilization")
    assert verl.config_keys()["actor_rollout_ref.rollout.gpu_memory_utilization"] == "float"
    assert verl.config_keys()["trainer.n_gpus_per_node"] == "int"
    assert verl.config_keys()["trainer.device"] == "str"
    assert not verl.has_config_key("trainer.n_npus_per_node")
    assert not verl.has_config_key("actor_rollout_ref.rollout.npu_memory_utilization")
    assert verl.has_config_key("trainer.n_gpus_per_node", config="ppo_megatron_trainer")
    assert {"ppo_trainer.yaml", "ppo_megatron_trainer.yaml"} <= set(verl.config_files())


def test_verl_trainer_needs_more_than_a_config():
    verl = api_facts.load("verl")
    required = verl.required_params("verl.trainer.ppo.ray_trainer.RayPPOTrainer")
    assert required[:4] == ["config", "tokenizer", "role_worker_mapping", "resource_pool_manager"]
    assert not verl.accepts_keyword("verl.trainer.ppo.ray_trainer.RayPPOTrainer.__init__", "reward_fn")
    assert verl.signature("verl.trainer.ppo.ray_trainer.ResourcePoolManager") is not None
    assert {"ActorRollout", "Critic", "RefPolicy"} <= set(verl.names("verl.trainer.ppo.utils.Role"))
    assert verl.has("verl.trainer.main_ppo", "main") and verl.has("verl.trainer.main_ppo", "run_ppo")
    assert verl.signature("verl.utils.device.get_device_name") == []
    assert verl.has("verl.utils.device", "is_npu_available")


def test_torch_npu_names():
    torch_npu = api_facts.load("torch_npu")
    for name in ("synchronize", "NPUGraph", "mstx", "set_device", "empty_cache"):
        assert torch_npu.has("torch.npu", name), name
        assert torch_npu.has("torch_npu.npu", name), name
    assert torch_npu.has("torch.npu.mstx", "range_push")
    assert torch_npu.has("torch.npu.amp", "GradScaler")
    assert not torch_npu.has("torch.npu", "nvtx")
    assert torch_npu.has("torch_npu", "npu_fusion_attention") and torch_npu.has("torch_npu", "npu_rms_norm")
    assert torch_npu.has("torch_npu.profiler", "ProfilerActivity")
    assert torch_npu.has("torch_npu.optim", "NpuFusedAdamW")
    params = [p["name"] for p in torch_npu.signature("torch_npu.npu_fusion_attention")]
    assert params[:5] == ["query", "key", "value", "head_num", "input_layout"]
    assert {"keep_prob", "scale", "atten_mask", "sparse_mode"} <= set(params)


def test_torch_npu_names_bound_at_import():
    """What torch_npu sets on itself while importing is in the snapshot (vllm-ascend uses all of these)."""
    torch_npu = api_facts.load("torch_npu")
    for name in ("_C", "__version__", "multiprocessing", "_inductor", "float8_e8m0fnu", "float4_e2m1fn_x2",
                 "hifloat8", "bfloat16", "_npu_paged_attention", "_npu_flash_attention_unpad", "Format", "atb",
                 "ParallelStore"):
        assert torch_npu.has("torch_npu", name), name
    for name in ("get_soc_version", "_launch_host_func", "_subscribe_report"):
        assert torch_npu.has("torch.npu", name), name
    assert torch_npu.has("torch_npu.atb", "npu_ring_mla")
    assert not torch_npu.has("torch_npu", "__file__") and not torch_npu.has("torch.npu", "Optional")
    assert not torch_npu.has("torch_npu", "npu_sparse_attention_score")  # a vllm-ascend custom op


def test_ray_facts():
    ray = api_facts.load("ray")
    assert ray.accepts_keyword("ray.init", "resources") and ray.accepts_keyword("ray.init", "runtime_env")
    assert ray.accepts_keyword("ray.init", "_system_config")      # a key ray.init pops from **kwargs
    assert not ray.accepts_keyword("ray.init", "num_npus")        # leftovers raise in ray.init
    assert ray.accepts_keyword("ray.remote", "resources") and not ray.accepts_keyword("ray.remote", "num_npus")
    assert "max_concurrency" in ray.option_names("ray.remote.actor")
    assert "max_concurrency" not in ray.option_names("ray.remote.task")
    assert ray.signature("ray.util.placement_group.placement_group")[0]["name"] == "bundles"
    assert ray.has("ray.runtime_context.RuntimeContext", "get_accelerator_ids")
    assert ray.has("ray", "get_runtime_context")


def test_transformers_exports():
    transformers = api_facts.load("transformers")
    assert transformers.has("transformers", "AutoTokenizer")
    assert transformers.has("transformers", "AutoModelForCausalLM")
    assert not transformers.has("transformers", "AutoModelForNpu")


def test_mindspeed_rl_sections():
    ms = api_facts.load("mindspeed-rl")
    generate = ms.section_keys("generate_config")
    assert {"infer_tensor_parallel_size", "gpu_memory_utilization", "sampling_config.top_p"} <= set(generate)
    assert "npu_memory_utilization" not in generate
    assert "actor_resource.num_npus" in ms.section_keys("rl_config")
    assert "global_batch_size" in ms.section_keys("megatron_training")
    params = [p["name"] for p in ms.signature("mindspeed_rl.RayGRPOTrainer")]
    assert params[:3] == ["actor_worker", "ref_worker", "reward_list"]
    with pytest.raises(KeyError):
        ms.section_keys("no_such_section")


def test_unknown_package_and_callable():
    with pytest.raises(api_facts.UnknownPackage):
        api_facts.load("tensorflow")
    vllm = api_facts.load("vllm")
    assert vllm.signature("vllm.NoSuchThing") is None
    assert not vllm.accepts_keyword("vllm.NoSuchThing", "x")
    with pytest.raises(ValueError):
        vllm.config_keys()


# ---- the extractor on synthetic wheels -----------------------------------------------------------------------

def build_wheel(tmp_path: Path, name: str, version: str, files: dict[str, str]) -> Path:
    wheel = tmp_path / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, textwrap.dedent(text))
        zf.writestr(f"{name}-{version}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n")
    return wheel


TOY_FILES = {
    "toy/__init__.py": """
        from .core import Engine, helper as _helper
        from .extras import *
        import os
        if TYPE_CHECKING:
            from .typing_only import OnlyForTypes
        try:
            from .fast import speedup
        except ImportError:
            speedup = None
        VERSION = "1"
        def _private(): ...
    """,
    "toy/core.py": """
        import dataclasses
        __all__ = ["Engine"]
        __all__ += ["make"]
        class Engine:
            def __init__(self, model, /, tp: int = 1, *args, device=None, **kwargs):
                self.model = model
            @staticmethod
            def ping(message: str, stream=None): ...
            def run(self, prompt, *, n=1): ...
        def make(): ...
        def helper(): ...
    """,
    "toy/extras.py": """
        __all__ = ["extra_a"]
        def extra_a(): ...
        def extra_b(): ...
    """,
    "toy/sub/__init__.py": "",
    "toy/_hidden.py": "",
    "toy/params.py": """
        from dataclasses import dataclass, field
        from typing import ClassVar
        @dataclass
        class Base:
            model: str = "m"
            seed: int = 0
        @dataclass
        class Args(Base):
            tp: int = 1
            seed: int = 1
            cache: dict = field(default_factory=dict)
            internal: int = field(default=0, init=False)
            registry: ClassVar[dict] = {}
        class Role(Enum):
            Actor = 0
            Critic = 1
            _ignore_ = 2
        common = {"num_cpus": 1, "memory": 2}
        task_only = {"max_retries": 3}
        task_options = {**common, **task_only}
    """,
    "toy/closing.py": """
        def init(address=None, **kwargs):
            memory = kwargs.pop("_memory", None)
            cfg = kwargs.get("_system_config")
            if kwargs:
                raise RuntimeError("unknown")
        def open_init(**kw):
            return kw
    """,
}


@pytest.fixture
def toy_tree(tmp_path):
    return snap.WheelTree(build_wheel(tmp_path, "toy", "1.2.3", TOY_FILES))


def test_wheel_tree_reads_version_and_modules(toy_tree):
    assert toy_tree.dist_version() == "1.2.3"
    assert toy_tree.module_path("toy") == "toy/__init__.py"
    assert toy_tree.module_path("toy.core") == "toy/core.py"
    assert toy_tree.module_path("toy.missing") is None
    assert toy_tree.submodules("toy") == ["_hidden", "closing", "core", "extras", "params", "sub"]


def test_module_public_names_without_dunder_all(toy_tree):
    names = snap.module_public_names(toy_tree, "toy")
    # definitions, try/except branches, re-exports and star-import __all__ count; plain imports,
    # private names, TYPE_CHECKING-only imports and names outside the star module's __all__ do not
    assert {"Engine", "VERSION", "speedup", "extra_a", "core", "sub", "params"} <= set(names)
    for absent in ("os", "_private", "_helper", "OnlyForTypes", "extra_b", "_hidden"):
        assert absent not in names


def test_module_public_names_with_dunder_all(toy_tree):
    names = snap.module_public_names(toy_tree, "toy.core")
    assert names == ["Engine", "helper", "make"]  # __all__ (incl. +=) plus public defs; no `dataclasses`


def test_function_signature_kinds_and_defaults(toy_tree):
    init = snap.function_signature(toy_tree, "toy.core", "Engine")["params"]
    assert [(p["name"], p["kind"], p["default"]) for p in init] == [
        ("model", "positional_only", None),
        ("tp", "positional_or_keyword", "1"),
        ("args", "var_positional", None),
        ("device", "keyword_only", "None"),
        ("kwargs", "var_keyword", None),
    ]
    ping = snap.function_signature(toy_tree, "toy.core", "Engine.ping")["params"]
    assert [p["name"] for p in ping] == ["message", "stream"]  # staticmethod keeps its first param
    run = snap.function_signature(toy_tree, "toy.core", "Engine.run")["params"]
    assert [(p["name"], p["kind"]) for p in run] == [("prompt", "positional_or_keyword"), ("n", "keyword_only")]
    with pytest.raises(snap.SnapshotError):
        snap.function_signature(toy_tree, "toy.core", "Engine.missing")


def test_class_fields_enum_and_dict_keys(toy_tree):
    fields = snap.fields_signature(toy_tree, "toy.params", "Args")["params"]
    assert [(p["name"], p["default"]) for p in fields] == [
        ("model", "'m'"), ("tp", "1"), ("seed", "1"), ("cache", "field(default_factory=dict)")]
    parsed = toy_tree.module_ast("toy.params")
    assert snap.enum_members(snap.find_class(parsed, "Role")) == ["Actor", "Critic"]
    assert snap.dict_literal_keys(parsed, "task_options") == ["max_retries", "memory", "num_cpus"]


def test_closed_kwargs(toy_tree):
    closed = snap.function_signature(toy_tree, "toy.closing", "init")
    assert closed["kwargs_keys"] == ["_memory", "_system_config"]
    assert "kwargs_keys" not in snap.function_signature(toy_tree, "toy.closing", "open_init")


def test_accepts_keyword_follows_forwarding_and_closed_kwargs():
    facts = api_facts.ApiSnapshot({
        "package": "toy", "version": "1",
        "aliases": {"toy.core.Engine": "toy.Engine"},
        "signatures": {
            "toy.Engine.__init__": {"params": [{"name": "model", "kind": "positional_or_keyword", "default": None},
                                               {"name": "kw", "kind": "var_keyword", "default": None}],
                                    "kwargs_to": "toy.Args"},
            "toy.Args": {"params": [{"name": "tp", "kind": "positional_or_keyword", "default": "1"}]},
            "toy.init": {"params": [{"name": "kwargs", "kind": "var_keyword", "default": None}],
                         "kwargs_keys": ["_memory"]},
            "toy.open": {"params": [{"name": "kwargs", "kind": "var_keyword", "default": None}]},
            "toy.pos": {"params": [{"name": "x", "kind": "positional_only", "default": None}]},
        },
    })
    assert facts.accepts_keyword("toy.core.Engine", "tp")
    assert not facts.accepts_keyword("toy.Engine.__init__", "device")
    assert facts.accepts_keyword("toy.init", "_memory") and not facts.accepts_keyword("toy.init", "other")
    assert facts.accepts_keyword("toy.open", "anything")
    assert not facts.accepts_keyword("toy.pos", "x")
    assert facts.required_params("toy.Engine") == ["model"]


def test_aten_schema_parsing():
    name, overload, params = snap.parse_aten_schema(
        "npu_thing.out(Tensor(a!) self, int[2] size, float eps=1e-06, *, str layout=\"BSND\") -> (Tensor, Tensor)")
    assert (name, overload) == ("npu_thing", "out")
    assert [(p["name"], p["kind"], p["default"]) for p in params] == [
        ("self", "positional_or_keyword", None), ("size", "positional_or_keyword", None),
        ("eps", "positional_or_keyword", "1e-06"), ("layout", "keyword_only", '"BSND"')]
    assert snap.parse_aten_schema("not a schema") is None


def test_yaml_config_keys_flatten_with_types():
    keys = snap.yaml_config_keys("""
defaults:
  - actor@actor_rollout_ref.actor: dp_actor
trainer:
  device: cuda
  n_gpus_per_node: 8
  logger: [console]
  val: null
rollout: {gpu_memory_utilization: 0.5, free: true}
""")
    assert keys == {
        "rollout": "dict", "rollout.free": "bool", "rollout.gpu_memory_utilization": "float",
        "trainer": "dict", "trainer.device": "str", "trainer.logger": "list",
        "trainer.n_gpus_per_node": "int", "trainer.val": "null",
    }


def test_hydra_defaults_composition(tmp_path):
    tree = snap.WheelTree(build_wheel(tmp_path, "cfgpkg", "0.1", {
        "cfg/ppo.yaml": "defaults:\n  - rollout@actor.rollout: vllm\n  - _self_\ntrainer:\n  device: cuda\n",
        "cfg/rollout/vllm.yaml": "name: vllm\ngpu_memory_utilization: 0.5\n",
    }))
    keys = snap.compose_hydra_defaults(tree, "cfg/", "ppo")
    assert keys["actor.rollout.gpu_memory_utilization"] == "float"
    assert keys["trainer.device"] == "str"


def test_snapshot_wheel_end_to_end_on_a_fake_vllm(tmp_path):
    wheel = build_wheel(tmp_path, "vllm", "9.9.9", {
        "vllm/__init__.py": '__all__ = ["LLM", "SamplingParams"]\n',
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/llm.py": """
            class LLM:
                def __init__(self, model, *, gpu_memory_utilization=0.9, **kwargs): ...
                def generate(self, prompts, sampling_params=None): ...
                def chat(self, messages, sampling_params=None): ...
        """,
        "vllm/sampling_params.py": "class SamplingParams(msgspec.Struct):\n    n: int = 1\n    temperature: float = 1.0\n",
        "vllm/engine/__init__.py": "",
        "vllm/engine/arg_utils.py": "@dataclass\nclass EngineArgs:\n    model: str = 'x'\n    tensor_parallel_size: int = 1\n",
        "vllm/envs.py": "environment_variables = {'VLLM_HOST_IP': lambda: ''}\n",
    })
    record = snap.snapshot_wheel("vllm", wheel)
    assert record["version"] == "9.9.9" and record["wheel"] == wheel.name
    out = tmp_path / "api"
    snap.write_json(record, out / "vllm.json")
    facts = api_facts.load("vllm", directory=out)
    assert facts.accepts_keyword("vllm.LLM.__init__", "tensor_parallel_size")
    assert not facts.accepts_keyword("vllm.LLM.__init__", "device")
    assert facts.has("vllm.envs", "VLLM_HOST_IP")
    assert json.loads((out / "vllm.json").read_text())["package"] == "vllm"


def test_snapshot_fails_loudly_when_upstream_moves(tmp_path):
    wheel = build_wheel(tmp_path, "vllm", "9.9.9", {"vllm/__init__.py": ""})
    with pytest.raises(snap.SnapshotError):
        snap.snapshot_wheel("vllm", wheel)


def test_newest_local_wheel_compares_versions_numerically(tmp_path):
    for version in ("2.9.0", "2.10.0"):
        build_wheel(tmp_path, "ray", version, {"ray/__init__.py": ""})
    assert snap.newest_local_wheel("ray", tmp_path).name.startswith("ray-2.10.0")


def test_mindspeed_rl_from_a_git_checkout(tmp_path):
    repo = tmp_path / "ms"
    files = {
        "setup.py": "setup(name='mindspeed_rl', version='0.1.0')\n",
        "mindspeed_rl/__init__.py": "from .trainer import RayGRPOTrainer\n__all__ = ['RayGRPOTrainer']\n",
        "mindspeed_rl/config_cls/__init__.py": "",
        "mindspeed_rl/config_cls/megatron_config.py":
            "class MegatronConfig:\n    def __init__(self, training_config, model_config):\n"
            "        self.global_batch_size = 1\n        self._private = 0\n",
        "mindspeed_rl/config_cls/rl_config.py":
            "class RLConfig:\n    def __init__(self, config_dict):\n        self.actor_resource = {'num_npus': None}\n",
        "mindspeed_rl/config_cls/generate_config.py":
            "class GenerateConfig:\n    def __init__(self, config_dict):\n"
            "        self.gpu_memory_utilization = 0.5\n        self.sampling_config = {'top_p': 1.0}\n",
        "mindspeed_rl/trainer/__init__.py": "from .grpo_trainer_hybrid import RayGRPOTrainer\n",
        "mindspeed_rl/trainer/grpo_trainer_hybrid.py":
            "class RayGRPOTrainer:\n    def __init__(self, actor_worker, ref_worker, reward_list, **kwargs): ...\n",
    }
    for path, text in files.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    for source in (repo, repo / ".git"):  # a work tree, then the bare git directory
        tree, commit = snap.mindspeed_rl_tree(source)
        assert snap.tags_at(source, commit) == []
        record = snap.snapshot_mindspeed_rl(tree, commit, snap.tags_at(source, commit))
        # No tag of setup.py's version at the commit: not a release, named by the commit only.
        assert len(record["commit"]) == 40 and record["version"] is None and record["setup_version"] == "0.1.0"
        assert record["sections"]["generate_config"] == [
            "gpu_memory_utilization", "sampling_config", "sampling_config.top_p"]
        assert record["sections"]["actor_config"] == ["global_batch_size"]
        assert "actor_resource.num_npus" in record["sections"]["rl_config"]
    subprocess.run([*git, "tag", "v0.1.0"], check=True)  # the release tag at that very commit: a release
    for source in (repo, repo / ".git"):
        tree, commit = snap.mindspeed_rl_tree(source)
        assert snap.snapshot_mindspeed_rl(tree, commit, snap.tags_at(source, commit))["version"] == "0.1.0"


# ---- torch_npu's import-time names ---------------------------------------------------------------------------

def test_submodules_of_every_kind(tmp_path):
    tree = snap.WheelTree(build_wheel(tmp_path, "pkg", "1.0", {
        "pkg/__init__.py": "", "pkg/_C.cpython-311-x86_64-linux-gnu.so": "", "pkg/_ext.abi3.so": "",
        "pkg/multiprocessing/reductions.py": "", "pkg/lib/libpkg.so": "", "pkg/plain.py": "",
    }))
    assert tree.submodules("pkg") == ["plain"]
    # `lib/` holds only a shared library: no module is imported from it
    assert tree.submodules("pkg", every_kind=True) == ["_C", "_ext", "multiprocessing", "plain"]


def test_module_attribute_names_are_what_exists(tmp_path):
    tree = snap.WheelTree(build_wheel(tmp_path, "pkg", "1.0", {
        "pkg/__init__.py": """
            __all__ = ["advertised"]
            from typing import Optional
            from pkg.version import __version__ as __version__
            from ._backends import *
            from .utils import _helper
            def advertised(): ...
            def _launch(): ...
        """,
        "pkg/_backends.py": "def get_soc_version(): ...\ndef _probe(): ...\n",
        "pkg/utils.py": "def _helper(): ...\n",
        "pkg/version.py": "__version__ = '1.0'\n",
    }))
    assert snap.module_public_names(tree, "pkg") == ["advertised", "utils", "version"]
    assert snap.module_attribute_names(tree, "pkg") == [
        "__version__", "_backends", "_helper", "_launch", "advertised", "get_soc_version", "utils", "version"]


def test_attribute_assignments_and_module_objects():
    parsed = ast.parse(textwrap.dedent("""
        import types
        from itertools import chain
        import torch_npu
        API_LIST = ['_op_a', '_op_b']
        MORE = ['op_c']
        NAME = 'atb'
        ATB = types.ModuleType(NAME)
        setattr(torch_npu, NAME, ATB)
        setattr(torch_npu, "literal", 1)
        def patch():
            torch_npu.Format = object
            for api_name in API_LIST:
                setattr(torch_npu, api_name, None)
            for api_name in chain(MORE):
                setattr(ATB, api_name, None)
            for dynamic in compute():
                setattr(torch_npu, dynamic, None)
    """))
    assert torch_npu_exports.attribute_assignments(parsed, "torch_npu") == {
        "atb", "literal", "Format", "_op_a", "_op_b"}
    assert torch_npu_exports.module_objects(parsed, "torch_npu") == {"atb": ["op_c"]}


DTYPE_HEADER = """
enum class DType {
  UNDEFINED = -1,
  TORCH_NPU_ENUM_OFFSET(FLOAT, ACL_FLOAT) TORCH_NPU_ENUM_OFFSET(HIFLOAT8, ACL_HIFLOAT8)
      TORCH_NPU_ENUM_OFFSET(FLOAT8_E8M0, ACL_FLOAT8_E8M0)
};
"""


def test_dtype_symbols_from_the_library_checked_against_the_enum():
    binary = b"\x00torch_npu.float32\x00torch_npu.npu\x00torch_npu.hifloat8\x00x\x00torch_npu.float8_e8m0fnu\x00"
    assert torch_npu_exports.dtype_symbols(binary, DTYPE_HEADER) == ["float32", "float8_e8m0fnu", "hifloat8"]
    with pytest.raises(torch_npu_exports.ExportsError, match="3 members but the library names 2"):
        torch_npu_exports.dtype_symbols(binary.replace(b"hifloat8", b"renamed!"), DTYPE_HEADER)

"""The static API conformance checker against the committed snapshot of the real packages."""

from __future__ import annotations

import pytest

from npu_port.transpiler.tables import api_facts
from tools.conformance import (
    check_file,
    check_mindspeed_yaml,
    check_python,
    check_verl_keys,
    check_verl_yaml,
    config_framework,
)


def errors(source: str) -> list[str]:
    return [i.message for i in check_python(source) if i.severity == "error"]


@pytest.mark.parametrize("source,fragment", [
    ('from vllm import LLM\nLLM(model="m", device="npu")', "vllm.LLM() has no parameter 'device'"),
    ('import vllm\nvllm.LLM("m", npu_memory_utilization=0.9)', "no parameter 'npu_memory_utilization'"),
    ('from vllm import LLM as Engine\nllm = Engine("m")\nllm.generate(["x"], foo=1)',
     "vllm.LLM.generate() has no parameter 'foo'"),
    ('from vllm import LLM\nllm = LLM("m")\nllm.no_such_method()', "vllm.LLM has no attribute 'no_such_method'"),
    ('import ray\nray.init(num_npus=8)', "ray.init() has no parameter 'num_npus'"),
    ('from verl.trainer.ppo.ray_trainer import RayPPOTrainer\nRayPPOTrainer(config)',
     "missing required argument(s): tokenizer, role_worker_mapping, resource_pool_manager"),
    ('from vllm import NoSuchThing', "vllm has no attribute 'NoSuchThing'"),
    ('from mindspeed_rl import RayGRPOTrainer\nRayGRPOTrainer(config=1)', "missing required argument(s): actor_worker"),
    ('OVERRIDES = {"trainer.n_npus_per_node": 8}', "trainer.n_npus_per_node is not a key"),
    ('OVERRIDES = {"trainer.nnodes": "two"}', "holds a int"),
    ('from vllm import SamplingParams\nSamplingParams(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, '
     '19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45)',
     "positional arguments"),
])
def test_wrong_calls_are_errors(source, fragment):
    assert any(fragment in m for m in errors(source)), errors(source)


def test_types_flow_through_annotations_and_properties():
    source = '''
from typing import Optional
from vllm import LLM, SamplingParams

class A:
    @property
    def engine(self) -> "LLM":
        ...
    def run(self, other: Optional[LLM]):
        self.engine.generate(["x"], SamplingParams(top_k=1), use_tqdm=False, bogus=1)
        other.chat([], bogus2=2)
        local: LLM = make()
        local.sleep(level=1, bogus3=3)
'''
    found = errors(source)
    assert any("generate() has no parameter 'bogus'" in m for m in found)
    assert any("chat() has no parameter 'bogus2'" in m for m in found)
    assert any("sleep() has no parameter 'bogus3'" in m for m in found) or any(
        "sleep" in i.subject for i in check_python(source) if i.severity == "unverified")


def test_correct_calls_pass():
    source = '''
import ray
from vllm import LLM, SamplingParams
from verl.trainer.main_ppo import TaskRunnerV1, run_ppo

llm = LLM(model="m", tensor_parallel_size=2, pipeline_parallel_size=2, gpu_memory_utilization=0.8,
          distributed_executor_backend="mp", enforce_eager=True)
llm.generate(["x"], SamplingParams(temperature=0.1, top_p=0.9, max_tokens=8), use_tqdm=False)
ray.init(address="auto", runtime_env={"env_vars": {}}, resources={"NPU": 8})
run_ppo(config, task_runner_class=TaskRunnerV1)

@ray.remote(resources={"NPU": 1}, num_cpus=2)
class Worker:
    pass
OVERRIDES = {"trainer.device": "npu", "actor_rollout_ref.rollout.gpu_memory_utilization": 0.6}
'''
    assert check_python(source) == []


def test_unrecorded_modules_are_unverified_not_errors():
    issues = check_python("from verl.utils.config import validate_config\nvalidate_config(config=1)")
    assert issues and {i.severity for i in issues} == {"unverified"}


def test_other_packages_are_ignored():
    assert check_python("import torch\ntorch.cuda.synchronize(bogus=1)\nfrom omegaconf import OmegaConf") == []


def test_verl_yaml_keys():
    good = "defaults: [ppo_trainer, _self_]\nhydra: {searchpath: [x]}\ntrainer: {device: npu, n_gpus_per_node: 16}\n"
    assert check_verl_yaml(good) == []
    bad = check_verl_yaml("trainer: {n_npus_per_node: 16}\nactor_rollout_ref: {rollout: {name: vllm, bogus: 1}}\n")
    assert {i.subject for i in bad} == {"trainer.n_npus_per_node", "actor_rollout_ref.rollout.bogus"}
    # runtime_env is Ray's free-form mapping, not VERL schema
    assert check_verl_keys([("ray_kwargs.ray_init.runtime_env.env_vars.HCCL_X", "1")]) == []


def test_mindspeed_yaml_keys():
    good = ("defaults: [{model: [qwen25_7b]}]\nmegatron_training: {model: qwen25_7b, global_batch_size: 8}\n"
            "rl_config: {actor_resource: {num_npus: 16}}\n"
            "generate_config: {gpu_memory_utilization: 0.4, sampling_config: {top_p: 1.0}}\n")
    assert check_mindspeed_yaml(good) == []
    bad = check_mindspeed_yaml("generate_config: {npu_memory_utilization: 0.4, sampling_config: {bogus: 1}}\n"
                               "trainer_config: {}\n")
    assert {i.subject for i in bad} == {"generate_config.npu_memory_utilization",
                                        "generate_config.sampling_config.bogus", "trainer_config"}


def test_check_file_picks_the_framework(tmp_path):
    verl = tmp_path / "a.yaml"
    verl.write_text("trainer: {n_npus_per_node: 8}\n")
    ms = tmp_path / "b.yaml"
    ms.write_text("rl_config: {bogus: 1}\n")
    py = tmp_path / "c.py"
    py.write_text("from vllm import LLM\nLLM('m', device='npu')\n")
    assert config_framework(verl.read_text()) == "verl" and config_framework(ms.read_text()) == "mindspeed_rl"
    assert [i.subject for i in check_file(verl)] == ["trainer.n_npus_per_node"]
    assert [i.subject for i in check_file(ms)] == ["rl_config.bogus"]
    assert [i.severity for i in check_file(py)] == ["error"]


def test_snapshot_versions_are_the_ones_documented():
    assert api_facts.load("vllm").version == "0.33.0" and api_facts.load("verl").version == "0.9.1"

"""The Python framework rules (env vars, Ray, vLLM, VERL): their data against the real APIs, the
runtime_env profile and its CLI option, and properties no single fixture can show."""

from __future__ import annotations

import ast
import re

import pytest
from click.testing import CliRunner
from fixture_cases import FIXTURES

from npu_port.codemods.env_var_names import EnvVarNames, EnvVarTable
from npu_port.codemods.ray_support import RayTable
from npu_port.codemods.verl_device import VerlTable
from npu_port.codemods.vllm_device_arg import ENGINE_ARG_CALLS
from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.tables import api_facts
from npu_port.transpiler.tables.runtime_env import ProfileError, load_profile

TARGET = "ascend"


def _convert(source: str, *, select=(), extras=False, profile=None, name="t.py") -> str:
    engine = Engine(Settings(select=tuple(select), extras=extras, runtime_env_profile=profile))
    result = engine.convert(source.encode(), name)
    assert result.outcome.status != "failed", result.outcome.error
    return (result.output or source.encode()).decode()


# -- env_vars.yaml -------------------------------------------------------------------------------------
def test_env_table_rows_are_well_formed():
    table = EnvVarTable.for_target(TARGET)
    # A name may have a row for some values (renamed) and one for the rest (reported): never two for the same.
    keys = [(r.cuda, r.values) for r in table.rows]
    assert len(keys) == len(set(keys))
    for row in table.rows:
        if row.status == "rename":
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*", row.npu), row
            assert table.lookup(row.npu) is None, f"{row.npu} would be renamed again"
        if row.status == "unsupported":
            assert row.hint, f"{row.cuda}: an unsupported row needs a hint for the report"


def test_env_table_lookups():
    table = EnvVarTable.for_target(TARGET)
    assert table.target_name("CUDA_VISIBLE_DEVICES") == "ASCEND_RT_VISIBLE_DEVICES"
    assert table.lookup("NCCL_IB_HCA").status == "unsupported"  # through the NCCL_IB_* prefix row
    assert table.target_name("CUDA_HOME") == "CUDA_HOME"
    assert table.lookup("MY_OWN_VARIABLE") is None


def test_every_renamed_or_reported_name_triggers_the_rule():
    for row in EnvVarTable.for_target(TARGET).rows:
        if row.status != "keep":
            assert EnvVarNames.matches(row.cuda.rstrip("*") + "X"), row.cuda


# -- the names the rules emit exist in the real packages (API snapshot) --------------------------------
def test_ray_names_exist():
    ray = api_facts.load("ray")
    table = RayTable.for_target(TARGET)
    assert ray.has("ray", "get_runtime_context")
    assert ray.has("ray.runtime_context.RuntimeContext", "get_accelerator_ids")
    for method in table.resource_map_methods:
        assert ray.has("ray.runtime_context.RuntimeContext", method)
    for call in table.num_gpus_calls | table.bundle_calls | table.resource_map_calls | {table.gpu_ids}:
        module, name = call.rsplit(".", 1)
        if ray.knows_module(module):
            assert ray.has(module, name), call
    assert "resources" in ray.option_names("ray.remote.actor")
    assert "resources" in ray.option_names("ray.remote.task")
    assert ray.accepts_keyword("ray.init", "resources")
    assert ray.accepts_keyword("ray.init", "runtime_env")


def test_vllm_engine_calls_take_no_device_argument():
    vllm = api_facts.load("vllm")
    for call in ("vllm.LLM", "vllm.EngineArgs"):
        assert call in ENGINE_ARG_CALLS
        assert not vllm.accepts_keyword(call, "device")
        assert not vllm.accepts_keyword(call, "npu_memory_utilization")
        assert vllm.accepts_keyword(call, "gpu_memory_utilization")


def test_verl_config_keys_exist():
    verl = api_facts.load("verl")
    for key in VerlTable.for_target(TARGET).config_keys:
        assert verl.has_config_key(key), key


# -- vLLM: the output never gains a device argument or npu_memory_utilization ---------------------------
def _vllm_fixtures():
    return [p for p in sorted(FIXTURES.glob("**/*.input.py")) if re.search(r"^\s*(from|import) vllm", p.read_text(), re.M)]


@pytest.mark.parametrize("path", _vllm_fixtures(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_vllm_output_never_passes_a_device_or_npu_memory_utilization(path):
    source = path.read_text()
    out = _convert(source, extras=True, name=path.name.replace(".input", ""))
    for node in ast.walk(ast.parse(out)):
        # vLLM's engine classes, as the fixtures name them (`Engine` is `from vllm import LLM as Engine`).
        if isinstance(node, ast.Call) and _callee(node) in ("LLM", "Engine", "EngineArgs", "AsyncEngineArgs"):
            for kw in node.keywords:
                # Only a computed device= may remain (it is reported, not guessed at).
                assert not (kw.arg == "device" and isinstance(kw.value, ast.Constant)), ast.unparse(node)
    assert out.count("npu_memory_utilization") == source.count("npu_memory_utilization")


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def test_vllm_examples_keep_their_engine_arguments():
    source = (FIXTURES / "examples" / "vllm_offline.input.py").read_text()
    out = _convert(source)
    for kept in ("gpu_memory_utilization=0.8", "tensor_parallel_size=2", "SamplingParams(", "LLM("):
        assert kept in out


# -- runtime_env profile ---------------------------------------------------------------------------------
def test_builtin_profile():
    profile = load_profile(TARGET)
    names = dict(profile.env_vars)
    assert {"HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT", "HCCL_HOST_SOCKET_PORT_RANGE",
            "HCCL_NPU_SOCKET_PORT_RANGE"} <= set(names)
    assert all(isinstance(v, str) for v in names.values())
    assert dict(profile.when_devices_managed) == {"RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1"}
    assert profile.forwards("HCCL_BUFFSIZE") and profile.forwards("PYTORCH_NPU_ALLOC_CONF")
    assert not profile.forwards("ASCEND_RT_VISIBLE_DEVICES") and not profile.forwards("MASTER_PORT")


def test_user_profile_replaces_env_vars_and_keeps_the_other_defaults(tmp_path):
    path = tmp_path / "env.yaml"
    path.write_text("env_vars:\n  HCCL_CONNECT_TIMEOUT: 900\n  HCCL_DETERMINISTIC: true\n  IS_MULTIMODAL: '0'\n")
    profile = load_profile(TARGET, str(path))
    assert profile.env_vars == (("HCCL_CONNECT_TIMEOUT", "900"), ("HCCL_DETERMINISTIC", "true"),
                                ("IS_MULTIMODAL", "0"))
    assert profile.when_devices_managed == load_profile(TARGET).when_devices_managed


@pytest.mark.parametrize("text", ["", "env_vars: [1, 2]\n", "pip: [x]\n", "env_vars:\n  A: {b: 1}\n", "env_vars: {A: 1\n"])
def test_bad_profiles_are_refused_with_the_file_name(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=re.escape(str(path))):
        load_profile(TARGET, str(path))


def test_user_profile_drives_the_injection_and_is_idempotent(tmp_path):
    path = tmp_path / "env.yaml"
    path.write_text("env_vars:\n  HCCL_CONNECT_TIMEOUT: '900'\n")
    source = "import ray\n\nray.init(address='auto')\n"
    once = _convert(source, select=("ray-runtime-env",), profile=str(path))
    assert '"HCCL_CONNECT_TIMEOUT": "900"' in once and "HCCL_EXEC_TIMEOUT" not in once
    assert _convert(once, select=("ray-runtime-env",), profile=str(path)) == once


def test_existing_keys_are_never_overwritten():
    source = 'import ray\nray.init(runtime_env={"env_vars": {"HCCL_CONNECT_TIMEOUT": "60"}})\n'
    out = _convert(source, select=("ray-runtime-env",))
    assert out.count("HCCL_CONNECT_TIMEOUT") == 1 and '"HCCL_CONNECT_TIMEOUT": "60"' in out


def test_runtime_env_is_an_extra():
    source = "import ray\nray.init()\n"
    assert _convert(source) == source
    assert "runtime_env=" in _convert(source, extras=True)


def test_cli_runtime_env_option(tmp_path):
    profile = tmp_path / "env.yaml"
    profile.write_text("env_vars:\n  HCCL_CONNECT_TIMEOUT: '900'\n")
    script = tmp_path / "main.py"
    script.write_text("import ray\nray.init()\n")
    runner = CliRunner()
    ok = runner.invoke(cli, ["convert", str(script), "--extras", "--runtime-env", str(profile), "-q"])
    assert ok.exit_code == 0, ok.output
    assert '"HCCL_CONNECT_TIMEOUT": "900"' in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("nothing: here\n")
    refused = runner.invoke(cli, ["convert", str(script), "--extras", "--runtime-env", str(bad)])
    assert refused.exit_code == 2 and "env_vars" in refused.output
    assert script.read_text() == "import ray\nray.init()\n"


# -- Ray: resolution through imports, and what stays ---------------------------------------------------
def test_ray_rules_resolve_aliases_and_leave_other_apis_alone():
    source = (
        "import ray as r\n"
        "from ray import remote as rr\n"
        "@rr(num_gpus=1)\n"
        "def f():\n"
        "    return r.get_gpu_ids()\n"
        "class Pool:\n"
        "    def remote(self, num_gpus=0):\n"
        "        return num_gpus\n"
        "Pool().remote(num_gpus=1)\n"
    )
    out = _convert(source, select=("ray-",))
    assert '@rr(resources={"NPU": 1})' in out
    assert 'r.get_runtime_context().get_accelerator_ids()["NPU"]' in out
    assert "Pool().remote(num_gpus=1)" in out


def test_ignore_comment_silences_a_ray_rewrite():
    source = "import ray\n\n@ray.remote(num_gpus=1)  # npu-port: ignore[ray-num-gpus]\ndef f():\n    pass\n"
    assert _convert(source, select=("ray-num-gpus",)) == source


def test_env_names_in_every_example_output_are_npu_names():
    # No converted example may still set a renamed CUDA variable through os.environ.
    for path in sorted((FIXTURES / "examples").glob("*.input.py")):
        out = _convert(path.read_text(), extras=".extras" in path.name, name=path.name.replace(".input", ""))
        for name in ("CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "NCCL_SOCKET_IFNAME"):
            assert not re.search(rf"environ(\.get|\.setdefault|\.pop)?[\[(]\s*['\"]{name}", out), (path, name)



@pytest.mark.parametrize("text, expected", [
    ("env_vars:\n  \"$(touch pwned)\": '1'\n", "not an environment-variable name"),
    ("env_vars:\n  'A; touch pwned': '1'\n", "not an environment-variable name"),
    ("env_vars:\n  A: \"x\\ny\"\n", "line break"),
    ("env_vars:\n  A: \"\\e[31m\"\n", "control character"),
    ("env_vars: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("\xff\xfe", "cannot read"),
])
def test_cli_runtime_env_profile_values_are_checked_for_the_code_they_land_in(tmp_path, text, expected):
    profile = tmp_path / "env.yaml"
    profile.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    script = tmp_path / "main.py"
    script.write_text("import ray\nray.init()\n")
    r = CliRunner().invoke(cli, ["convert", str(script), "--extras", "--runtime-env", str(profile)])
    assert r.exit_code == 2 and expected in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert not (tmp_path / "pwned").exists()

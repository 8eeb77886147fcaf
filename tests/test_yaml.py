"""YAML edits replace single tokens: every other byte of the file stays as it was."""

from __future__ import annotations

import pytest
import yaml
from fixture_cases import FIXTURES

from npu_port.transpiler.core.engine import Engine, convert_text
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.rules import RunOptions
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.text.yaml_edit import YamlDocument, scalar_end


def _convert(text: str, **settings):
    return Engine(Settings(**settings)).convert(text.encode(), "config.yaml")


@pytest.mark.parametrize("name", ["verl_ppo_trainer", "ray_runtime_env"])
def test_only_the_rewritten_lines_change(name):
    src = (FIXTURES / "examples" / f"{name}.input.yaml").read_text()
    result = _convert(src)
    out = result.output.decode()
    before, after = src.splitlines(keepends=True), out.splitlines(keepends=True)
    assert len(before) == len(after)
    changed = [n for n, (a, b) in enumerate(zip(before, after), start=1) if a != b]
    # exactly the lines a change was reported for, and on them only the token moved
    assert changed == sorted({f.line for f in result.outcome.changes})
    for n in changed:
        a, b = before[n - 1], after[n - 1]
        assert a.split("#")[1:] == b.split("#")[1:] and len(a) - len(a.lstrip()) == len(b) - len(b.lstrip())
    assert yaml.safe_load(out) is not None


def test_quotes_comments_and_flow_style_are_kept():
    src = ("trainer: {device: 'cuda', n_gpus_per_node: 8}  # flow\n"
           "actor_rollout_ref: {}\n"
           "runtime_env:\n"
           "  env_vars: {\"CUDA_VISIBLE_DEVICES\": \"0\", NCCL_DEBUG: WARN}\n")
    out = _convert(src).output.decode()
    assert out == ("trainer: {device: 'npu', n_gpus_per_node: 8}  # flow\n"
                   "actor_rollout_ref: {}\n"
                   "runtime_env:\n"
                   "  env_vars: {\"ASCEND_RT_VISIBLE_DEVICES\": \"0\", NCCL_DEBUG: WARN}\n")


def test_multiple_documents_are_each_converted():
    src = ("trainer:\n  device: cuda\n  n_gpus_per_node: 8\n---\n"
           "env_vars:\n  NCCL_SOCKET_IFNAME: eth0\n")
    out = _convert(src).output.decode()
    assert "device: npu" in out and "HCCL_SOCKET_IFNAME: eth0" in out
    assert len(list(yaml.safe_load_all(out))) == 2


def test_strings_that_only_mention_cuda_stay():
    src = ("trainer:\n  device: cuda:0   # not the plain device name: left for a human\n"
           "  n_gpus_per_node: 8\n  default_local_dir: /ckpt/cuda\n  note: \"device: cuda\"\n")
    assert _convert(src).output is None


def test_bad_yaml_fails_with_its_line():
    result = _convert("trainer:\n  device: cuda\n   bad: [\n")
    assert result.outcome.status == "failed"
    assert "YAML error at line" in result.outcome.error


def test_scalar_ends():
    text = 'a: "x\\"y" # c\nb: \'it\'\'s\'\nc: plain value  # c\nd: {k: v, w: 2}\n'
    doc = YamlDocument(text)
    root = doc.documents[0]
    spans = [text[slice(*doc.value_span(root, k))] for k in "abc"]
    assert spans == ['"x\\"y"', "'it''s'", "plain value"]
    flow = root["d"]
    assert text[slice(*doc.key_span(flow, "k"))] == "k"
    assert text[slice(*doc.value_span(flow, "k"))] == "v"
    assert scalar_end("key: v", 0, in_key=True) == 3


def test_ignore_comment():
    src = "trainer:\n  device: cuda  # npu-port: ignore[yaml-verl-device]\n  n_gpus_per_node: 8\n"
    assert _convert(src).output is None


@pytest.mark.parametrize("name", ["mindspeed_rl_grpo", "mindspeed_rl_runtime_env"])
def test_mindspeed_rl_configs_come_out_identical_even_when_parsed(name):
    """The prefilter skips these files; the YAML rules also leave them alone when they do read them."""
    data = (FIXTURES / "examples" / f"{name}.input.yaml").read_bytes()
    rules = [r for r in all_rules().values() if r.LANGUAGE == "yaml"]
    out, findings = convert_text(data, f"{name}.yaml", rules, RunOptions())
    assert out == data and findings == []

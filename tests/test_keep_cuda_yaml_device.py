"""The --keep-cuda form of a VERL config's `trainer.device` resolves the way VERL's Hydra loading resolves it
(OmegaConf): to the DEVICE the launcher's probe exports, else to `cuda` as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings

omegaconf = pytest.importorskip("omegaconf")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = ["rules/yaml-verl-device/ppo_trainer.keep-cuda.expected.yaml",
         "examples/verl_ppo_trainer.keep-cuda.expected.yaml"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("env", "device"), [(None, "cuda"), ("npu", "npu"), ("cuda", "cuda")])
def test_trainer_device_reads_the_launcher_probe(case, env, device, monkeypatch):
    if env is None:
        monkeypatch.delenv("DEVICE", raising=False)
    else:
        monkeypatch.setenv("DEVICE", env)
    config = omegaconf.OmegaConf.create((FIXTURES / case).read_text(encoding="utf-8"))
    omegaconf.OmegaConf.resolve(config)
    assert config.trainer.device == device


def test_flow_style_trainer_is_quoted():
    src = b"actor_rollout_ref: {}\ntrainer: {device: cuda, n_gpus_per_node: 8}\n"
    out = Engine(Settings(select=("yaml-verl-device",), keep_cuda=True)).convert(src, "ppo.yaml").output
    assert out == b"actor_rollout_ref: {}\ntrainer: {device: '${oc.env:DEVICE,cuda}', n_gpus_per_node: 8}\n"
    config = omegaconf.OmegaConf.create(out.decode())
    assert omegaconf.OmegaConf.to_container(config, resolve=True)["trainer"]["device"] in ("cuda", "npu")

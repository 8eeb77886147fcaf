"""codemods/data/ascend/framework_settings.yaml against the VERL key snapshots, and the release ranges at work."""

from __future__ import annotations

import pytest

from npu_port.codemods import _verl_overrides
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.tables import verl_keys
from npu_port.transpiler.tables.mapping import load_table

TABLE = load_table("ascend", "framework_settings")
OVERRIDES = TABLE["verl_overrides"]
ROWS = [*OVERRIDES, *TABLE["env"]]
RELEASES = verl_keys.releases()
SNAPSHOTTED = {r.version for r in RELEASES}


def _in(row: dict) -> list[verl_keys.Release]:
    return [r for r in RELEASES if _verl_overrides.in_range(r.version, row["verl"])]


@pytest.mark.parametrize("row", ROWS, ids=[r["key"] for r in ROWS])
def test_row_says_what_and_where_from(row):
    assert row["action"] in ("add", "leave")
    assert str(row["value"]) and row["source"] and row["why"].strip()
    if row["action"] == "add":
        assert row["rule"] in all_rules()
    else:
        assert "rule" not in row, "a row left alone names no rule"


@pytest.mark.parametrize("row", OVERRIDES, ids=[r["key"] for r in OVERRIDES])
def test_every_release_in_range_has_the_key(row):
    releases = _in(row)
    assert releases, f"{row['verl']} holds no snapshotted release"
    lower = [c.strip()[2:] for c in row["verl"].split(",") if c.strip().startswith(">=")]
    assert lower and lower[0] in SNAPSHOTTED, "the range starts at a release whose keys are snapshotted"
    for release in releases:
        config = release.entry_config("verl.trainer.main_ppo")
        assert release.unknown_key(row["key"], config, invented_ok=False) is None, \
            f"VERL {release.version}'s {config} has no {row['key']}"


@pytest.mark.parametrize("row", [r for r in OVERRIDES if "follows" in r], ids=lambda r: r["key"])
def test_a_key_that_follows_another_defaults_to_an_interpolation(row):
    for release in _in(row):
        config = release.entry_config("verl.trainer.main_ppo")
        # `${oc.select:...}` is snapshotted as a string default where the other key's type is a bool.
        assert release.key_type(row["key"], config) == "str"
        assert release.key_type(row["follows"], config) == "bool"


def test_ranges():
    assert _verl_overrides.in_range("0.6.1", ">=0.6.1,<0.7.0")
    assert _verl_overrides.in_range("0.6.0.dev", ">=0.6.0,<0.7.0")
    assert not _verl_overrides.in_range("0.7.1", ">=0.6.1,<0.7.0")
    assert not _verl_overrides.in_range("0.5.0", ">=0.6.1")
    with pytest.raises(ValueError):
        _verl_overrides.in_range("0.6.1", "~=0.6")


LAUNCHER = b"""python3 -m verl.trainer.main_ppo \\
    actor_rollout_ref.rollout.name=vllm \\
    trainer.total_epochs=1
"""


@pytest.mark.parametrize("version, added", [
    (None, ["actor_rollout_ref.rollout.enable_chunked_prefill=False"]),
    ("0.7.1", ["actor_rollout_ref.rollout.enable_chunked_prefill=False"]),
    ("0.6.1", ["actor_rollout_ref.rollout.enable_chunked_prefill=False", "trainer.device=npu"]),
    ("0.5.0", []),  # older than every key snapshot: nothing the table cannot vouch for
])
def test_the_targeted_release_decides(version, added):
    options = (("verl_version", (version,)),) if version else ()
    engine = Engine(Settings(select=("shell-verl-npu-settings",), extras=True, options_extra=options))
    out = engine.convert(LAUNCHER, "run.sh").output
    text = (out or LAUNCHER).decode()
    for override in ["actor_rollout_ref.rollout.enable_chunked_prefill=False", "trainer.device=npu"]:
        assert (override in text) == (override in added), (version, text)


def test_a_key_the_targeted_release_lacks_is_never_added(monkeypatch):
    row = _verl_overrides.Setting("actor_rollout_ref.rollout.no_such_key", "False", "shell-verl-npu-settings", {},
                                  ">=0.6.1")
    monkeypatch.setattr(_verl_overrides, "settings", lambda target: (row,))
    engine = Engine(Settings(select=("shell-verl-npu-settings",), extras=True))
    assert engine.convert(LAUNCHER, "run.sh").output is None


CONFIG = b"""actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 16
  rollout:
    name: vllm
trainer:
  total_epochs: 1
"""
YAML_KEYS = {"actor_rollout_ref.actor.use_torch_compile": "use_torch_compile: false",
             "actor_rollout_ref.rollout.enable_chunked_prefill": "enable_chunked_prefill: false",
             "trainer.device": "device: npu"}


@pytest.mark.parametrize("version, added", [
    (None, ["actor_rollout_ref.actor.use_torch_compile", "actor_rollout_ref.rollout.enable_chunked_prefill"]),
    ("0.6.1", list(YAML_KEYS)),
    ("0.5.0", []),
])
def test_a_config_yaml_gets_what_a_launcher_gets(version, added):
    """yaml-verl-npu-settings reads the same rows, ranges and conditions as the launcher rules."""
    options = (("verl_version", (version,)),) if version else ()
    engine = Engine(Settings(select=("yaml-verl-npu-settings",), extras=True, options_extra=options))
    out = engine.convert(CONFIG, "grpo.yaml").output
    text = (out or CONFIG).decode()
    for key, line in YAML_KEYS.items():
        assert (line in text) == (key in added), (version, text)
    if out is not None:
        assert engine.convert(out, "grpo.yaml").output is None, "converting twice changes nothing"


def test_a_config_yaml_is_left_alone_without_extras():
    out = Engine(Settings()).convert(CONFIG, "grpo.yaml").output
    assert b"use_torch_compile" not in (out or CONFIG)

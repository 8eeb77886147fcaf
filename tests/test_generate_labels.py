"""Version labels are true (issue 37 item 5): a generated file names a release only where its facts were
read from that release, else the commit. MindSpeed-RL's snapshot is of a master commit whose setup.py
still says 2.1.0 while its qwen3 configs are not in the v2.1.0 tag: it is named by its commit."""

from __future__ import annotations

from npu_port.transpiler.generate.render import render, schemas
from npu_port.transpiler.generate.versions import mindspeed_rl_source
from npu_port.transpiler.tables import api_facts


def test_msrl_train_names_the_commit_its_keys_were_read_at_not_a_release():
    snap = api_facts.load("mindspeed_rl")
    source = mindspeed_rl_source()
    assert source.commit == snap.commit
    rendered = render("msrl-train", schemas()["msrl-train"].validate({}))
    for text in (rendered.main, rendered.config or ""):
        head = "\n".join(text.splitlines()[:6])
        assert "MindSpeed-RL 2.1.0" not in head and f"git {snap.commit[:10]}" in head
        assert f"checkout {snap.commit[:10]}" in head  # how to get exactly that source
    assert "not a release" in source.label


def test_the_api_snapshot_names_no_release_it_was_not_read_from():
    snap = api_facts.load("mindspeed_rl")
    assert snap.version is None and snap.raw["setup_version"] == "2.1.0"  # setup.py's number, not a release
    assert snap.label == f"git {snap.commit[:10]}"


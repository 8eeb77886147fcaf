"""docs/rules.md, docs/support-matrix.md and docs/config-schemas.md are generated; this fails when they are stale."""

from __future__ import annotations

from npu_port.transpiler.core.registry import all_rules
from npu_port.transpiler.tables.mapping import available_targets, load_table
from npu_port.transpiler.tables.user_tables import mapping_tables
from tools.docgen import generated_docs, rule_sections, stale


def test_generated_docs_are_current():
    old = stale(generated_docs())
    assert not old, f"stale: {[str(p) for p in old]}; run `python -m tools.docgen` and commit the result"


def test_the_generated_code_is_held_current_too():
    # Committed and proved current rather than built at install (CONTRIBUTING.md says why): the check above
    # covers them only while the generator lists them.
    names = {(p.parent.name, p.name) for p in generated_docs()}
    assert {("core", "rule_index.py"), ("tables", "builtin_tables.py")} <= names


def test_every_rule_is_documented_with_all_sections():
    text = generated_docs()[next(p for p in generated_docs() if p.name == "rules.md")]
    for rule_id, rule in all_rules().items():
        sections = rule_sections(rule)
        missing = [s for s in ("What it does", "Why", "Example", "Fix safety") if not sections.get(s)]
        assert not missing, f"{rule_id}: docstring lacks {missing}"
        assert f"## `{rule_id}`" in text


def test_support_matrix_lists_every_cuda_name_with_its_npu_form_or_a_reason():
    text = generated_docs()[next(p for p in generated_docs() if p.name == "support-matrix.md")]
    for target in available_targets():
        for table in mapping_tables(target):
            for row in load_table(target, table)["rows"]:
                if "cuda" not in row:
                    continue
                line = next((l for l in text.splitlines() if l.startswith(f"| `{row['cuda']}` |")), None)
                assert line is not None, f"{table}: {row['cuda']} missing from the support matrix"
                npu_cell, notes = line.split(" | ")[1], line.split(" | ")[3]
                assert npu_cell != "none" or notes.strip(" |"), f"{row['cuda']}: no NPU name and no reason"


def test_stale_detection_can_fail(tmp_path):
    path = tmp_path / "rules.md"
    path.write_text("old\n")
    assert stale({path: "new\n"}) == [path]
    assert stale({path: "old\n"}) == []


def _config_schemas_text() -> str:
    return generated_docs()[next(p for p in generated_docs() if p.name == "config-schemas.md")]


def test_config_schemas_list_every_verl_and_mindspeed_key_the_checks_use():
    from npu_port.transpiler.tables import api_facts

    text = _config_schemas_text()
    verl = api_facts.load("verl")
    for config in ("ppo_trainer", "ppo_megatron_trainer"):
        for key in verl.config_keys(config):
            assert f"| `{key}` |" in text, f"{config}: {key} missing"
    msrl = api_facts.load("mindspeed_rl")
    for section in msrl.sections():
        assert f"<code>{section}</code>: {len(msrl.section_keys(section))} keys" in text
        for key in msrl.section_keys(section):
            assert f"`{key}`" in text


def test_config_schemas_map_generate_options_to_the_keys_they_write():
    from tools.docgen import generated_keys

    verl = generated_keys("verl-train")
    assert verl["trainer.n_gpus_per_node"]["set_by"] == ["--devices-per-node"]
    assert verl["trainer.device"]["value"] == "npu" and verl["trainer.device"]["set_by"] == []
    # Keys only PPO writes are found, and what sets them is found from the PPO render.
    assert verl["critic.optim.lr"]["only_with"] == ["--algorithm ppo"]
    assert verl["critic.optim.lr"]["set_by"] == ["--critic-lr"]
    assert verl["actor_rollout_ref.actor.kl_loss_coef"]["left_out_with"] == ["--algorithm ppo"]
    assert "actor_rollout_ref.actor.checkpoint.save_contents" in generated_keys("pipeline")
    msrl = generated_keys("msrl-train")
    assert msrl["rl_config.actor_resource.num_npus"]["set_by"] == ["--nnodes", "--npus-per-node"]
    assert msrl["megatron_training.distributed_backend"]["value"] == "nccl"
    text = _config_schemas_text()
    assert "| `trainer.n_gpus_per_node` | int | `8` | `--devices-per-node` | verl-train, pipeline |" in text
    assert "**not in VERL**" not in text, "generate writes a key VERL's packaged config lacks"

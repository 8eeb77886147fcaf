"""docs/rules.md and docs/support-matrix.md are generated; this fails when they are stale."""

from __future__ import annotations

from transpiler.docgen import generated_docs, rule_sections, stale
from transpiler.mapping import available_targets, load_table
from transpiler.registry import all_rules
from transpiler.user_tables import mapping_tables


def test_generated_docs_are_current():
    old = stale(generated_docs())
    assert not old, f"stale: {[str(p) for p in old]}; run `python -m transpiler.docgen` and commit the result"


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

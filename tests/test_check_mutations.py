"""check on a corpus of broken ports (fixtures/check_mutations): the wrong lines it must flag, the ones it is
known to miss, and the catch rate per kind (issue 34: at least 8 in 10)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import yaml
from click.testing import CliRunner

from npu_port.transpiler.cli import cli

CORPUS = Path(__file__).parent.parent / "fixtures" / "check_mutations"


def _flagged(tmp_path: Path) -> tuple[dict, set[tuple[str, int]]]:
    tree = tmp_path / "corpus"
    shutil.copytree(CORPUS, tree)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(cli, ["check", "--isolated", "--no-cache", "--exit-zero", "--output-format", "json",
                                      "-o", str(out), str(tree)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    lines = set()
    for f in report["findings"]:
        if f["severity"] in ("error", "warning"):
            rel = Path(f["file"]).resolve().relative_to(tree.resolve()).as_posix()
            lines.update((rel, f["line"] + d) for d in (-1, 0, 1))
    return yaml.safe_load((CORPUS / "manifest.yaml").read_text(encoding="utf-8")), lines


def test_check_flags_the_wrong_lines_of_the_corpus(tmp_path):
    manifest, flagged = _flagged(tmp_path)
    seen: Counter = Counter()
    caught: Counter = Counter()
    wrong_now = []
    for row in manifest["wrong"]:
        hit = (row["file"], row["line"]) in flagged
        seen[row["kind"]] += 1
        caught[row["kind"]] += hit
        if hit != row["caught"]:
            wrong_now.append(f"{row['file']}:{row['line']} ({row['kind']}): flagged={hit}, manifest says {row['caught']}")
    assert not wrong_now, "\n".join(wrong_now)
    rate = sum(caught.values()) / sum(seen.values())
    print("\n".join(f"{kind:28} {caught[kind]}/{seen[kind]}" for kind in sorted(seen)))
    assert rate >= 0.8, f"catch rate {rate:.2f}"

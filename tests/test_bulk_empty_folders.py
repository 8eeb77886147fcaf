"""`convert --out` mirrors the folders that hold nothing, as VERL's empty `recipe/` placeholder."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from npu_port.transpiler.cli import cli


def _tree(root: Path) -> Path:
    src = root / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "train.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    (src / "recipe").mkdir()
    (src / "a" / "b" / "c").mkdir(parents=True)  # only empty folders below a/
    (src / "data" / "__pycache__").mkdir(parents=True)  # a skipped folder: data/ is not empty
    (src / "skipme" / "empty").mkdir(parents=True)
    (src / "pyproject.toml").write_text('[tool.npu-port]\nexclude = ["skipme"]\n')
    return src


def _folders(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir())


def test_empty_folders_are_mirrored_and_excluded_or_skipped_ones_are_not(tmp_path):
    src = _tree(tmp_path)
    out = tmp_path / "out"
    for _ in range(2):  # a re-run into the same --out changes nothing
        r = CliRunner().invoke(cli, ["convert", str(src), "--out", str(out), "--no-cache", "-q", "--force"])
        assert r.exit_code == 0, r.output
        assert _folders(out) == ["a", "a/b", "a/b/c", "pkg", "recipe"]
    assert ".npu()" in (out / "pkg" / "train.py").read_text()


def test_with_several_inputs_each_lands_under_its_own_name(tmp_path):
    src = _tree(tmp_path)
    other = tmp_path / "other"
    (other / "empty").mkdir(parents=True)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["convert", str(src), str(other), "--out", str(out), "--no-cache", "-q",
                                 "--isolated"])
    assert r.exit_code == 0, r.output
    assert (out / "repo" / "recipe").is_dir() and (out / "other" / "empty").is_dir()
    assert (out / "repo" / "skipme" / "empty").is_dir()  # --isolated: no configuration excludes it


def test_no_folder_is_made_without_out_or_inside_the_input(tmp_path):
    src = _tree(tmp_path)
    r = CliRunner().invoke(cli, ["convert", str(src), "--check", "--no-cache", "-q"])
    assert r.exit_code == 3, r.output
    assert _folders(src) == ["a", "a/b", "a/b/c", "data", "data/__pycache__", "pkg", "recipe", "skipme",
                             "skipme/empty"]

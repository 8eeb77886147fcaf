"""Batch scripts are shell scripts: `.slurm`, `.sbatch`, `.pbs`, and a file of any other name whose first line is
a shell `#!` are read and converted; data and documents are never read for a `#!`."""

from __future__ import annotations

from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.files import language_of, needs_head

JOB = "#!/bin/bash\n#SBATCH --nodes=1\nexport CUDA_VISIBLE_DEVICES=0,1\ntorchrun train.py --backend nccl\n"


def test_batch_suffixes_are_shell_and_other_names_are_read_for_a_shebang():
    for name in ("run.slurm", "job.SBATCH", "train.pbs", "a/b/launch.sh"):
        assert language_of(name) == "shell", name
    for name in ("launch", "run.job", "start.cmd", ".hidden_script"):
        assert needs_head(name), name
    for name in ("README.md", "notes.txt", "data.json", "model.safetensors", "main.c", "nb.ipynb", "x.py"):
        assert not needs_head(name), name


def test_a_job_script_of_any_name_is_converted(tmp_path):
    src = tmp_path / "jobs"
    src.mkdir()
    for name in ("run.slurm", "run.sbatch", "run.pbs", "launch.job", "launch"):
        (src / name).write_text(JOB)
    (src / "notes.md").write_text(JOB)  # a document that quotes a script: never a script itself
    result = CliRunner().invoke(cli, ["convert", str(src), "--out", str(tmp_path / "out"), "--no-cache"])
    assert result.exit_code == 0, result.output
    for name in ("run.slurm", "run.sbatch", "run.pbs", "launch.job", "launch"):
        out = (tmp_path / "out" / name).read_text()
        assert "ASCEND_RT_VISIBLE_DEVICES=0,1" in out and "--backend hccl" in out, name
    assert (tmp_path / "out" / "notes.md").read_text() == JOB


def test_a_makefiles_recipe_view_keeps_the_files_offsets_and_only_the_recipes_shell():
    from npu_port.transpiler.text.make_recipes import recipe_view, recipes

    text = ("DEVICE ?= cuda\n\ntrain:\n\t@CUDA_VISIBLE_DEVICES=0 python t.py \\\n\t  --device cuda\r\n"
            "\t-echo $$HOME $(DEVICE)\nnot_a_recipe: dep\n")
    view = recipe_view(text)
    assert len(view) == len(text) and view.splitlines(keepends=True)[0].strip() == ""
    assert [code for _, code in recipes(text)] == [
        "  CUDA_VISIBLE_DEVICES=0 python t.py \\\n   --device cuda\r\n", "  echo  $HOME $(DEVICE)\n"]
    for start, code in recipes(text):
        assert view[start:start + len(code)] == code
    assert "cuda" not in view.splitlines()[0] and "not_a_recipe" not in view

"""Plain `weave` (no --agent-loop): the adapter it inserts is called for real after training, weaving is
idempotent, and an existing output is overwritten only with --force."""

from __future__ import annotations

import sys
import types

import pytest
from click.testing import CliRunner

from npu_port.transpiler.cli import cli
from npu_port.transpiler.generate.weave import weave

SCRIPT = '''"""A training script that leaves Hugging Face weights in --out."""
import argparse
import json
import os


def train(args):
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "config.json"), "w") as fh:
            json.dump({"trained": True}, fh)
    return "trained"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    train(parser.parse_args())
'''


class RecordingLLM:
    built: list = []
    asked: list = []

    def __init__(self, **kwargs):
        RecordingLLM.built.append(kwargs["model"])

    def generate(self, prompts, params=None, use_tqdm=True):
        RecordingLLM.asked.extend(prompts)
        return [types.SimpleNamespace(request_id="0", outputs=[types.SimpleNamespace(text="84")]) for _ in prompts]


@pytest.fixture
def woven(monkeypatch):
    """Weave SCRIPT with `handoff_dir`, load it with a recording vllm.LLM, return the module."""
    vllm = types.ModuleType("vllm")
    vllm.LLM = RecordingLLM
    vllm.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    RecordingLLM.built, RecordingLLM.asked = [], []

    def load(handoff_dir=None):
        source = weave(SCRIPT, handoff_dir=handoff_dir).source
        module = types.ModuleType("woven_train")
        monkeypatch.setitem(sys.modules, "woven_train", module)  # dataclasses look their module up
        exec(compile(source, "woven_train.py", "exec"), module.__dict__)
        return module
    return load


def test_the_trained_weights_reach_the_adapter_and_it_answers(woven, tmp_path, capsys):
    out = tmp_path / "hf"
    module = woven(str(out))
    assert module.run_pipeline(types.SimpleNamespace(out=str(out))) == "trained"
    assert RecordingLLM.built == [str(out)]  # built on the trained weights, not on the base model
    assert RecordingLLM.asked == [module.ADAPTER_PROBE_PROMPT]
    assert f"serving {out} (loaded)" in capsys.readouterr().out


def test_without_a_hand_off_folder_the_adapter_serves_its_model_and_answers(woven, capsys):
    module = woven()
    module.run_pipeline(types.SimpleNamespace(out=None))
    assert RecordingLLM.built == [module.ADAPTER_MODEL_PATH] and RecordingLLM.asked
    assert "no hand-off folder" in capsys.readouterr().out


def test_a_hand_off_folder_training_left_empty_is_an_error_not_a_silent_skip(woven, tmp_path):
    module = woven(str(tmp_path / "never-written"))
    with pytest.raises(module.AdapterError, match="not a Hugging Face model directory"):
        module.run_pipeline(types.SimpleNamespace(out=None))
    assert RecordingLLM.built == []


def test_only_rank_0_serves(woven, tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    module = woven(str(tmp_path / "hf"))
    module.run_pipeline(types.SimpleNamespace(out=str(tmp_path / "hf")))
    assert RecordingLLM.built == [] and RecordingLLM.asked == []


def test_weaving_twice_changes_nothing():
    once = weave(SCRIPT).source
    again = weave(once)
    assert not again.changed and again.source == once


def _weave(*args: str):
    return CliRunner().invoke(cli, ["weave", *args])


def test_an_existing_output_is_overwritten_only_with_force(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "woven.py"
    out.write_text("# my own file\n")
    refused = _weave(str(script), "-o", str(out))
    assert refused.exit_code == 2 and "use --force" in refused.output
    assert out.read_text() == "# my own file\n"
    forced = _weave(str(script), "-o", str(out), "--force")
    assert forced.exit_code == 0, forced.output
    woven_text = out.read_text()
    assert "def run_pipeline(" in woven_text
    # The same output again holds exactly what would be written: nothing to overwrite, no --force needed.
    same = _weave(str(script), "-o", str(out))
    assert same.exit_code == 0 and "already up to date" in same.output and out.read_text() == woven_text


def test_an_existing_requirements_file_is_kept_without_force(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    req = tmp_path / "requirements-npu.txt"
    req.write_text("torch\n")
    refused = _weave(str(script), "-o", str(tmp_path / "w.py"), "--requirements-out", str(req))
    assert refused.exit_code == 2 and str(req) in refused.output
    assert req.read_text() == "torch\n" and not (tmp_path / "w.py").exists()  # nothing written at all
    assert _weave(str(script), "-o", str(tmp_path / "w.py"), "--requirements-out", str(req), "--force").exit_code == 0
    assert "verl==" in req.read_text()

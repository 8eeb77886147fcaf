"""shell-bitsandbytes-npu: which commands run trl / LLaMA-Factory, and their settings in quotes."""

from __future__ import annotations

import pytest

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings


def _convert(text: str) -> tuple[str, list[str]]:
    result = Engine(Settings(select=("shell-bitsandbytes-npu",))).convert(text.encode(), "run.sh")
    out = (result.output or text.encode()).decode()
    return out, [f.message for f in result.outcome.findings if f.kind == "finding"]


@pytest.mark.parametrize("command", [
    "python -m trl.scripts.sft --load_in_4bit --use_bnb_nested_quant",
    "torchrun --nproc_per_node 8 ./trl/scripts/grpo.py --load_in_4bit --use_bnb_nested_quant",
    "deepspeed examples/scripts/dpo.py --load_in_4bit --use_bnb_nested_quant",
])
def test_trl_entry_points(command):
    out, _ = _convert(command + "\n")
    assert out == command + " false\n"


@pytest.mark.parametrize("command", [
    "FORCE_TORCHRUN=1 torchrun --nproc_per_node 2 src/train.py cfg.yaml quantization_bit=4\n",
    "torchrun --nnodes 1 /opt/LLaMA-Factory/src/llamafactory/launcher.py cfg.yaml quantization_bit=4\n",
])
def test_llamafactory_launcher_files(command):
    out, _ = _convert(command)
    assert out == command.rstrip("\n") + " double_quantization=false\n"


@pytest.mark.parametrize("command", [
    "python examples/scripts/nested/train.py --load_in_4bit --use_bnb_nested_quant\n",  # not trl's layout
    "python -m mylib.scripts.sft --load_in_4bit --use_bnb_nested_quant\n",
    "accelerate launch train_sft.py --load_in_8bit\n",
])
def test_other_commands_are_left_alone(command):
    assert _convert(command) == (command, [])


def test_inside_bash_c_the_edit_is_quoted_for_it():
    out, _ = _convert("ssh node1 bash -c 'llamafactory-cli train --quantization_bit 4'\n")
    assert out == "ssh node1 bash -c 'llamafactory-cli train --quantization_bit 4 --double_quantization false'\n"


def test_idempotent_and_last_setting_wins():
    once, _ = _convert("trl sft --load_in_4bit --use_bnb_nested_quant false --use_bnb_nested_quant\n")
    assert once == "trl sft --load_in_4bit --use_bnb_nested_quant false --use_bnb_nested_quant false\n"
    assert _convert(once) == (once, [])

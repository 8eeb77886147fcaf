"""shell-ascend-setenv (extras): source the CANN and ATB environment scripts at the top of launchers."""

from __future__ import annotations

import re

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import Script, ShellRule, preamble_end, python_launch

_LAUNCHED = re.compile(r"(python(\d+(\.\d+)?)?|torchrun|ray|vllm|accelerate|deepspeed)$")


def is_launcher(script: Script) -> bool:
    """The script starts training, inference or a Ray node (not a helper that only copies files)."""
    return any(_LAUNCHED.match(cmd.program()) or python_launch(cmd) for cmd in script.commands)


class ShellAscendSetenv(ShellRule):
    """Adds `source /usr/local/Ascend/ascend-toolkit/set_env.sh` and the nnal/atb one to launchers.

    What it does:
        In a script that launches Python, torchrun, Ray, vLLM, accelerate or deepspeed, inserts the
        `source` lines from the target's shell table after the shebang, the leading comments and
        `set -e`-style lines, each one unless the script already sources a file ending in the same
        path (any install prefix counts).

    Why:
        The CANN toolkit and the ATB library are found through the variables these scripts set;
        VERL's NPU launchers (e.g. run_qwen3_4b_grpo_vllm_1k_npu.sh) start with both lines. Images
        that already set them up make the lines harmless, so this is an opt-in extra.

    Example:
        #!/bin/bash                    #!/bin/bash
        set -x                     ->  set -x
        python3 train.py               source /usr/local/Ascend/ascend-toolkit/set_env.sh
                                       source /usr/local/Ascend/nnal/atb/set_env.sh
                                       python3 train.py

    Fix safety:
        Safe: an addition at the top; the paths are the default CANN install locations.
    """

    ID = "shell-ascend-setenv"
    SAFETY = "safe"
    GROUP = "extras"
    TRIGGERS = ("python", "torchrun", "ray", "vllm", "accelerate", "deepspeed")

    def check(self, script: Script) -> None:
        if not is_launcher(script):
            return
        sourced = [w.value or w.text for cmd in script.commands if cmd.program() in ("source", ".")
                   for w in cmd.args()]
        missing = [row["path"] for row in load_table(self.ctx.target, "shell")["ascend_setenv"]
                   if not any(s.endswith(row["marker"]) for s in sourced)]
        if missing:
            self.insert_lines(preamble_end(script), [f"source {p}" for p in missing],
                              "sourced the Ascend environment: " + ", ".join(missing))

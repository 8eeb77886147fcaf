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
        path (any install prefix counts). Not in launchers of VERL (`python -m verl...`): VERL's
        Ascend images and quick start activate the CANN environment outside the launcher, and 23 of
        its 24 NPU launchers do not source it.

    Why:
        The CANN toolkit and the ATB library are found through the variables these scripts set;
        a launcher run on a bare host needs both lines (verl's run_qwen3_4b_grpo_vllm_1k_npu.sh starts
        with them). Images
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
        table = load_table(self.ctx.target, "shell")
        if any((launch := python_launch(cmd)) and launch.is_module and launch.target.startswith(prefix)
               for cmd in script.commands for prefix in table.get("ascend_setenv_not_in", ())):
            return
        sourced = [w.value or w.text for cmd in script.commands if cmd.program() in ("source", ".")
                   for w in cmd.args()]
        missing = [row["path"] for row in table["ascend_setenv"]
                   if not any(s.endswith(row["marker"]) for s in sourced)]
        if missing:
            self.insert_lines(preamble_end(script), [f"source {p}" for p in missing],
                              "sourced the Ascend environment: " + ", ".join(missing))

"""shell-hccl-timeouts (extras): HCCL connect/exec timeouts in multi-node or timeout-tuned launchers."""

from __future__ import annotations

import re

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import Script, ShellRule, option_values, preamble_end, python_launch

_ONE = re.compile(r"1(:1)?")


def multi_node(script: Script) -> bool:
    """Ray nodes, `torchrun --nnodes N` (N not 1), `accelerate --num_machines N`, `trainer.nnodes=N`."""
    for cmd in script.commands:
        args = cmd.args()
        if cmd.program() == "ray" and args and args[0].value == "start":
            return True
        launch = python_launch(cmd)
        if launch is None:
            continue
        options = cmd.words[:cmd.words.index(launch.target_word)]
        for _, _word, vstart, vend in option_values(options, ["--nnodes", "--num_machines", "--num-machines"]):
            if not _ONE.fullmatch(script.text[vstart:vend]):
                return True
        for word in launch.args:
            m = re.fullmatch(r"\+{0,2}trainer\.nnodes=(.*)", word.value or word.text)
            if m and m.group(1) != "1":
                return True
    return False


class ShellHcclTimeouts(ShellRule):
    """Exports HCCL_CONNECT_TIMEOUT and HCCL_EXEC_TIMEOUT in multi-node launchers.

    What it does:
        When the script tunes NCCL timeouts (NCCL_TIMEOUT, NCCL_ASYNC_ERROR_HANDLING, ...) or starts a
        multi-node job (`ray start`, `torchrun --nnodes N`, `trainer.nnodes=N` with N other than 1),
        adds `export HCCL_CONNECT_TIMEOUT=...` and `export HCCL_EXEC_TIMEOUT=...` near the top for
        each one the script does not set yet. The values come from the target's shell table
        (1500 and 3600 seconds, as VERL's NPU launchers use).

    Why:
        HCCL's default timeouts are short for large-model initialisation and long steps across
        nodes; VERL and MindSpeed-RL raise them in their NPU launchers and runtime_env.

    Example:
        ray start --head --resources='{"NPU": 8}'
        ->  export HCCL_CONNECT_TIMEOUT=1500
            export HCCL_EXEC_TIMEOUT=3600
            ray start --head --resources='{"NPU": 8}'

    Fix safety:
        Safe: only longer timeouts; existing settings are never changed.
    """

    ID = "shell-hccl-timeouts"
    SAFETY = "safe"
    GROUP = "extras"
    # HCCL_ASYNC_ERROR_HANDLING: shell-env-vars, which runs first, renames NCCL_ASYNC_ERROR_HANDLING=0|1 to it.
    TRIGGERS = ("NCCL_", "HCCL_ASYNC_ERROR_HANDLING", "ray", "--nnodes", "nnodes=", "--num_machines", "--num-machines")

    def check(self, script: Script) -> None:
        table = load_table(self.ctx.target, "shell")
        assigned = script.assigned_names()
        if not (assigned & set(table["nccl_timeout_vars"]) or multi_node(script)):
            return
        missing = [row for row in table["hccl_timeouts"] if row["name"] not in assigned]
        if missing:
            self.insert_lines(preamble_end(script), [f"export {r['name']}={r['value']}" for r in missing],
                              "exported " + ", ".join(r["name"] for r in missing))

"""shell-vllm-spawn (extras): `export VLLM_WORKER_MULTIPROC_METHOD=spawn` in vLLM launchers."""

from __future__ import annotations

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import Script, ShellRule, preamble_end, python_launch


def runs_vllm(script: Script) -> bool:
    for cmd in script.commands:
        if cmd.program() == "vllm":
            return True
        launch = python_launch(cmd)
        if launch and launch.is_module and (launch.target == "vllm" or launch.target.startswith("vllm.")):
            return True
    return False


class ShellVllmSpawn(ShellRule):
    """Exports `VLLM_WORKER_MULTIPROC_METHOD=spawn` in scripts that start vLLM.

    What it does:
        When the script runs `vllm ...` or `python -m vllm...` and never sets
        VLLM_WORKER_MULTIPROC_METHOD, adds `export VLLM_WORKER_MULTIPROC_METHOD=spawn` near the top
        (after the shebang, comments, `set` lines and Ascend set_env.sh lines).

    Why:
        vllm-ascend's NPU examples set it: NPU runtimes cannot be used in forked workers once the
        parent has initialised them.

    Example:
        vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 4
        ->  export VLLM_WORKER_MULTIPROC_METHOD=spawn
            vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 4

    Fix safety:
        Safe: an added export that vLLM reads only for its worker start method.
    """

    ID = "shell-vllm-spawn"
    SAFETY = "safe"
    GROUP = "extras"
    TRIGGERS = ("vllm",)

    def check(self, script: Script) -> None:
        row = load_table(self.ctx.target, "shell")["vllm_spawn"]
        if not runs_vllm(script) or row["name"] in script.assigned_names():
            return
        self.insert_lines(preamble_end(script), [f"export {row['name']}={row['value']}"],
                          f"exported {row['name']}={row['value']} for vLLM on NPU")

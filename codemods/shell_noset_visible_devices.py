"""shell-noset-visible-devices (extras): keep Ray from overriding ASCEND_RT_VISIBLE_DEVICES."""

from __future__ import annotations

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import (
    Script,
    ShellRule,
    indentation,
    line_start,
    next_line_start,
    preamble_end,
    python_launch,
)

_VISIBLE = ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def uses_ray(script: Script) -> bool:
    for cmd in script.commands:
        if cmd.program() == "ray":
            return True
        launch = python_launch(cmd)
        if launch and launch.is_module and launch.target.split(".")[0] in ("verl", "ray"):
            return True
    return False


class ShellNosetVisibleDevices(ShellRule):
    """Exports `RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1` where a Ray/VERL launcher picks NPUs.

    What it does:
        When the script sets ASCEND_RT_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES, which shell-env-vars
        renames) and runs Ray or VERL (`ray ...`, `python -m verl...`), adds
        `export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1` right after the line that sets
        the devices (before it when the devices are set inline for one command), unless the script
        already sets it.

    Why:
        Ray rewrites ASCEND_RT_VISIBLE_DEVICES for every actor unless this variable is truthy
        (ray/_private/accelerators/npu.py), which undoes the launcher's device choice; VERL's NPU
        launchers export both together (run_qwen2-32b_sglang_fsdp_npu.sh).

    Example:
        export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3
        ->  export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3
            export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1

    Fix safety:
        Review: with it, Ray no longer isolates devices per actor; VERL and MindSpeed-RL manage
        devices themselves and expect that.
    """

    ID = "shell-noset-visible-devices"
    SAFETY = "review"
    GROUP = "extras"
    TRIGGERS = _VISIBLE

    def check(self, script: Script) -> None:
        noset = load_table(self.ctx.target, "shell")["noset_visible_devices"]
        if noset in script.assigned_names() or not uses_ray(script):
            return
        setter = None
        for cmd in script.commands:
            if cmd.context != "top":
                continue
            names = {w.text.split("=", 1)[0] for w in cmd.assignments + cmd.argv()[1]}
            if cmd.program() == "export":
                names |= {w.text.split("=", 1)[0] for w in cmd.args()}
            if names & set(_VISIBLE):
                setter = cmd
                break
        if setter is None:
            return
        text = script.text
        line = f"{indentation(text, setter.start)}export {noset}=1"
        standalone = not setter.words or setter.program() == "export"
        # After `export A=...`; before `A=... cmd`, whose assignment lasts for that one command.
        at = next_line_start(text, setter.end) if standalone else line_start(text, setter.start)
        if at < preamble_end(script):
            at = preamble_end(script)
        self.insert_lines(at, [line], f"exported {noset}=1 (the launcher chooses the NPUs, not Ray)")

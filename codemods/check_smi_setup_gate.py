"""`smi-setup-gate`: an npu-smi check that picks a script's CUDA set-up steps."""

from __future__ import annotations

from npu_port.codemods.shell_nvidia_smi import CUDA_SETUP, LOOKUPS
from npu_port.transpiler.text.shell import Script, ShellRule


class SmiSetupGate(ShellRule):
    """Reports an npu-smi presence check in a script that installs CUDA itself.

    What it does:
        In a shell script that installs CUDA (a cu1xx wheel index, the CUDA toolkit, an nvcc check,
        flash-attn's build: shell-nvidia-smi's reading) and never asks for nvidia-smi, a presence check of
        `npu-smi` (`command -v npu-smi`, `which npu-smi`, a bare `npu-smi info`) is reported (error). A
        script that checks for both tools picks each device's steps by its own and is not judged.

    Why:
        Such a check is what picked the CUDA steps when it asked for nvidia-smi. Renamed to npu-smi (convert
        leaves it and says why), it sends an Ascend host through the CUDA toolkit, the CUDA wheels and the
        flash-attn build, and a script under `set -e` stops there (RAGEN's setup_ragen.sh).

    Example:
        if command -v npu-smi &> /dev/null; then                     # error
            pip install torch==2.6.0 --index-url https://download.pytorch.org/whl/cu124
            pip install flash-attn --no-build-isolation

    Fix safety:
        Report-only: give the Ascend host its own branch (CANN, torch-npu) beside the CUDA one.
    """

    ID = "smi-setup-gate"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu-smi",)

    def check(self, script: Script) -> None:
        setup = CUDA_SETUP.search(self.ctx.text)
        if setup is None or "nvidia-smi" in self.ctx.text:
            return  # a script that checks for both picks each device's steps by its own tool
        line = self.ctx.text.count("\n", 0, setup.start()) + 1
        for cmd in script.commands:
            i, _ = cmd.argv()
            if i >= len(cmd.words):
                continue
            prog, args = cmd.program(), cmd.words[i + 1:]
            if prog == "npu-smi" and not cmd.output_consumed or prog in LOOKUPS and any(
                    a.value == "npu-smi" for a in args):
                self.report(cmd.words[i].start, f"this npu-smi check picks the script's CUDA set-up (line {line}: "
                                                f"{setup.group()}): an Ascend host is sent through those steps",
                            severity="error", hint="give the Ascend host a branch of its own (CANN, torch-npu) "
                                                   "beside the CUDA one")

"""shell-docker-devices (extras): `docker run --gpus ...` becomes the Ascend `--device` and `-v` options."""

from __future__ import annotations

import re
from typing import Optional

from npu_port.codemods._containers import CDI_PREFIX, device_nodes, mounts, visible_indices
from npu_port.transpiler.text.shell import Command, Script, ShellRule, Word, option_values

_ENGINES = ("docker", "podman", "nerdctl")
_DEVICE_LIST = re.compile(r"""^["']*device=([^"']*)["']*$""")


class ShellDockerDevices(ShellRule):
    """Rewrites `docker run --gpus` (and `--runtime nvidia`, CDI GPUs) into the Ascend devices and mounts.

    What it does:
        For `docker run` / `docker create` (and podman, nerdctl) written in the script itself (not
        inside `bash -c` or `ssh` strings), replaces the first of `--gpus VALUE`, `--runtime nvidia`
        and `--device nvidia.com/gpu=N` with `--device /dev/davinciN` per NPU, `--device
        /dev/davinci_manager`, `--device /dev/devmm_svm`, `--device /dev/hisi_hdc` and `-v` mounts of
        the driver, DCMI and `npu-smi` (codemods/data/<target>/containers.yaml), and removes the
        others; a device or mount the command has already is not added again. The NPUs come from
        `--gpus 2` (a count), `--gpus '"device=0,1"'` or the CDI index; with `--gpus all` only the
        shared devices are added and the option is reported. One option a line where the command is
        continued over lines (` \\`), else on the option's line.

    Why:
        `--gpus` and the NVIDIA runtime go through the NVIDIA container toolkit, which an Ascend host
        does not have; an Ascend container gets the device nodes and driver files themselves (the
        vllm-ascend quick start's `docker run`). It is an extra because it adds devices and host
        mounts; without it `shell-docker-gpus` reports the same lines.

    Example:
        docker run --gpus '"device=0"' -it img bash
            ->  docker run --device /dev/davinci0 --device /dev/davinci_manager --device /dev/devmm_svm
                --device /dev/hisi_hdc -v /usr/local/dcmi:/usr/local/dcmi ... -it img bash

    Fix safety:
        Review: which NPUs of the host a container should get, and whether the driver lives at the
        default path, are the host's.
    """

    ID = "shell-docker-devices"
    SAFETY = "review"
    GROUP = "extras"
    TRIGGERS = ("--gpus", "nvidia")

    def check(self, script: Script) -> None:
        for cmd in script.commands:
            args = cmd.args()
            if cmd.program() in _ENGINES and cmd.quote is None and cmd.context == "top" and args \
                    and args[0].value in ("run", "create"):
                self._command(script, cmd, args)

    def _command(self, script: Script, cmd: Command, args: list[Word]) -> None:
        text = script.text
        # (option start, value end, NPU indices or None, what) of each NVIDIA option
        gpu_options: list[tuple[int, int, Optional[list[int]], str]] = []
        for opt, _, vstart, vend in option_values(args, ["--gpus"]):
            value = text[vstart:vend]
            gpu_options.append((opt.start, vend, _gpus_indices(value.strip("'\"") if "device=" not in value
                                                                  else value), f"--gpus {value}"))
        for opt, _, vstart, vend in option_values(args, ["--runtime"]):
            if text[vstart:vend].strip("'\"") == "nvidia":
                gpu_options.append((opt.start, vend, None, "--runtime nvidia"))
        present: set[str] = set()
        for opt, _, vstart, vend in option_values(args, ["--device", "-v", "--volume"]):
            value = text[vstart:vend].strip("'\"")
            if value.startswith(CDI_PREFIX):
                which = value[len(CDI_PREFIX):]
                gpu_options.append((opt.start, vend, [int(which)] if which.isdigit() else None, f"--device {value}"))
            else:
                present.add(value.split(":", 2)[0] if opt.value == "--device" else value)
        if not gpu_options:
            return
        gpu_options.sort()
        requests = [o for o in gpu_options if not o[3].startswith("--runtime")]
        known = [o[2] for o in requests]
        indices = sorted({i for k in known for i in k or ()}) if requests and all(k is not None for k in known) \
            else None
        devices = [d for d in device_nodes(self.ctx.target, indices) if d not in present]
        volumes = [m for m in mounts(self.ctx.target) if not _mounted(m, present)]
        options = [f"--device {d}" for d in devices] + [f"-v {m}" for m in volumes]
        first_start, first_end, _, first_what = gpu_options[0]
        new = _layout(text, first_start, first_end, options)
        summary = f"{first_what} -> {len(devices)} --device and {len(volumes)} -v options for the Ascend NPUs"
        if not self.change(first_start, first_end, new, summary):
            return
        for start, end, _, what in gpu_options[1:]:
            gap = start
            while gap > 0 and text[gap - 1] in " \t":
                gap -= 1
            self.change(gap, end, "", f"removed {what}")
        if indices is None:
            what = next((o[3] for o in requests), first_what)
            self.report(first_start, f"{what}: which NPUs the container gets is not known; add a --device "
                        "/dev/davinciN per NPU", hint="the NPUs of the host are /dev/davinci0, /dev/davinci1, ... "
                        "(`ls /dev/davinci[0-9]*`)")


def _gpus_indices(value: str) -> Optional[list[int]]:
    """`2` -> [0, 1]; `"device=0,2"` -> [0, 2]; `all`, GPU UUIDs -> None."""
    if value.isdigit() and int(value) > 0:
        return list(range(int(value)))
    m = _DEVICE_LIST.match(value)
    return visible_indices(m.group(1)) if m else None


def _mounted(mount: str, present: set[str]) -> bool:
    """A `-v` of the same container path, or of a folder above it, covers the mount."""
    target = mount.split(":")[1].rstrip("/")
    for value in present:
        parts = value.split(":")
        have = (parts[1] if len(parts) > 1 else parts[0]).rstrip("/")
        if have and (target == have or target.startswith(have + "/")):
            return True
    return False


def _layout(text: str, start: int, end: int, options: list[str]) -> str:
    """The options on one line, or one a line when the command is continued after this option."""
    rest = text[end:text.find("\n", end) if "\n" in text[end:] else len(text)]
    if rest.rstrip().endswith("\\"):
        line_start = text.rfind("\n", 0, start) + 1
        lead = text[line_start:start]
        indent = lead if not lead.strip() else " " * (len(lead) - len(lead.lstrip()) + 4)
        return (" \\\n" + indent).join(options)
    return " ".join(options)

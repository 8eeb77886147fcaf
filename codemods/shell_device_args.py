"""shell-device-args: `--device cuda` / `--dist-backend nccl` passed to the user's own Python scripts."""

from __future__ import annotations

import re

from npu_port.transpiler.analysis.positions import PositionPolicy
from npu_port.transpiler.core.rules import CUDA_WORD
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import (
    Script,
    ShellRule,
    option_value,
    option_values,
    probed_value,
    python_launch,
    token_span,
)

_CUDA_DEVICE = re.compile(r"cuda(:\d+)?")
_ARRAY_EXPANSION = re.compile(r"\$\{(\w+)\[[@*]\]\}")


class ShellDeviceArgs(ShellRule):
    """Rewrites device and backend arguments given to the user's own Python scripts.

    What it does:
        For `python x.py ...`, `python -m mypkg.train ...`, `torchrun [opts] x.py ...`,
        `accelerate launch [opts] x.py ...` and `deepspeed [opts] x.py ...` (also behind wrappers: `srun
        [opts]`, `apptainer exec [opts] IMAGE`, `nohup`, `env A=1`, `numactl`, ...), the script's arguments
        `--device cuda`, `--device=cuda:0` (also `--device_type`) become `npu` / `npu:0`, and
        `--dist-backend nccl`, `--backend=nccl` (and the `_` spellings, `--ddp-backend`) become `hccl`;
        so does every other `*_backend` / `*_device` flag (the suffixes the Python rules follow into
        argparse defaults: `--vllm.sync_backend nccl`, `--ref_device cuda`), since the script's own
        default is converted too. The items of an array expanded into such a launch
        (`ARGS=(--dist-backend nccl)` ... `torchrun train.py "${ARGS[@]}"`) are its arguments as well, and
        are edited where the array is written.
        Modules of frameworks (`python -m vllm...`, `verl`, `sglang`, `ray`, ...) and `vllm serve` are
        not the user's script: their flags keep their names and values (`--gpu-memory-utilization`
        stays on vllm-ascend). `vllm serve --device ...` is reported: vLLM 0.10 removed that flag.

    Why:
        Those values flow into `torch.device(...)` and `init_process_group(backend=...)`, which on
        Ascend take "npu" and "hccl"; the launcher's copy would override the converted Python
        defaults.

    Example:
        torchrun --nproc_per_node=8 train.py --device cuda --dist-backend nccl
        ->  torchrun --nproc_per_node=8 train.py --device npu --dist-backend hccl

    With --keep-cuda:
        torchrun --nproc_per_node=8 train.py --device cuda --dist-backend nccl
        ->  export DEVICE=$(command -v npu-smi >/dev/null 2>&1 && echo npu || echo cuda)  (once, near the top)
            DIST_BACKEND=$([ "$DEVICE" = npu ] && echo hccl || echo nccl)
            torchrun --nproc_per_node=8 train.py --device "$DEVICE" --dist-backend "$DIST_BACKEND"
        (the values read the launcher's device probe; in a command another shell runs, `bash -c '...'`
        or a here-document, they are kept for CUDA, with a warning)

    Fix safety:
        Review: the option names are conventions, checked only by their value (`cuda...` / `nccl`).
    """

    ID = "shell-device-args"
    SAFETY = "review"
    TRIGGERS = ("nccl",)
    TRIGGER_PATTERNS = (CUDA_WORD,)

    def check(self, script: Script) -> None:
        table = load_table(self.ctx.target, "shell")
        frameworks = tuple(table["framework_modules"])
        positions = load_table(self.ctx.target, "positions")
        policies = (PositionPolicy.from_data(positions["device"]), PositionPolicy.from_data(positions["backend"]))
        # Arrays of arguments (`ARGS=(--backend nccl)` ... `python t.py "${ARGS[@]}"`): their items are
        # the launch's arguments too, edited where the array is written.
        arrays = {w.text.split("=", 1)[0].rstrip("+"): (w.array_items, cmd)
                  for cmd in script.commands for w in cmd.assignments if w.array_items}
        done: set[str] = set()
        for cmd in script.commands:
            self._removed_vllm_device(cmd)
            launch = python_launch(cmd)
            if launch is None:
                continue
            if launch.is_module and (launch.target in frameworks or launch.target.startswith(
                    tuple(m + "." for m in frameworks))):
                continue
            self._convert_args(script, cmd, launch.args, table, policies)
            for word in launch.args:
                for name in _ARRAY_EXPANSION.findall(word.text):
                    if name in arrays and name not in done:
                        done.add(name)
                        items, where = arrays[name]
                        self._convert_args(script, where, items, table, policies)

    def _convert_args(self, script, cmd, args, table, policies) -> None:
        device_options, backend_options = self._options(args, table, policies)
        for opt, value_word, vstart, vend in option_values(args, device_options):
            value = option_value(opt, value_word)
            if value and _CUDA_DEVICE.fullmatch(value):
                self._swap(script, cmd, vstart, vend, "cuda", "npu", opt, value_word or opt)
        for opt, value_word, vstart, vend in option_values(args, backend_options):
            value = option_value(opt, value_word)
            if value == "nccl":
                self._swap(script, cmd, vstart, vend, "nccl", "hccl", opt, value_word or opt)

    @staticmethod
    def _options(args, table, policies) -> tuple[list[str], list[str]]:
        """The table's option names plus those among `args` that name a device / backend setting."""
        device, backend = list(table["device_options"]), list(table["backend_options"])
        for policy, names in zip(policies, (device, backend)):
            for word in args:
                flag = (word.value or word.text).partition("=")[0]
                name = flag.rsplit(".", 1)[-1].lstrip("-").replace("-", "_").lower()
                # Only the `*_backend` / `*_device` family: `--device-name` / `--backend-name` of other
                # tools (a benchmark's label) stay, as they always have.
                if flag.startswith("--") and flag not in names and any(
                        s.startswith("_") and name.endswith(s) for s in policy.settings):
                    names.append(flag)
        return device, backend

    def _removed_vllm_device(self, cmd) -> None:
        """`vllm serve ... --device cuda`: vLLM 0.10 removed the flag; report it (the value is not ours)."""
        at, _ = cmd.argv()
        words = [w.value or w.text for w in cmd.words[at:at + 2]]
        if words[:2] != ["vllm", "serve"]:
            return
        for opt, _, _, _ in option_values(cmd.words[at + 2:], ("--device",)):
            self.report(opt.start, "vllm serve --device was removed in vLLM 0.10; it fails on current releases",
                        severity="error", hint="delete it: the vllm-ascend platform plugin selects the NPU")

    def _swap(self, script, cmd, vstart, vend, old, new, opt, word) -> None:
        span = token_span(script, vstart, vend, old)
        if span:
            name = (opt.value or opt.text).partition("=")[0]
            probe = "DEVICE" if old == "cuda" else "DIST_BACKEND"
            self.change(*span, new, f"{name} {old} -> {new}", quote=cmd.quote, scope=(cmd.start, cmd.end),
                        portable=lambda: probed_value(self, cmd, word, span[0], probe))

"""shell-nvidia-smi: nvidia-smi presence checks -> npu-smi; parsing its output is reported."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Optional

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import TEXT_COMMANDS, Command, Script, ShellRule, in_probe_line, probe_reference

LOOKUPS = ("command", "which", "type", "hash")
# A script that installs CUDA itself (a CUDA wheel index, the CUDA toolkit, a CUDA compiler check, flash-attn's
# build): its nvidia-smi check is what picks those steps, so it is part of that decision.
CUDA_SETUP = re.compile(r"/whl/cu\d{2,3}\b|\bcuda-toolkit\b|\bcudatoolkit\b|\bnvcc\b|\bflash[-_]attn\b")


class ShellNvidiaSmi(ShellRule):
    """Turns `nvidia-smi` presence checks into `npu-smi info`; reports code that parses its output.

    What it does:
        A bare `nvidia-smi` (no arguments, output not piped or captured; redirections to /dev/null
        are fine) becomes `npu-smi info`, and `command -v nvidia-smi` / `which nvidia-smi` /
        `type nvidia-smi` look for `npu-smi`, unless the `if` it tests goes on to use nvidia-smi in a way that stays
        (a path such as /usr/bin/nvidia-smi, a name kept in a variable, parsed output): the lookup finds
        the tool that use runs, so both stay, reported. Every other use (`--query-gpu`, `-L`, a pipe into
        grep/wc/awk, `$(nvidia-smi ...)`, `watch nvidia-smi`) is reported.

    Why:
        Ascend machines have `npu-smi` instead of `nvidia-smi`; `npu-smi info` is its status view.
        Its output has another format, so code that parses nvidia-smi output has to be rewritten by
        hand.

    Example:
        if nvidia-smi > /dev/null 2>&1; then   ->  if npu-smi info > /dev/null 2>&1; then
        N=$(nvidia-smi -L | wc -l)             ->  (reported)

    With --keep-cuda:
        if ! command -v nvidia-smi >/dev/null; then  ->  if ! command -v "$SMI" >/dev/null; then
        nvidia-smi                                   ->  device_smi
        (after the launcher's device probe, added once near the top:
            export DEVICE=$(command -v npu-smi >/dev/null 2>&1 && echo npu || echo cuda)
            SMI=$([ "$DEVICE" = npu ] && echo npu-smi || echo nvidia-smi)
            device_smi() { if [ "$DEVICE" = npu ]; then npu-smi info; else nvidia-smi; fi; }
        each only where the script uses it. Output that is parsed stays reported, as without --keep-cuda.)

    Fix safety:
        Safe for presence checks; parsing is only reported. In a script that installs CUDA itself (a CUDA
        wheel index, the CUDA toolkit, an nvcc check, flash-attn's build) a presence check is what picks
        those steps: it is left and reported, since renamed it would send an Ascend host through them.
    """

    ID = "shell-nvidia-smi"
    SAFETY = "safe"
    TRIGGERS = ("nvidia-smi",)

    def check(self, script: Script) -> None:
        table = load_table(self.ctx.target, "shell")["nvidia_smi"]
        replacement = table["replacement"]
        tool = replacement.split()[0]
        setup = CUDA_SETUP.search(self.ctx.text)
        setup_line = self.ctx.text.count("\n", 0, setup.start()) + 1 if setup else 0
        kept = self._kept_uses(script)
        for cmd in script.commands:
            i, _ = cmd.argv()
            if i >= len(cmd.words):
                continue
            prog = cmd.program()
            word = cmd.words[i]
            args = cmd.words[i + 1:]
            scope = (cmd.start, cmd.end)
            if in_probe_line(script, word.start):
                continue  # the GPU branch of the launcher's --keep-cuda probe
            if setup and (prog == "nvidia-smi" or prog in LOOKUPS and any(a.value == "nvidia-smi" for a in args)):
                self.report(word.start, "this nvidia-smi check picks the script's CUDA set-up (line "
                            f"{setup_line}: {setup.group()}); renamed to {tool}, an Ascend host would run those steps: "
                            "left as is", hint="give the Ascend host a branch of its own (CANN, torch-npu) beside the "
                            "CUDA one")
            elif prog == "nvidia-smi":
                if not args and not cmd.output_consumed:
                    self.change(word.start, word.end, replacement, f"nvidia-smi -> {replacement}",
                                quote=cmd.quote, scope=scope, portable=self._probed(cmd, "device_smi"))
                else:
                    self.report(word.start, "nvidia-smi output is parsed here; npu-smi has no compatible "
                                "output", hint=table["hint"])
            elif prog in LOOKUPS:
                for arg in args:
                    linked = self._linked_use(arg.start, kept) if arg.value == "nvidia-smi" and kept else None
                    if linked is not None:
                        self.report(arg.start, f"this looks for nvidia-smi, which line {linked} still uses as written (a "
                                    "path, a variable or parsed output): renamed alone, the check would gate that use "
                                    f"on {tool}; left as is", hint=table["hint"])
                    elif arg.value == "nvidia-smi":
                        self.change(arg.start, arg.end, tool, f"{prog} nvidia-smi -> {prog} {tool}",
                                    quote=cmd.quote, scope=scope, portable=self._probed(cmd, "SMI", quoted=True))
            elif prog not in TEXT_COMMANDS:
                for arg in args:
                    if arg.value == "nvidia-smi":
                        self.report(arg.start, f"{prog} runs nvidia-smi; Ascend has npu-smi ({replacement})",
                                    hint=table["hint"])

    def _kept_uses(self, script: Script) -> list[int]:
        """The lines of the uses of nvidia-smi that stay as written (a path such as /usr/bin/nvidia-smi, a
        name kept in a variable, `nvidia-smi -L` and other parsed output)."""
        found = []
        for cmd in script.commands:
            i, _ = cmd.argv()
            prog = cmd.program() if i < len(cmd.words) else None
            if prog in TEXT_COMMANDS or prog in LOOKUPS or in_probe_line(script, cmd.start):
                continue
            for n, word in enumerate(cmd.words):
                bare = n == i and prog == "nvidia-smi" and len(cmd.words) == i + 1 and not cmd.output_consumed
                if "nvidia-smi" in self.ctx.text[word.start:word.end] and not bare:
                    found.append(self.ctx.text.count("\n", 0, word.start) + 1)
        return found

    def _linked_use(self, at: int, kept: list[int]) -> Optional[int]:
        """A kept use that the lookup at offset `at` decides: on its own line, or inside the `if` / `elif`
        statement whose test it is (up to its `fi`). A lookup and such a use are one decision: the lookup
        finds the tool that use runs."""
        lines = self.ctx.text.splitlines()
        first = self.ctx.text.count("\n", 0, at) + 1
        line = lines[first - 1]
        last = first
        if re.match(r"\s*(?:el)?if\b", line):
            indent = len(line) - len(line.lstrip())
            last = next((k for k in range(first + 1, len(lines) + 1) if re.match(r"\s*fi\b", lines[k - 1])
                         and len(lines[k - 1]) - len(lines[k - 1].lstrip()) <= indent), len(lines))
        return next((k for k in kept if first <= k <= last), None)

    def _probed(self, cmd: Command, name: str, *, quoted: bool = False) -> Callable[[], Optional[str]]:
        def form() -> Optional[str]:
            ref = probe_reference(self, cmd, name)
            return f'"{ref}"' if ref is not None and quoted else ref
        return form

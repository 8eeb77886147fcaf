"""shell-ray-start: `ray start --num-gpus N` -> `--resources='{"NPU": N}'`."""

from __future__ import annotations

import json
import re
from typing import Optional, cast

from npu_port.transpiler.text.shell import (
    Command,
    Script,
    ShellRule,
    Word,
    option_value,
    option_values,
    probe_reference,
)

_NUMBER = re.compile(r"\d+(\.\d+)?")
_SIMPLE_EXPANSION = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*|\{[^{}'\"\\`]*\})")


class ShellRayStart(ShellRule):
    """Replaces `ray start --num-gpus` with the NPU custom resource.

    What it does:
        `ray start ... --num-gpus=8` / `--num-gpus 8` becomes `--resources='{"NPU": 8}'`. When the
        count is a shell expansion (`--num-gpus $N`, `"${NGPUS}"`) it becomes
        `--resources="{\\"NPU\\": $N}"` so that it still expands. An existing literal `--resources`
        JSON gets an `"NPU"` key merged in (an existing `"NPU"` key wins and `--num-gpus` is just
        dropped); a `--resources` the rule cannot read is reported instead.

    Why:
        `--num-gpus` declares the "GPU" resource, which no NPU task asks for: Ray schedules NPU work on
        `resources={"NPU": n}` (ray/_private/accelerators/npu.py; MindSpeed-RL's multi-node examples
        start Ray with `--resources='{"NPU": 16}'`).

    Example:
        ray start --head --port=6379 --num-gpus=8
        ->  ray start --head --port=6379 --resources='{"NPU": 8}'

    With --keep-cuda:
        ray start --head --port=6379 --num-gpus=8
        ->  export DEVICE=$(command -v npu-smi >/dev/null 2>&1 && echo npu || echo cuda)  (once, near the top)
            ray start --head --port=6379 "$([ "$DEVICE" = npu ] && echo '--resources={"NPU": 8}' || echo --num-gpus=8)"
        (the launcher's device probe picks the option; kept for CUDA, with a warning: a `--num-gpus` to
        merge into a `--resources` already there, and a `ray start` that another shell runs)

    Fix safety:
        Safe for literal counts and plain expansions; anything else is reported.
    """

    ID = "shell-ray-start"
    SAFETY = "safe"
    TRIGGERS = ("--num-gpus",)

    def check(self, script: Script) -> None:
        for cmd in script.commands:
            args = cmd.args()
            if cmd.program() != "ray" or not args or args[0].value != "start":
                continue
            gpus = option_values(args, ["--num-gpus"])
            if not gpus:
                continue
            self._convert(script, cmd, args, *gpus[-1])

    def _convert(self, script: Script, cmd: Command, args: list[Word], opt: Word, value_word: Optional[Word],
                 vstart: int, vend: int) -> None:
        raw = script.text[vstart:vend]
        literal = option_value(opt, value_word) or ""
        if _NUMBER.fullmatch(literal):
            count, expansion = literal, None
        else:
            inner = raw[1:-1] if len(raw) > 1 and raw[0] == raw[-1] == '"' else raw
            if not _SIMPLE_EXPANSION.fullmatch(inner):
                self.report(opt.start, f"ray start --num-gpus {raw}: cannot tell the count; use "
                            "--resources='{\"NPU\": N}' by hand")
                return
            count, expansion = None, inner
        k = args.index(opt)
        last = value_word or opt
        prev_end = args[k - 1].end
        existing = option_values(args, ["--resources"])
        if existing:
            self._merge(script, cmd, existing[-1], count, expansion, (prev_end, last.end))
            return
        if expansion and '"' in (cmd.quote or ""):
            self.report(opt.start, "ray start --num-gpus with an expansion inside a double-quoted bash -c string: "
                        "convert it to --resources by hand")
            return
        new = _resources({}, count, expansion, cmd.quote)
        self.change(opt.start, last.end, new, f"ray start --num-gpus {raw} -> {new}", quote=cmd.quote,
                    scope=(cmd.start, cmd.end), portable=lambda: self._either(cmd, count, expansion))

    def _either(self, cmd: Command, count: Optional[str], expansion: Optional[str]) -> Optional[str]:
        """--keep-cuda: one word that is `--resources={"NPU": N}` where the launcher's probe found the NPU,
        else `--num-gpus=N` (a quoted substitution is one word, spaces and all)."""
        device = probe_reference(self, cmd)
        if device is None:
            return None
        if expansion is None:
            assert count is not None
            npu, gpu = "'--resources={\"NPU\": " + json.dumps(json.loads(count)) + "}'", f"--num-gpus={count}"
        else:
            npu, gpu = '"--resources={\\"NPU\\": ' + expansion + '}"', f'"--num-gpus={expansion}"'
        return f'"$([ "{device}" = npu ] && echo {npu} || echo {gpu})"'

    def _merge(self, script: Script, cmd: Command, existing, count, expansion, drop: tuple[int, int]) -> None:
        opt, value_word, vstart, vend = existing
        literal = option_value(opt, value_word)
        try:
            current = json.loads(literal) if literal is not None else None
        except ValueError:
            current = None
        if not isinstance(current, dict):
            self.report(opt.start, "ray start has both --num-gpus and a --resources value that is not literal "
                        "JSON: add \"NPU\" to --resources by hand")
            return
        if "NPU" in current:
            self.change(drop[0], drop[1], "", "ray start: dropped --num-gpus (--resources already has \"NPU\")",
                        scope=(cmd.start, cmd.end))
            return
        if expansion and '"' in (cmd.quote or ""):
            self.report(opt.start, "ray start --num-gpus with an expansion inside a double-quoted bash -c string: "
                        "add it to --resources by hand")
            return
        new = _resources(current, count, expansion, cmd.quote)
        # The --num-gpus words go, the --resources words are rewritten: two edits of one command.
        if self.change(opt.start, (value_word or opt).end, new, f"ray start: merged --num-gpus into {new}",
                       quote=cmd.quote, scope=(cmd.start, cmd.end)):
            self.change(drop[0], drop[1], "", "ray start: dropped --num-gpus", scope=(cmd.start, cmd.end))


def _resources(current: dict, count: Optional[str], expansion: Optional[str], quote: Optional[str]) -> str:
    """The --resources word. Literal JSON goes in single quotes, unless the command sits in a single-quoted
    `bash -c` string; an expansion needs double quotes so the shell still expands it."""
    items = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in current.items()]
    npu = expansion if expansion is not None else json.dumps(json.loads(cast(str, count)))  # a count without one
    body = "{" + ", ".join(items + [f'"NPU": {npu}']) + "}"
    if expansion is None and not (quote or "").endswith("'"):
        return f"--resources='{body}'"
    return '--resources="' + body.replace('"', '\\"') + '"'

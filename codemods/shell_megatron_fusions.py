"""shell-megatron-fusions: Megatron settings whose CUDA kernels MindSpeed does not run as written, in launchers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Optional, cast

from npu_port.transpiler.core.report import Severity
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import Script, ShellRule, Word


@dataclass(frozen=True)
class FlagRow:
    option: str
    key: Optional[str]
    value: Optional[str]
    unless: Optional[str]
    severity: Severity
    what: str
    setting: str

    @property
    def field(self) -> str:
        """The setting's name in Python and in parsers built from dataclasses: `key`, or the option's."""
        return self.key or self.option.lstrip("-").replace("-", "_")

    def pattern(self) -> re.Pattern[str]:
        """The flag as a token of a word (a launcher's `GPT_ARGS="..."` holds many), with its value when the
        row names one, also as `--field_name` (LLaMA-Factory's HfArgumentParser); VERL's
        `override_transformer_config.KEY=<true>`; or `field=<value>` (LLaMA-Factory's overrides after its
        config file)."""
        value = rf"(?:=|\s+)['\"]?{re.escape(self.value)}\b" if self.value else ""
        options = {re.escape(self.option), re.escape("--" + self.field)}
        forms = [rf"(?<![\w-])(?:{'|'.join(sorted(options))}){value}(?![\w-])"]
        truth = re.escape(self.value) if self.value else "(?:True|true|1)"
        if self.key:
            forms.append(rf"override_transformer_config\.{re.escape(self.key)}=['\"]?(?:True|true|1)\b")
        forms.append(rf"(?<![\w.$-]){re.escape(self.field)}=['\"]?{truth}\b")
        return re.compile("|".join(forms))


@cache
def rows(target: str) -> tuple[FlagRow, ...]:
    return tuple(FlagRow(r["option"], r.get("key"), r.get("value"), r.get("unless"), cast(Severity, r["severity"]),
                         r["what"], " ".join(r["setting"].split()))
                 for r in load_table(target, "megatron_flags")["rows"])


def _words(script: Script) -> Iterator[Word]:
    for cmd in script.commands:
        yield from cmd.assignments
        yield from cmd.words


class ShellMegatronFusions(ShellRule):
    """Reports Megatron fusion settings that MindSpeed replaces or drops, with the MindSpeed setting to use.

    What it does:
        In shell launchers, a Megatron flag of the table codemods/data/ascend/megatron_flags.yaml, as a
        command argument or inside a variable that holds the arguments (`GPT_ARGS="... --tp-comm-overlap"`),
        or the same setting as VERL's `...megatron.override_transformer_config.KEY=True` override, or
        under the field's name as LLaMA-Factory's Megatron runs take it (`--apply_rope_fusion`, and
        `apply_rope_fusion=true` after its config file), is reported once per line with what MindSpeed does instead: `--tp-comm-overlap` (Transformer
        Engine's userbuffers; MindSpeed turns it off: `--use-ascend-mc2` / `--use-ascend-coc`),
        `--apply-rope-fusion` (Apex's / TE's fused RoPE; MindSpeed's is `--use-fused-rotary-pos-emb`, info)
        and `--transformer-impl transformer_engine` in a script without `--use-flash-attn` (MindSpeed's
        TE path needs it). Fusions MindSpeed runs with its own kernels (`--use-flash-attn`,
        `--gradient-accumulation-fusion`, `--masked-softmax-fusion`, ...) are listed in the table as
        supported and not reported. Comments are not read.

    Why:
        On Ascend, Megatron runs under MindSpeed, which patches Megatron's CUDA paths with NPU kernels
        where it has them; where it has none the flag is dropped or fails, and the NPU feature has its
        own flag and preconditions (MindSpeed's docs/zh/features), so no rename is safe.

    Example:
        GPT_ARGS="--tensor-model-parallel-size 8 --sequence-parallel --tp-comm-overlap"
        ->  unchanged; warning: MindSpeed turns tp_comm_overlap off; use --use-ascend-mc2 ...

    Fix safety:
        Report-only: nothing is rewritten.
    """

    ID = "shell-megatron-fusions"
    SAFETY = "report-only"
    TRIGGERS = ("rope-fusion", "rope_fusion", "tp-comm-overlap", "tp_comm_overlap", "transformer_engine")

    def check(self, script: Script) -> None:
        text = script.text
        words = list(_words(script))
        every_word = " ".join(w.text for w in words)
        reported: set[tuple[str, int]] = set()
        for row in rows(self.ctx.target):
            # `unless` is read across the whole script: a launcher builds its arguments in several variables.
            unless = row.unless.lstrip("-").replace("-", "_") if row.unless else ""
            if row.unless and re.search(rf"(?<![\w-])(?:{re.escape(row.unless)}|--{unless}|{unless}=(?:True|true|1)\b)"
                                        r"(?![\w-])", every_word):
                continue
            pattern = row.pattern()
            for i, word in enumerate(words):
                # A flag and its value are two words of a command (`--transformer-impl transformer_engine`).
                joined = word.text if not row.value or i + 1 >= len(words) else f"{word.text} {words[i + 1].text}"
                match = pattern.search(joined)
                if match is None or match.start() >= len(word.text):
                    continue
                found = text.find(match.group(0).split()[0], word.start, word.end)
                at = found if found >= 0 else word.start
                line = text.count("\n", 0, at)
                if (row.option, line) in reported:
                    continue
                reported.add((row.option, line))
                self.report(at, f"{match.group(0).split()[0]}: {row.what}", severity=row.severity, hint=row.setting)

"""shell-bitsandbytes-npu: the bitsandbytes settings trl and LLaMA-Factory launchers pass on the command line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from npu_port.codemods.bitsandbytes_npu import table
from npu_port.transpiler.text.shell import Command, Script, ShellRule, Word, python_launch, token_span

# transformers' / trl's string_to_bool, which their argument parsers apply to a bool option's value.
_TRUE = ("yes", "true", "t", "y", "1")
_FALSE = ("no", "false", "f", "n", "0")
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class Setting:
    """One setting on the command line: `--name [VALUE]`, `--name=VALUE` or LLaMA-Factory's `name=VALUE`."""

    word: Word  # the word that names it
    value: Optional[str]  # its value text; None for a bare `--flag` (a bool that is then true)
    value_span: Optional[tuple[int, int]]  # where the value is in the file; None for a bare flag
    spelled: str  # as written, without the value: `--use-bnb-nested-quant`, `double_quantization`
    literal: bool = True  # False where the value is an expansion the script computes (`--x $X`)
    sep: str = " "  # how the command joins name and value: " " (`--name VALUE`) or "=" (`name=VALUE`)

    def shown(self, value: Optional[str] = None) -> str:
        """The setting as the command writes it, with its value or `value`."""
        value = self.value if value is None else value
        return self.spelled if value is None else f"{self.spelled}{self.sep}{value}"

    @property
    def end(self) -> int:
        """Where the setting ends in the file (after its value)."""
        return self.value_span[1] if self.value_span else self.word.end

    def flag(self) -> Optional[bool]:
        """The bool it sets; None where the value is not one (an expansion, a typo)."""
        if not self.literal:
            return None
        if self.value is None:
            return True
        low = self.value.lower()
        return True if low in _TRUE else False if low in _FALSE else None


def _settings(script: Script, args: list[Word], names: set[str], key_value: bool) -> dict[str, Setting]:
    """The last setting of each of `names` among `args` (argparse and OmegaConf keep the last one):
    `--name VALUE` / `--name=VALUE` / `--name-with-dashes` / `--no_name` (false), or, after a LLaMA-Factory
    config file, `name=VALUE`."""
    found: dict[str, Setting] = {}
    for k, word in enumerate(args):
        text = word.value
        if text is None:
            continue  # an expansion: its name and value are the script's to compute
        if key_value:
            name, eq, value = text.partition("=")
            if eq and name in names:
                found[name] = Setting(word, value, token_span(script, word.start, word.end, value) if value else None,
                                      name, sep="=")
            continue
        if not text.startswith("--"):
            continue
        name, eq, value = text[2:].partition("=")
        canonical = name.replace("-", "_")
        if canonical.startswith("no_") and canonical[3:] in names and not eq:
            found[canonical[3:]] = Setting(word, "false", None, "--" + name)
            continue
        if canonical not in names:
            continue
        if eq:
            found[canonical] = Setting(word, value, token_span(script, word.start, word.end, value) if value else None,
                                       "--" + name, sep="=")
        elif k + 1 < len(args) and not (args[k + 1].value or args[k + 1].text).startswith("-"):
            nxt = args[k + 1]
            if nxt.value is None:
                found[canonical] = Setting(word, nxt.text, None, "--" + name, literal=False)
            else:
                found[canonical] = Setting(word, nxt.value, token_span(script, nxt.start, nxt.end, nxt.value)
                                           or (nxt.start, nxt.end), "--" + name)
        else:
            found[canonical] = Setting(word, None, None, "--" + name)
    return found


def _is_module(target: str, modules: list[str]) -> bool:
    return any(target == m or target.startswith(m + ".") for m in modules)


def _entry(cmd: Command, rows: dict[str, Any]) -> Optional[tuple[str, list[Word]]]:
    """("trl" | "llamafactory", the arguments its parser reads) where `cmd` runs one of them, else None."""
    i, _ = cmd.argv()
    if i >= len(cmd.words):
        return None
    program, args = cmd.program(), cmd.words[i + 1:]
    trl, lmf = rows["trl"], rows["llamafactory"]
    if program in trl["programs"]:
        return "trl", args
    if program in lmf["programs"]:
        return "llamafactory", args[1:]  # after the subcommand (`train`)
    launch = python_launch(cmd)
    if launch is None:
        return None
    target = launch.target
    if launch.is_module:
        if _is_module(target, trl["modules"]):
            return "trl", launch.args
        if _is_module(target, lmf["modules"]):
            return "llamafactory", launch.args[1:]  # after the subcommand, as for llamafactory-cli
        return None
    path = "/" + target.lstrip("./")
    if path.endswith(".py") and any("/" + d in path and "/" not in path.split("/" + d, 1)[1] for d in trl["script_dirs"]):
        return "trl", launch.args
    if any(path.endswith("/" + s) for s in lmf["scripts"]):
        return "llamafactory", launch.args
    return None


class ShellBitsAndBytesNpu(ShellRule):
    """Turns off double quantisation where a trl or LLaMA-Factory launcher asks for it on the command line,
    and reports the other bitsandbytes settings the NPU backend lacks.

    What it does:
        For commands that run trl (the `trl` console script, `trl.scripts.*` as a module, a
        `trl/scripts/*.py` or `examples/scripts/*.py` file under python, torchrun, accelerate launch or
        deepspeed) or LLaMA-Factory (`llamafactory-cli` / `lmf`, `python -m llamafactory.cli`, `src/train.py`,
        `llamafactory/launcher.py`), the same settings and decisions as bitsandbytes-npu-yaml, read from
        the command's own words (`--name VALUE`, `--name=VALUE`, `--name-with-dashes`, a bare bool flag;
        after a LLaMA-Factory config file, its `name=VALUE` overrides):
        - trl, with `--load_in_4bit`: `--use_bnb_nested_quant` (true) becomes false;
          `--bnb_4bit_quant_type fp4` is reported; `--load_in_8bit` is reported;
        - LLaMA-Factory, with `quantization_bit` 4 and bitsandbytes as the method (`quantization_method`
          bnb or absent): `double_quantization` true becomes false, and where it is absent (LLaMA-Factory's
          default is true) `double_quantization=false` / `--double_quantization false` is added after
          `quantization_bit`; `quantization_type fp4` is reported; `quantization_bit 8` is reported.
        Settings inside variables (`ARGS="--load_in_4bit"`) and values the script computes are not judged.
        The facts, with their sources, are codemods/data/ascend/bitsandbytes_npu.yaml.

    Why:
        bitsandbytes' Ascend backend (built from its multi-backend-refactor branch) raises
        NotImplementedError for double quantisation, FP4 and int8; LLaMA-Factory's own Ascend QLoRA
        instructions set double quantisation off.

    Example:
        llamafactory-cli train --model_name_or_path Qwen/Qwen3-4B --quantization_bit 4 --stage sft
        ->  llamafactory-cli train --model_name_or_path Qwen/Qwen3-4B --quantization_bit 4 --double_quantization false --stage sft

    With --keep-cuda:
        The command is kept (double quantisation works on GPUs) and the setting is reported to port by hand.

    Fix safety:
        Review: without double quantisation the quantisation constants stay 32-bit, a little more
        memory; results are the same. The reports change nothing.
    """

    ID = "shell-bitsandbytes-npu"
    SAFETY = "review"
    TRIGGERS = ("load_in_4bit", "load-in-4bit", "load_in_8bit", "load-in-8bit", "quantization_bit", "quantization-bit")

    def check(self, script: Script) -> None:
        data = table(self.ctx.target)
        for cmd in script.commands:
            entry = _entry(cmd, data["shell"])
            if entry is None:
                continue
            kind, args = entry
            if kind == "trl":
                self._trl(script, cmd, args, data)
            else:
                self._llamafactory(script, cmd, args, data)

    def _trl(self, script: Script, cmd: Command, args: list[Word], data: dict[str, Any]) -> None:
        trl, hint = data["trl"], data["backend_hint"]
        four, eight, double, quant = trl["four_bit_key"], trl["eight_bit_key"], trl["double_quant"], trl["quant_type"]
        found = _settings(script, args, {four, eight, double["key"], quant["key"]}, key_value=False)
        if eight in found and found[eight].flag() is True:
            self.report(found[eight].word.start, f"{found[eight].spelled}: bitsandbytes' Ascend backend has no "
                        "LLM.int8 kernels", hint=f"--{four} with --{double['key']} false, or no quantisation; {hint}")
        if four not in found or found[four].flag() is not True:
            return
        if double["key"] in found:
            self._off(cmd, found[double["key"]], double["npu_value"])
        self._quant_type(found.get(quant["key"]), quant["supported"], hint)

    def _llamafactory(self, script: Script, cmd: Command, args: list[Word], data: dict[str, Any]) -> None:
        rows, hint = data["yaml"], data["backend_hint"]
        key_value = bool(args) and (args[0].value or "").endswith(_CONFIG_SUFFIXES)
        double = rows["double_quant"]
        names = {rows["bits_key"], rows["method_key"], double["key"], rows["quant_type"]["key"]}
        found = _settings(script, args[1:] if key_value else args, names, key_value)
        bits = found.get(rows["bits_key"])
        method = found.get(rows["method_key"])
        if bits is None or not bits.literal or (method is not None and (method.value or "").lower() not in rows["bnb_methods"]):
            return
        if bits.value == "8":
            self.report(bits.word.start, f"{bits.shown()} with bitsandbytes: its Ascend backend has no LLM.int8 "
                        f"kernels", hint=f"{bits.shown('4')} with {double['key']}{bits.sep}{double['npu_value']}, or no "
                        f"quantisation; {hint}")
            return
        if bits.value != "4":
            return
        if double["key"] in found:
            self._off(cmd, found[double["key"]], double["npu_value"])
        else:
            added = f"{double['key']}={double['npu_value']}" if key_value else \
                f"--{double['key']} {double['npu_value']}"
            self.change(bits.end, bits.end, " " + added, f"added {added} (LLaMA-Factory's default is true; no double "
                        "quantisation in bitsandbytes' Ascend backend)", quote=cmd.quote, scope=(cmd.start, cmd.end))
        self._quant_type(found.get(rows["quant_type"]["key"]), rows["quant_type"]["supported"], hint)

    def _off(self, cmd: Command, setting: Setting, npu_value: str) -> None:
        """Double quantisation set true: its value becomes false (a bare flag gets the value)."""
        if setting.flag() is not True:
            return
        new = npu_value.capitalize() if (setting.value or "")[:1].isupper() else npu_value
        message = f"{setting.shown()} -> {setting.shown(new)} (no double quantisation in bitsandbytes' Ascend backend)"
        if setting.value_span is None:
            self.change(setting.word.end, setting.word.end, " " + npu_value, message, quote=cmd.quote,
                        scope=(cmd.start, cmd.end))
        else:
            self.change(*setting.value_span, new, message, quote=cmd.quote, scope=(cmd.start, cmd.end))

    def _quant_type(self, setting: Optional[Setting], supported: list[str], hint: str) -> None:
        if setting is None or not setting.literal or setting.value is None or setting.value in supported:
            return
        self.report(setting.word.start, f"{setting.shown()}: bitsandbytes' Ascend backend quantises "
                    f"to {' or '.join(supported)} only", hint=f"{setting.shown(supported[0])}; {hint}")

"""bitsandbytes-npu: the BitsAndBytesConfig settings that bitsandbytes' Ascend backend lacks."""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Optional

import libcst as cst

from npu_port.codemods._device_agnostic import DeviceAgnostic, parenthesized
from npu_port.transpiler.analysis.literals import has_star_args, keyword, string_value
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table


@cache
def table(target: str) -> dict[str, Any]:
    return load_table(target, "bitsandbytes_npu")


def _bool(node: cst.BaseExpression) -> Optional[bool]:
    """True / False for those literals, None for anything else (an expression decides at run time)."""
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


class BitsAndBytesNpu(PythonRule):
    """Turns off double quantisation in `BitsAndBytesConfig` and reports the settings the NPU backend lacks.

    What it does:
        In `transformers.BitsAndBytesConfig(...)` (resolved through the imports):
        - `bnb_4bit_use_double_quant=True` becomes `False`; an expression there is reported (info) with
          the value it must have on the NPU;
        - `load_in_8bit=True` is reported (warning): the NPU backend has no LLM.int8 kernels;
        - a 4-bit config (`load_in_4bit=` not False) whose `bnb_4bit_quant_type` is `"fp4"`, or absent
          (transformers' default is `"fp4"`), is reported with `bnb_4bit_quant_type="nf4"` as the setting
          to add; an expression there is info. A call with `**kwargs` is not judged on what it omits.
        The facts, with their sources, are codemods/data/ascend/bitsandbytes_npu.yaml; the import of
        bitsandbytes itself is unsupported-cuda-libs' finding.

    Why:
        bitsandbytes' Ascend backend (built from its multi-backend-refactor branch; no release has it)
        quantises 4-bit NF4 only: `compress_statistics`, which `bnb_4bit_use_double_quant` turns on,
        FP4 and the int8 kernels raise NotImplementedError (bitsandbytes/backends/npu.py). LLaMA-Factory's
        Ascend QLoRA instructions set double quantisation off, as this rule does.

    Example:
        BitsAndBytesConfig(load_in_4bit=True,                BitsAndBytesConfig(load_in_4bit=True,
                           bnb_4bit_quant_type="nf4",   ->                      bnb_4bit_quant_type="nf4",
                           bnb_4bit_use_double_quant=True)                      bnb_4bit_use_double_quant=False)

    With --keep-cuda:
        bnb_4bit_use_double_quant=True  ->  bnb_4bit_use_double_quant=not hasattr(torch, "npu")
        (on where the GPU is, off on the NPU; a verl file tests `is_npu_available`, a vLLM one its
        platform's device type, as docs/keep-cuda.md says)

    Fix safety:
        Review: without double quantisation the quantisation constants stay 32-bit, about 0.4 bits a
        parameter more memory; the weights and results are the same. The reports change nothing.
    """

    ID = "bitsandbytes-npu"
    SAFETY = "review"
    TRIGGERS = ("BitsAndBytesConfig",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        rows = table(options.target)["python"]
        if not any(facts.may_name(c) for c in rows["config_classes"]):
            return False
        # Type hints, docstrings and imports name the class too: the rule acts only on a call of it, which
        # the code spells as the class's name and a `(`, unless an import renames the class itself.
        return facts.search_code(_calls(tuple(rows["config_classes"])))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        rows = table(self.ctx.target)["python"]
        if self.ctx.resolve(original.func) not in rows["config_classes"]:
            return updated
        hint = table(self.ctx.target)["backend_hint"]
        eight = keyword(original, rows["load_in_8bit"]["keyword"])
        if eight is not None and _bool(eight.value) is True:
            self.report(eight, self.EIGHT_BIT, hint=self.eight_bit_hint(hint))
        four = keyword(original, "load_in_4bit")
        if four is not None and _bool(four.value) is not False:
            self._quant_type(original, rows["quant_type"], hint)
        return self._double_quant(original, updated, rows["double_quant"], hint)

    EIGHT_BIT = "BitsAndBytesConfig(load_in_8bit=True): bitsandbytes' Ascend backend has no LLM.int8 kernels"

    @staticmethod
    def eight_bit_hint(hint: str) -> str:
        return ("load_in_4bit=True with bnb_4bit_quant_type=\"nf4\" and bnb_4bit_use_double_quant=False, or "
                f"load the model unquantised; {hint}")

    def _quant_type(self, call: cst.Call, row: dict[str, Any], hint: str) -> None:
        arg = keyword(call, row["keyword"])
        value = string_value(arg.value) if arg is not None else None
        found = self.quant_type_report(row, hint, arg is not None, value, has_star_args(call))
        if found is not None:
            message, severity, report_hint = found
            self.report(arg if arg is not None else call, message, severity=severity, hint=report_hint)

    @staticmethod
    def quant_type_report(row: dict[str, Any], hint: str, given: bool, value: Optional[str],
                          star_args: bool) -> Optional[tuple[str, Any, str]]:
        """(message, severity, hint) of the report on a 4-bit config's quantisation type (`given` in the
        call, as the literal `value` or an expression: None), or None where there is none."""
        supported = " or ".join(f'"{v}"' for v in row["supported"])
        setting = f'{row["keyword"]}={supported}'
        if not given:
            if star_args:
                return None
            return (f'BitsAndBytesConfig without {row["keyword"]} quantises to "{row["default"]}", which '
                    "bitsandbytes' Ascend backend lacks", "warning", f"add {setting}; {hint}")
        if value is None:
            return (f"BitsAndBytesConfig({row['keyword']}=...): bitsandbytes' Ascend backend takes {supported} "
                    "only", "info", f"{setting} on the NPU; {hint}")
        if value not in row["supported"]:
            return (f'BitsAndBytesConfig({row["keyword"]}="{value}"): bitsandbytes\' Ascend backend takes '
                    f"{supported} only", "warning", f"{setting}; {hint}")
        return None

    @staticmethod
    def double_quant_info(name: str, row: dict[str, Any], hint: str) -> tuple[str, str]:
        """(message, hint) of the info on a double-quantisation setting given as an expression."""
        return (f"BitsAndBytesConfig({name}=...): bitsandbytes' Ascend backend has no double quantisation",
                f"{name}={row['npu_value']} on the NPU; {hint}")

    def _double_quant(self, original: cst.Call, updated: cst.Call, row: dict[str, Any],
                      hint: str) -> cst.BaseExpression:
        name = row["keyword"]
        arg = keyword(original, name)
        if arg is None:
            return updated
        flag = _bool(arg.value)
        if flag is None and "npu" in self.ctx.module.code_for_node(arg.value):
            return updated  # decided by a device test already (--keep-cuda writes `not hasattr(torch, "npu")`)
        if flag is None:
            message, info_hint = self.double_quant_info(name, row, hint)
            self.report(arg, message, severity="info", hint=info_hint)
            return updated
        if flag is False:
            return updated
        def with_value(value: cst.BaseExpression) -> cst.Call:
            return updated.with_changes(args=[a.with_changes(value=value) if a.keyword is not None
                                              and a.keyword.value == name else a for a in updated.args])

        def off_on_npu() -> cst.Call:
            # --keep-cuda: double quantisation stays on GPUs and is off where the NPU is (`not hasattr(torch,
            # "npu")`, or the file's framework's own test), which is all the NPU backend lacks.
            is_npu = DeviceAgnostic.of(self.ctx).is_npu()
            if isinstance(is_npu, cst.Comparison):
                is_npu = parenthesized(is_npu)
            return with_value(cst.UnaryOperation(operator=cst.Not(), expression=is_npu))
        return self.rewrite(original, updated, with_value(cst.Name(row["npu_value"])),
                            f"{name}=True -> {row['npu_value']} (no double quantisation in bitsandbytes' "
                            "Ascend backend)", portable=off_on_npu)


@cache
def _calls(classes: tuple[str, ...]) -> re.Pattern:
    """`Name(` (spaces, line continuations or a parenthesis between) or `Name as` for each class's name."""
    names = "|".join(sorted({re.escape(c.rsplit(".", 1)[-1]) for c in classes}))
    return re.compile(rf"(?:{names})(?:[\s\\)]*\(|[\s\\]+as(?![A-Za-z0-9_]))")

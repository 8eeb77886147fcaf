"""megatron-fusions: Megatron settings whose CUDA kernels MindSpeed does not run as written, in Python."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any, Optional, Union

import libcst as cst

from npu_port.codemods.shell_megatron_fusions import FlagRow, rows
from npu_port.transpiler.analysis.literals import keyword, string_value
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table

# One (key, value node) setting of a call's keywords or a dict display's string keys.
_Setting = tuple[str, cst.BaseExpression]


@cache
def _python(target: str) -> dict[str, Any]:
    return load_table(target, "megatron_flags")["python"]


def _key(row: FlagRow) -> str:
    """The TransformerConfig field of a row: its `key`, or the option's name (`--transformer-impl`)."""
    return row.field


def _name(node: cst.BaseExpression) -> Optional[str]:
    """The last name an assignment target or subscript spells: `x`, `cfg.x`, `cfg["x"]`."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return string_value(node.slice[0].slice.value)
    return None


class MegatronFusions(PythonRule):
    """Reports Megatron fusion settings that MindSpeed replaces or drops in Python code, with the MindSpeed
    setting to use.

    What it does:
        The settings of shell-megatron-fusions' table (codemods/data/ascend/megatron_flags.yaml), where
        Python code writes them: as keywords of Megatron-core's `TransformerConfig(...)` /
        `MLATransformerConfig(...)` (resolved through the imports), and as the entries of a VERL
        `override_transformer_config` mapping (a dict display or `dict(...)` assigned to that name, to an
        attribute or key of that name, passed as that keyword, or under that key of a dict display), and in
        a VERL override string (`"...megatron.override_transformer_config.apply_rope_fusion=True"`).
        Reported: `tp_comm_overlap=True`, `apply_rope_fusion=True` (info) and
        `transformer_impl="transformer_engine"` where the same call or mapping does not set
        `use_flash_attn=True`. A value the code computes, or False, is not reported; neither is a field
        left to its default.

    Why:
        The same settings as in a launcher or a YAML config (one table, several readers): MindSpeed drops
        Transformer Engine's userbuffer overlap, runs its own fused RoPE under its own flag, and its TE
        path needs flash attention (MindSpeed's docs/zh/features).

    Example:
        TransformerConfig(num_layers=24, tp_comm_overlap=True)
        ->  unchanged; warning: MindSpeed turns tp_comm_overlap off; use --use-ascend-mc2 ...

    With --keep-cuda:
        The same reports: nothing is rewritten in either mode.

    Fix safety:
        Report-only: nothing is rewritten.
    """

    ID = "megatron-fusions"
    SAFETY = "report-only"
    TRIGGERS = ("rope_fusion", "tp_comm_overlap", "transformer_engine")

    @classmethod
    def scout(cls, facts, options) -> bool:
        keys = [_key(r) for r in rows(options.target)]
        if not (facts.has_word(*keys) or facts.any_string(lambda s: any(k in s for k in keys))):
            return False
        # A key counts where a config class is called (verl passes the same keywords to helpers of its own),
        # or an override dict is built or given, or an override string is written.
        python = _python(options.target)
        names = python["override_names"]
        return any(facts.may_name(c) for c in python["config_classes"]) or facts.has_word(*names) \
            or facts.any_string(lambda s: s in names or "override_transformer_config." in s)

    def visit_Call(self, node: cst.Call) -> None:
        python = _python(self.ctx.target)
        resolved = self.ctx.resolve(node.func)
        if resolved is not None and resolved in python["config_classes"]:
            self._judge([(a.keyword.value, a.value) for a in node.args if a.keyword is not None and not a.star],
                        resolved.rsplit(".", 1)[-1])
        for name in python["override_names"]:
            arg = keyword(node, name)
            if arg is not None:
                self._judge_mapping(arg.value, name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assigned(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assigned(node.target, node.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = string_value(node.key)
        if key is not None and key in _python(self.ctx.target)["override_names"]:
            self._judge_mapping(node.value, key)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        text = string_value(node)
        if not text or "override_transformer_config." not in text:
            return
        for row in rows(self.ctx.target):
            if row.key and re.search(rf"override_transformer_config\.{re.escape(row.key)}=['\"]?(?:True|true|1)\b",
                                     text):
                self.report(node, f"override_transformer_config.{row.key}=True: {row.what}", severity=row.severity,
                            hint=row.setting)

    def _assigned(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        name = _name(target)
        if name is not None and name in _python(self.ctx.target)["override_names"]:
            self._judge_mapping(value, name)

    def _judge_mapping(self, value: cst.BaseExpression, where: str) -> None:
        settings = list(_mapping_settings(value))
        if settings:
            self._judge(settings, where)

    def _judge(self, settings: list[_Setting], where: str) -> None:
        given = dict(settings)
        for row in rows(self.ctx.target):
            key = _key(row)
            node = given.get(key)
            if node is None or not _is(node, row.value if row.value else True):
                continue
            if row.unless and _is(given.get(row.unless.lstrip("-").replace("-", "_")), True):
                continue
            shown = f'"{row.value}"' if row.value else "True"
            self.report(node, f"{key}={shown} in {where}: {row.what}", severity=row.severity, hint=row.setting)


def _mapping_settings(value: cst.BaseExpression) -> Iterator[_Setting]:
    """The literal entries of a dict display or a `dict(k=v)` call; nothing for anything else."""
    if isinstance(value, cst.Dict):
        for el in value.elements:
            if isinstance(el, cst.DictElement):
                key = string_value(el.key)
                if key is not None:
                    yield key, el.value
    elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        for arg in value.args:
            if arg.keyword is not None and not arg.star:
                yield arg.keyword.value, arg.value


def _is(node: Optional[cst.BaseExpression], wanted: Union[str, bool]) -> bool:
    """The node is the literal `wanted` (True, or a string)."""
    if node is None:
        return False
    if wanted is True:
        return isinstance(node, cst.Name) and node.value == "True"
    return string_value(node) == wanted

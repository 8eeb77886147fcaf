"""VERL: the device type "cuda" in VERL's settings becomes the target's ("npu")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Optional

import libcst as cst

from npu_port.codemods._device_agnostic import DeviceAgnostic, parenthesized, with_quotes_unlike
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.literals import string_value, with_string_value
from npu_port.transpiler.core.rules import CUDA_WORD, Portable, PythonContext, PythonRule
from npu_port.transpiler.tables.mapping import MappingError, load_table

_LIST_METHODS = frozenset({"append", "insert", "extend"})


@dataclass(frozen=True)
class VerlTable:
    cuda: str
    npu: str
    config_keys: tuple[str, ...]
    device_keywords: frozenset[str]
    config_setters: frozenset[str]

    @classmethod
    @cache
    def for_target(cls, target: str) -> VerlTable:
        data = load_table(target, "verl")
        try:
            return cls(cuda=data["device"]["cuda"], npu=data["device"]["npu"],
                       config_keys=tuple(data["config_keys"]), device_keywords=frozenset(data["device_keywords"]),
                       config_setters=frozenset(data["config_setters"]))
        except (KeyError, TypeError) as exc:
            raise MappingError(f"{target}/verl.yaml: missing or malformed entry {exc}") from None

    @property
    def override_pattern(self) -> re.Pattern:
        keys = "|".join(re.escape(k) for k in self.config_keys)
        return re.compile(rf"^(\+{{0,2}}(?:{keys})=){re.escape(self.cuda)}(:\d+)?$")


class VerlDevice(PythonRule):
    """Set VERL's device type to "npu" where code sets it to "cuda".

    What it does:
        - `device_name="cuda"` keyword arguments (RayPPOTrainer, VERL workers and utilities) -> "npu";
        - `config.trainer.device = "cuda"` and `cfg["trainer"]["device"] = "cuda"` -> "npu";
        - Hydra/OmegaConf override strings "trainer.device=cuda" (also "+trainer.device=cuda") in list or
          tuple displays and in `.append(...)`, and `OmegaConf.update(cfg, "trainer.device", "cuda")`.
        The `verl.utils.device` helpers (`get_nccl_backend()`, `get_torch_device()`, `is_npu_available`,
        a bool) are device-agnostic already and stay, as do `n_gpus_per_node`, `gpu_memory_utilization`
        and `rollout.name=vllm`, which keep their names on NPU.

    Why:
        VERL picks its device from `trainer.device` and `device_name`; with "cuda" it asks Ray for GPUs
        and calls torch.cuda. Recent VERL switches to "npu" by itself when torch_npu is importable
        (`auto_set_device`), but an explicit "cuda" in older releases or in user code is still obeyed.

    Example:
        trainer = RayPPOTrainer(config=config, ..., device_name="cuda")  ->  device_name="npu"
        overrides = ["trainer.device=cuda", "trainer.n_gpus_per_node=8"] ->  "trainer.device=npu"

    With --keep-cuda:
        trainer = RayPPOTrainer(config=config, ..., device_name="cuda")  ->  device_name=get_device_name()
        overrides = ["trainer.device=cuda"]  ->  overrides = [f"trainer.device={get_device_name()}"]
        (verl.utils.device's get_device_name(), imported where the file lacks it; in a file that is not
        VERL code, the device-type expression of docs/keep-cuda.md)

    Fix safety:
        Safe: only literal "cuda" values of these settings; strings elsewhere that mention cuda stay.
    """

    ID = "verl-device"
    SAFETY = "safe"
    TRIGGERS = ()
    TRIGGER_PATTERNS = (CUDA_WORD,)

    @classmethod
    def scout(cls, facts, options) -> bool:
        table = VerlTable.for_target(options.target)
        if facts.any_string(table.override_pattern.match):
            return True
        value = re.compile(rf"{re.escape(table.cuda)}(:\d+)?")
        if not facts.any_string(value.fullmatch):
            return False
        # A bare "cuda" changes only as the value of a device keyword, of an assignment to a config key
        # (`config.trainer.device`, `cfg["trainer"]["device"]`: each part a code word or a string) or of a
        # config setter's call: a list of language names holding "cuda" names none of them.
        if facts.has_word(*table.device_keywords):
            return True
        strings = set(facts.strings)
        if any(all(part in facts.words or part in strings for part in key.split(".")) for key in table.config_keys):
            return True
        return any(facts.may_name(s) for s in table.config_setters) and not strings.isdisjoint(table.config_keys)

    def __init__(self, ctx: PythonContext):
        super().__init__(ctx)
        self.table = VerlTable.for_target(ctx.target)
        self._pattern = self.table.override_pattern
        self._values: set[cst.BaseExpression] = set()
        self._overrides: set[cst.BaseExpression] = set()

    def _mark_value(self, node: Optional[cst.BaseExpression]) -> None:
        value = string_value(node) if node is not None else None
        if node is not None and value is not None and (value == self.table.cuda
                                                       or re.fullmatch(rf"{self.table.cuda}:\d+", value)):
            self._values.add(node)

    def _mark_override(self, node: cst.BaseExpression) -> None:
        value = string_value(node)
        if value is not None and self._pattern.match(value):
            self._overrides.add(node)

    def _is_config_key(self, target: cst.BaseExpression) -> bool:
        name = dotted_name(target) or _subscript_path(target)
        return name is not None and any(name == k or name.endswith("." + k) for k in self.table.config_keys)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self._is_config_key(t.target) for t in node.targets):
            self._mark_value(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in self.table.device_keywords:
                self._mark_value(arg.value)
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _LIST_METHODS:
            for arg in node.args:
                self._mark_override(arg.value)
        if self.ctx.resolve(func) in self.table.config_setters:
            positional = [a.value for a in node.args if a.keyword is None]
            if len(positional) >= 3 and string_value(positional[1]) in self.table.config_keys:
                self._mark_value(positional[2])

    def visit_List(self, node: cst.List) -> None:
        for el in node.elements:
            self._mark_override(el.value)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        for el in node.elements:
            self._mark_override(el.value)

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.BaseExpression:
        current = string_value(updated)
        if current is None:
            return updated
        cuda, npu = self.table.cuda, self.table.npu
        if original in self._values and current.startswith(cuda):
            new = npu + current[len(cuda):]
            portable = self._value_form(updated, current[len(cuda):])
        elif original in self._overrides and self._pattern.match(current):
            new = self._pattern.sub(lambda m: m.group(1) + npu + (m.group(2) or ""), current)
            portable = self._override_form(updated, current)
        else:
            return updated
        return self.rewrite(original, updated, with_string_value(updated, new), f"VERL device {current!r} -> {new!r}",
                            portable=portable)

    def _value_form(self, updated: cst.SimpleString, suffix: str) -> Portable:
        """--keep-cuda: "cuda" -> the file's device-type expression (`get_device_name()` in VERL code);
        "cuda:0" -> `f"{...}:0"`."""
        def form() -> Optional[cst.BaseExpression]:
            device = DeviceAgnostic.of(self.ctx).device_type()
            return device if not suffix else self._fstring(updated, [device, suffix])
        return form

    def _override_form(self, updated: cst.SimpleString, current: str) -> Portable:
        """--keep-cuda: "trainer.device=cuda" -> f"trainer.device={get_device_name()}"."""
        def form() -> Optional[cst.BaseExpression]:
            device = DeviceAgnostic.of(self.ctx).device_type()
            parts: list = []
            at = 0
            for m in self._pattern.finditer(current):
                cuda_at = m.start(0) + len(m.group(1))
                parts += [current[at:cuda_at], device]
                at = cuda_at + len(self.table.cuda)
            return self._fstring(updated, [*parts, current[at:]])
        return form

    def _fstring(self, updated: cst.SimpleString, parts: list) -> Optional[cst.BaseExpression]:
        """An f-string of text and expressions in `updated`'s quotes; None for a prefixed (bytes, raw) or
        triple-quoted literal."""
        if updated.prefix or len(updated.quote) != 1:
            return None
        quote = updated.quote
        pieces: list[cst.BaseFormattedStringContent] = []
        for part in parts:
            if isinstance(part, str):
                if part:
                    pieces.append(cst.FormattedStringText(part.replace("{", "{{").replace("}", "}}")))
            else:
                pieces.append(cst.FormattedStringExpression(parenthesized(with_quotes_unlike(part, quote))))
        return cst.FormattedString(parts=pieces, start=f"f{quote}", end=quote)


def _subscript_path(node: cst.BaseExpression) -> Optional[str]:
    """`cfg["trainer"]["device"]` as "cfg.trainer.device" (literal string keys only)."""
    parts = []
    while isinstance(node, cst.Subscript):
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        key = string_value(node.slice[0].slice.value)
        if key is None:
            return None
        parts.append(key)
        node = node.value
    base = dotted_name(node)
    if base is None or not parts:
        return None
    return ".".join([base] + list(reversed(parts)))

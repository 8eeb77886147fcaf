"""`device-name-table`: the NPU's device name looked up in a table of GPU model names only."""

from __future__ import annotations

import re
from typing import Optional, Union

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.core.rules import PythonRule

# GPU model names as torch.cuda.get_device_name() spells them ("NVIDIA H100 80GB HBM3", "A100", "RTX 3090",
# "MI300X"): a model code (a letter or two and three digits, any case; an upper-case letter and two digits:
# H20, L40; T4, L4), alone or after the vendor's words. A vendor word
# alone ("NVIDIA", "AMD") is vendor detection, which a platform probe does under its CUDA test (ROLL's).
_GPU_NAME = re.compile(r"(?:^|[\s-])(?:(?i:(?:gb|gh|mi|[abhlvpk])\d{3})[A-Za-z]{0,3}|(?:[AHL]\d{2}|[TL]4)[A-Z]{0,3})(?![A-Za-z0-9])"
                       r"|\b(?i:rtx|gtx)[\s-]?\d{4}\b")
# What torch.npu.get_device_name() answers on Ascend ("Ascend910B2", "Ascend910_9392", "Atlas 800I A2"): a
# table with such a key has the NPU's row (verl's flops table: "910B", "Ascend910").
_NPU_NAME = re.compile(r"ascend|atlas|\b(?:npu)\b|910|310|950", re.I)
# Calls that answer the device name of the NPU where the code runs on one: torch.cuda's too, which a port
# renames and transfer_to_npu rebinds to torch.npu's (the lookup fails the same way before and after).
_NPU_NAME_CALLS = frozenset({"torch.npu.get_device_name", "torch_npu.npu.get_device_name", "torch.cuda.get_device_name"})
_PROPERTIES_CALLS = ("torch.npu.get_device_properties", "torch_npu.npu.get_device_properties",
                     "torch.cuda.get_device_properties")
_DEVICE_MODULE_CALLS = ("get_torch_device", "get_device_module", "get_accelerator")
_STRING_METHODS = frozenset({"lower", "upper", "strip", "casefold"})


class DeviceNameTable(PythonRule):
    """Reports the NPU's device name looked up in a table whose keys are GPU model names only.

    What it does:
        Follows the value of `torch.npu.get_device_name()` (`torch_npu.npu.get_device_name()`,
        `torch.npu.get_device_properties(i).name`, `get_device_name()` on a device module a resolver
        returns: `get_torch_device()`, `torch.get_device_module()`; and torch.cuda's, which a port renames
        and transfer_to_npu rebinds, so the finding is there before and after the port), directly or through a name assigned
        from it in the same function (`.lower()` / `.upper()` / `str()` kept), into a lookup in a dict
        the module defines at its top level with string keys: `TABLE[name]`, `TABLE.get(name)`,
        `name in TABLE`, and the loop `for key in TABLE` (`.items()`, `.keys()`, `sorted(...)`) whose
        body tests `key in name` or `name.startswith(key)`. Reported (error) where the table has GPU
        model names (`"H100"`, `"A100"`, `"NVIDIA A100-SXM4-80GB"`, `"MI300X"`) and no Ascend one
        (`"910B"`, `"Ascend910"`, `"Atlas ..."`): on the NPU the lookup cannot find the device. The
        same for an if/elif chain whose every test compares the device name with literals (`"H100" in
        name or "H800" in name`, `name == "A100"`, `name.startswith("L40")`), two GPU models or more
        and no Ascend one: a table written as code, whose `else` (a default, or `raise
        NotImplementedError`) is what the NPU gets.

    Why:
        A port that renames `torch.cuda.get_device_name()` leaves the tables keyed by NVIDIA names
        behind: peak-FLOPS tables for MFU, memory or batch-size presets. On the NPU the name is
        "Ascend910B2": the subscript raises KeyError, `.get` and the loop fall back to their default
        (verl's default is `float("inf")` FLOPS, an MFU of 0), silently. verl's own table has
        `"910B"` and `"Ascend910"` rows; that is the fix.

    Example:
        PEAK_TFLOPS = {"A100": 312, "H100": 989}
        peak = PEAK_TFLOPS[torch.npu.get_device_name()]        # error
        should have the NPU's row:
        PEAK_TFLOPS = {"A100": 312, "H100": 989, "Ascend910B": 354}

    Fix safety:
        Report-only: the NPU's figures (Ascend 910B: 354 TFLOPS bf16, as verl's flops_counter has it)
        are the project's to add. A comparison with one GPU name outside a table (`if "A100" in
        name:` an NVIDIA-only tuning) is left: it is false on the NPU, as it is on other GPUs.
    """

    ID = "device-name-table"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("get_device_name", "get_device_properties")

    @classmethod
    def scout(cls, facts, options) -> bool:
        # The device name read, and a GPU model's name written (a table key or a tested literal).
        return facts.has_word("get_device_name", "get_device_properties") \
            and facts.any_string(lambda s: _GPU_NAME.search(s.strip()) is not None)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._tables = _gpu_only_tables(ctx.module)
        self._names: list[set[str]] = [set()]  # per function: names bound to the NPU's device name
        self._loops: list[tuple[str, str]] = []  # (loop variable, table) of the `for` loops entered
        self._elifs: set[int] = set()  # ids of the `if`s of chains already judged

    # -- where the device name lives -------------------------------------------------------------------------
    def _is_name_call(self, node: cst.BaseExpression) -> bool:
        """`torch.npu.get_device_name()`, `get_torch_device().get_device_name()`, `...get_device_properties(i)
        .name`, and those through `.lower()` / `.upper()` / `str(...)`."""
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _STRING_METHODS:
                return self._is_device_name(func.value)
            if isinstance(func, cst.Name) and func.value == "str" and len(node.args) == 1:
                return self._is_device_name(node.args[0].value)
            if not (isinstance(func, cst.Attribute) and func.attr.value == "get_device_name"):
                return False
            return (self.ctx.resolve(func) or "") in _NPU_NAME_CALLS or _is_device_module_call(func.value)
        if isinstance(node, cst.Attribute) and node.attr.value == "name" and isinstance(node.value, cst.Call):
            func = node.value.func
            return isinstance(func, cst.Attribute) and func.attr.value == "get_device_properties" and (
                (self.ctx.resolve(func) or "") in _PROPERTIES_CALLS
                or _is_device_module_call(func.value))
        return False

    def _is_device_name(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name) and node.value in self._names[-1]:
            return True
        return self._is_name_call(node)

    # -- scopes and bindings --------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._names.append(set())

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._names.pop()
        return updated

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._is_device_name(node.value):
            self._names[-1].update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))

    def visit_For(self, node: cst.For) -> None:
        table = _iterated_table(node.iter, self._tables)
        target = node.target.elements[0].value if isinstance(node.target, cst.Tuple) and node.target.elements \
            else node.target
        self._loops.append((target.value if isinstance(target, cst.Name) and table else "", table or ""))

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        self._loops.pop()
        return updated

    # -- lookups --------------------------------------------------------------------------------------------
    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, cst.Name) and node.value.value in self._tables and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and self._is_device_name(index.value):
                self._flag(node, node.value.value, "raises KeyError")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "get" and isinstance(func.value, cst.Name) \
                and func.value.value in self._tables and node.args and self._is_device_name(node.args[0].value):
            self._flag(node, func.value.value, "gives the default")
        elif isinstance(func, cst.Attribute) and func.attr.value == "startswith" and node.args \
                and self._is_device_name(func.value):
            table = self._loop_table(node.args[0].value)
            if table:
                self._flag(node, table, "never matches")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, cst.In):
            return
        left, right = node.left, node.comparisons[0].comparator
        if isinstance(right, cst.Name) and right.value in self._tables and self._is_device_name(left):
            self._flag(node, right.value, "is false")
        elif self._is_device_name(right):
            table = self._loop_table(left)
            if table:
                self._flag(node, table, "never matches")

    def visit_If(self, node: cst.If) -> None:
        # An if/elif chain that tests the device name against GPU models, arm by arm: a table written as code.
        if id(node) in self._elifs:
            return
        names: list[str] = []
        current: object = node
        while isinstance(current, cst.If):
            self._elifs.add(id(current))
            found = self._tested_names(current.test)
            if found is None:
                return
            names += found
            current = current.orelse
        gpus = [n for n in dict.fromkeys(names) if _GPU_NAME.search(n.strip())]
        if len(gpus) >= 2 and not any(_NPU_NAME.search(n) for n in names):
            shown = ", ".join(f'"{k}"' for k in gpus[:4]) + (", ..." if len(gpus) > 4 else "")
            self.report(node.test, f"the device name tested against GPU models only ({shown}): on the NPU "
                                   "no arm of this chain is taken", severity="error",
                        hint='add the NPU\'s arm (torch.npu.get_device_name() answers "Ascend910B2"-style names: '
                             '`"910B" in name` matches them)')

    def _tested_names(self, test: cst.BaseExpression) -> Optional[list[str]]:
        """The literals a test compares the device name with (`"H100" in name or name == "A100"`,
        `name.startswith("L40")`), or None where it tests anything else."""
        if isinstance(test, cst.BooleanOperation):
            left, right = self._tested_names(test.left), self._tested_names(test.right)
            return None if left is None or right is None else left + right
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            operator, compared = test.comparisons[0].operator, test.comparisons[0].comparator
            if isinstance(operator, cst.In) and isinstance(test.left, cst.SimpleString) and self._is_device_name(compared):
                return [str(test.left.evaluated_value)]
            if isinstance(operator, cst.Equal):
                for value, other in ((test.left, compared), (compared, test.left)):
                    if isinstance(value, cst.SimpleString) and self._is_device_name(other):
                        return [str(value.evaluated_value)]
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) \
                and test.func.attr.value == "startswith" and self._is_device_name(test.func.value) and test.args \
                and isinstance(test.args[0].value, cst.SimpleString):
            return [str(test.args[0].value.evaluated_value)]
        return None

    def _loop_table(self, node: cst.BaseExpression) -> Optional[str]:
        if isinstance(node, cst.Name):
            for variable, table in reversed(self._loops):
                if variable == node.value:
                    return table
        return None

    def _flag(self, node: cst.CSTNode, table: str, outcome: str) -> None:
        keys = self._tables[table]
        shown = ", ".join(f'"{k}"' for k in keys[:4]) + (", ..." if len(keys) > 4 else "")
        self.report(node, f"the device name looked up in `{table}`, whose keys are GPU models only "
                          f"({shown}): on the NPU the lookup {outcome}", severity="error",
                    hint=f'add the NPU\'s row to `{table}` (torch.npu.get_device_name() answers "Ascend910B2"-style '
                         'names: a key "910B" or "Ascend910" matches them)')


def _is_device_module_call(node: cst.BaseExpression) -> bool:
    """`get_torch_device()`, `torch.get_device_module()`, `get_accelerator()`: a device module a resolver
    returns, torch.npu where the code runs on the NPU."""
    if not isinstance(node, cst.Call):
        return False
    name = dotted_name(node.func) or ""
    return name.rsplit(".", 1)[-1] in _DEVICE_MODULE_CALLS


def _gpu_only_tables(module: cst.Module) -> dict[str, list[str]]:
    """Module-level `NAME = {"H100": ..., ...}` (annotated too) whose string keys name GPU models and no NPU:
    name -> its keys."""
    found: dict[str, list[str]] = {}
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            target: Union[cst.BaseAssignTargetExpression, None] = None
            value: Optional[cst.BaseExpression] = None
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif isinstance(small, cst.AnnAssign):
                target, value = small.target, small.value
            if not isinstance(target, cst.Name) or not isinstance(value, cst.Dict):
                continue
            keys = [e.key.evaluated_value for e in value.elements if isinstance(e, cst.DictElement)
                    and isinstance(e.key, cst.SimpleString) and isinstance(e.key.evaluated_value, str)]
            if any(_GPU_NAME.search(k.strip()) for k in keys) and not any(_NPU_NAME.search(k) for k in keys):
                found[target.value] = keys  # type: ignore[assignment]
    return found


def _iterated_table(node: cst.BaseExpression, tables: dict[str, list[str]]) -> Optional[str]:
    """The table a `for` loop walks: `T`, `T.items()`, `T.keys()`, `sorted(T.items(), ...)`, `reversed(T)`."""
    while isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("items", "keys"):
            node = func.value
        elif isinstance(func, cst.Name) and func.value in ("sorted", "reversed", "list") and node.args:
            node = node.args[0].value
        else:
            return None
    return node.value if isinstance(node, cst.Name) and node.value in tables else None

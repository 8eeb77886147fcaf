"""`oom-message`: code that recognises an out-of-memory error by CUDA's message text."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.core.rules import PythonRule

# "CUDA out of memory" in any case, the device word and the blank after it.
_CUDA_OOM = re.compile(r"\bcuda\s+(?=out of memory)", re.I)
# Searches that find the text anywhere in the error's message, and those anchored at its start.
_ANYWHERE_FUNCTIONS = frozenset({"re.search", "re.findall", "re.finditer"})
_ANYWHERE_METHODS = frozenset({"find", "rfind", "index", "rindex", "count"})
_ANCHORED_FUNCTIONS = frozenset({"re.match", "re.fullmatch"})
_ANCHORED_METHODS = frozenset({"startswith", "endswith"})


class OomMessage(PythonRule):
    """Recognise the NPU's out-of-memory error where code tests an error's text for CUDA's.

    What it does:
        A string literal spelling "CUDA out of memory" (any case) that is searched for in an error's text --
        the left operand of `in` / `not in`, the pattern of `re.search` / `re.findall`, the argument of
        `.find` / `.index` / `.count` -- loses its device word: `"out of memory" in str(e)`. The same text
        tested at the start or end (`.startswith(...)`, `re.match`) is reported: the NPU's message starts
        with "NPU". Messages, log lines and docstrings are no test and stay.

    Why:
        torch_npu's allocator raises "NPU out of memory. Tried to allocate ..." (a `torch.OutOfMemoryError`
        in recent releases). A handler that matches CUDA's text never runs on the NPU, though its body
        (`torch.npu.empty_cache()`, a smaller batch) was ported: half a decision. Without the device word
        the test matches CUDA's message and the NPU's alike, so the same form serves `--keep-cuda`.

    Example:
        if "CUDA out of memory" in str(e):    ->  if "out of memory" in str(e):
            torch.cuda.empty_cache()                  torch.npu.empty_cache()    (torch-cuda-api)

    With --keep-cuda:
        the same change (it matches both devices' messages).

    Fix safety:
        safe: the test now holds for the NPU's message and still for CUDA's.
    """

    ID = "oom-message"
    NEEDS_TORCH_NPU = False
    SAFETY = "safe"
    TRIGGERS = ("out of memory",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.any_code_string(lambda s: _CUDA_OOM.search(s) is not None)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._searched: set[cst.SimpleString] = set()

    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                self._search(left)
            left = target.comparator

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args or node.args[0].keyword is not None:
            return
        first = node.args[0].value
        func = node.func
        name = self.ctx.imports.resolve(func)
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if name in _ANYWHERE_FUNCTIONS or method in _ANYWHERE_METHODS:
            self._search(first)
        elif name in _ANCHORED_FUNCTIONS or method in _ANCHORED_METHODS:
            if isinstance(first, cst.SimpleString) and _oom_text(first) is not None:
                self.report(first, "CUDA's out-of-memory text tested at the start of an error's message: the NPU's "
                                   "reads \"NPU out of memory\"", severity="warning",
                            hint='search for "out of memory" anywhere in the message (`in`)')

    def _search(self, node: cst.BaseExpression) -> None:
        if isinstance(node, cst.SimpleString) and _oom_text(node) is not None:
            self._searched.add(node)

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.BaseExpression:
        if original not in self._searched:
            return updated
        new = updated.with_changes(value=f"{updated.prefix}{updated.quote}{_oom_text(updated)}{updated.quote}")
        return self.rewrite(original, updated, new, "CUDA's out-of-memory text -> the text of every device's",
                            portable=lambda: new)


def _oom_text(node: cst.SimpleString) -> Optional[str]:
    """The literal's text as written (escapes kept) without the device word before "out of memory", or
    None where its value has none or the text spells it otherwise (with escapes)."""
    value = string_value(node)
    if value is None or _CUDA_OOM.search(value) is None or _CUDA_OOM.search(node.raw_value) is None:
        return None
    return _CUDA_OOM.sub("", node.raw_value)


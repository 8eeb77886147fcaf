"""`unknown-npu-api`: torch.npu / torch_npu names that the real torch_npu does not have."""

from __future__ import annotations

import difflib
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables import api_facts
from npu_port.transpiler.tables.api_facts import missing_npu_name

_ROOTS = ("torch.npu", "torch_npu")


def _is_npu_name(qualified: str) -> bool:
    return any(qualified == r or qualified.startswith(r + ".") for r in _ROOTS)


class UnknownNpuApi(PythonRule):
    """Reports `torch.npu` / `torch_npu` names that do not exist in the real torch_npu.

    What it does:
        Follows every `torch.npu.X`, `torch_npu.X` and `torch_npu.npu.X` use, through imports and
        aliases, and every `from torch.npu import X` / `import torch_npu.X`, and checks X against
        the torch-npu 2.14 API snapshot (codemods/data/api/torch_npu.json). A name that is not there
        is an error, with the closest real names as a hint.

    Why:
        A typo (`torch.npu.synchronise`) or a hand port that renamed a CUDA-only API
        (`torch.npu.nvtx.range_push`, `torch.npu.get_arch_list`) fails only when that line runs on
        the NPU host, often hours into a job.

    Example:
            torch.npu.nvtx.range_push("fwd")      # error: torch.npu has no nvtx
        should read:
            torch.npu.mstx.range_push("fwd")

    Fix safety:
        Report-only: the right replacement depends on what the code meant; the hint lists the
        nearest real names.
    """

    ID = "unknown-npu-api"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu",)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._inner: set[int] = set()  # attribute chains already judged through their outermost node

    def _judge(self, node: cst.CSTNode, qualified: Optional[str]) -> None:
        if qualified is None or not _is_npu_name(qualified):
            return
        missing = missing_npu_name(qualified)
        if missing is None:
            return
        module, name = missing
        close = difflib.get_close_matches(name, api_facts.load("torch_npu").names(module), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(f'`{module}.{c}`' for c in close)}?" if close else \
            f"see `npu-port explain {self.ID}`; torch_npu 2.14 has no such name"
        shown = "torch.npu" if module == "torch_npu.npu" and qualified.startswith("torch.npu") else module
        self.report(node, f"`{shown}.{name}` does not exist in torch_npu 2.14", severity="error", hint=hint)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        inner = id(node) in self._inner
        self._inner.add(id(node.value))
        if not inner:
            self._judge(node, self.ctx.resolve(node))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        if module is None:
            return
        # the module itself (`from torch_npu.nope import x`), then each imported name
        self._judge(node.module, module)
        if module != "torch" and not _is_npu_name(module):
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is not None:
                self._judge(alias, f"{module}.{name}")

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._judge(alias, dotted_name(alias.name))

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        return False  # names inside import statements are judged by visit_Import / visit_ImportFrom

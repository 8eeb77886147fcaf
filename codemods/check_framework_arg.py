"""`unknown-framework-arg`: framework arguments and keys in Python that the real frameworks do not have."""

from __future__ import annotations

import libcst as cst

from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.framework_facts import INVENTED_NAMES, invented_names_in


class UnknownFrameworkArg(PythonRule):
    """Reports framework argument names that do not exist, such as `npu_memory_utilization`.

    What it does:
        Flags the invented names `npu_memory_utilization` and `n_npus_per_node` wherever they are used
        as a keyword, an attribute or inside a string (config keys, command-line flags, Hydra
        overrides). Plain local variable names are not flagged. vLLM's removed `device=` argument is
        the convert rule `vllm-device-arg`, which `check` reports as an error too.

    Why:
        A hand port often swaps `gpu` for `npu` everywhere. vLLM, vllm-ascend and VERL keep
        `gpu_memory_utilization` and `n_gpus_per_node` on Ascend, and vLLM removed `device=` in
        0.10: such a call fails with "unexpected keyword argument" or the setting is silently ignored.

    Example:
            llm = LLM(model=path, npu_memory_utilization=0.8)   # an error
        should read:
            llm = LLM(model=path, gpu_memory_utilization=0.8)

    Fix safety:
        Report-only; the finding names the real argument where there is one.
    """

    ID = "unknown-framework-arg"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("npu_memory_utilization", "npu-memory-utilization", "n_npus_per_node", "n-npus-per-node")

    def _invented(self, node: cst.CSTNode, text: str, where: str) -> None:
        for _, name in invented_names_in(text):
            real, why = INVENTED_NAMES[name]
            self.report(node, f"`{name}` {where} does not exist: {why}", severity="error",
                        hint=f"use `{real}`", fix=f"use `{real}`")

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._invented(node.keyword, node.keyword.value, "(keyword argument)")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._invented(node.attr, node.attr.value, "(attribute)")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._invented(node, node.value, "(in a string)")

    def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
        self._invented(node, node.value, "(in a string)")

"""npu-port as a LibCST codemod command, for people who already drive refactors with LibCST:

    python -m libcst.tool codemod -x npu_port.transpiler.core.libcst_command.PortToNpu --no-format src/
    python -m libcst.tool codemod -x npu_port.transpiler.core.libcst_command.PortToNpu --no-format --select torch-cuda-api src/

It runs the same engine and rules as `npu-port convert` (one parse, every selected rule in one
traversal) on each module LibCST hands it; every finding becomes a LibCST warning. See docs/libcst.md.
"""

from __future__ import annotations

import argparse

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.registry import select_rules
from npu_port.transpiler.core.settings import Settings


def _csv(value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in (value or "").split(",") if p.strip())


class PortToNpu(CodemodCommand):
    DESCRIPTION = "Port CUDA PyTorch / VERL / vLLM / Ray code to Huawei Ascend NPUs (npu-port's rules)."

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--target", dest="target", default="ascend", help="accelerator to port to")
        arg_parser.add_argument("--select", dest="select", default="", help="only these rules (RULE,...)")
        arg_parser.add_argument("--ignore", dest="ignore", default="", help="leave these rules out (RULE,...)")
        arg_parser.add_argument("--extras", dest="extras", action="store_true", help="also the opt-in NPU additions")

    def __init__(self, context: CodemodContext, target: str = "ascend", select: str = "", ignore: str = "",
                 extras: bool = False) -> None:
        super().__init__(context)
        self.settings = Settings(target=target, select=_csv(select), ignore=_csv(ignore), extras=extras)
        select_rules(self.settings.select, self.settings.ignore, self.settings.extras)  # unknown ids fail early

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        data = tree.bytes
        result = Engine(self.settings).convert(data, self.context.filename or "<module>", "python")
        if result.outcome.status == "failed":
            raise SkipFile(result.outcome.error)
        for f in result.outcome.findings:
            if f.kind != "change":
                hint = f" (hint: {f.hint})" if f.hint else ""
                self.warn(f"{f.line}:{f.col} {f.rule} {f.severity}: {f.message}{hint}")
        if result.output is None:
            return tree
        return cst.parse_module(result.output)

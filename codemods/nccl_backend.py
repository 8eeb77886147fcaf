from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from npu_port.codemods._string_positions import StringPositionRule
from npu_port.transpiler.analysis.imports import dotted_expr, dotted_name

_IS_NCCL = "torch.distributed.is_nccl_available"
_IS_HCCL = "torch_npu.distributed.is_hccl_available"  # torch_npu/distributed/__init__.py (torch-npu 2.14)
_PART = re.compile(r"^(?:(?P<dev>cuda):)?(?P<be>nccl|NCCL)$")


def hccl_backend_text(text: str) -> Optional[str]:
    """`nccl` -> `hccl`, and in device:backend lists `cuda:nccl` -> `npu:hccl`; other parts stay."""
    parts = text.split(",")
    out = []
    for part in parts:
        m = _PART.match(part.strip())
        if m:
            be = "hccl" if m.group("be") == "nccl" else "HCCL"
            part = part.replace(m.group(0), f"npu:{be}" if m.group("dev") else be)
        out.append(part)
    new = ",".join(out)
    return new if new != text else None


class NcclBackend(StringPositionRule):
    """Rewrite the distributed backend `nccl` to `hccl`.

    What it does:
        In backend positions only: `init_process_group("nccl")`/`backend="nccl"`, `new_group(backend=...)`,
        `Backend("nccl")`, backend settings (assignments, parameter defaults, argparse defaults and
        choices, dict entries named `backend`/`*_backend`/`dist_backend`), and comparisons with such a
        setting or `dist.get_backend()`, and what a test's stand-in for `get_backend` returns
        (`patch("torch.distributed.get_backend", return_value="nccl")`, `patch.object(dist, "get_backend", ...)`). Device:backend lists change in both parts:
        `"cpu:gloo,cuda:nccl"` -> `"cpu:gloo,npu:hccl"`. `torch.distributed.Backend.NCCL` becomes
        `Backend.HCCL` (torch_npu registers the hccl backend, which adds that attribute), and
        `torch.distributed.is_nccl_available` becomes `torch_npu.distributed.is_hccl_available`.

    Why:
        NCCL does not exist on Ascend; HCCL is its collective library. Unlike a runtime patch of
        `init_process_group`, a later `if backend == "nccl":` is rewritten too.

    Example:
        dist.init_process_group(backend="nccl")  ->  dist.init_process_group(backend="hccl")
        if args.backend == "nccl":               ->  if args.backend == "hccl":
        logger.info("using nccl")                ->  (unchanged)

    With --keep-cuda:
        dist.init_process_group(backend="nccl")
        ->  dist.init_process_group(backend="hccl" if hasattr(torch, "npu") else "nccl")
        (verl files: backend=get_nccl_backend())

    Fix safety:
        safe: only backend strings in backend positions change.
    """

    ID = "nccl-backend"
    SAFETY = "safe"
    TRIGGERS = ("nccl", "NCCL")
    POSITION = "backend"

    @staticmethod
    def new_text(text: str) -> Optional[str]:
        return hccl_backend_text(text)

    def agnostic_value(self, node, agnostic):
        if isinstance(node, cst.SimpleString) and node.raw_value == "nccl":
            return agnostic.backend()
        return super().agnostic_value(node, agnostic)  # "cpu:gloo,cuda:nccl": the explicit choice

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.has_word("NCCL", "is_nccl_available") or super().scout(facts, options)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        name = original.attr.value
        if name == "NCCL" and self.ctx.resolve(original) == "torch.distributed.Backend.NCCL":
            new = updated.with_changes(attr=cst.Name("HCCL"))
            return self.rewrite(original, updated, new, "`Backend.NCCL` -> `Backend.HCCL`",
                                portable=lambda: self.agnostic.choose(new, updated))
        if name == "is_nccl_available" and self.ctx.resolve(original) == _IS_NCCL:
            return self.rewrite(original, updated, dotted_expr(_IS_HCCL, like=updated),
                                f"`{dotted_name(original)}` -> `{_IS_HCCL}`")
        return updated

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        if updated.relative or isinstance(updated.names, cst.ImportStar) or updated.module is None \
                or dotted_name(updated.module) != "torch.distributed" or len(updated.names) != 1 \
                or dotted_name(updated.names[0].name) != "is_nccl_available":
            return updated
        alias = updated.names[0]
        asname = alias.asname or cst.AsName(name=cst.Name("is_nccl_available"))
        new = updated.with_changes(module=dotted_expr("torch_npu.distributed"),
                                   names=[alias.with_changes(name=cst.Name("is_hccl_available"), asname=asname)])
        return self.rewrite(original, updated, new, "`is_nccl_available` -> torch_npu's `is_hccl_available`")

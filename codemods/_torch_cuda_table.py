"""Lookups in the torch.cuda mapping table (codemods/data/<target>/torch_cuda.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Optional

from npu_port.transpiler.analysis.imports import Binding
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.tables.user_tables import table_rows

CUDA_ROOT = "torch.cuda"


@dataclass(frozen=True)
class Row:
    cuda: str
    npu: Optional[str]
    status: str  # same | analogue | differs | unsupported
    hint: str = ""


def is_cuda_name(qualified: str) -> bool:
    return qualified == CUDA_ROOT or qualified.startswith(CUDA_ROOT + ".")


class TorchCudaTable:
    def __init__(self, data: dict):
        # function -> the fields of its result the NPU leaves unanswered (torch_cuda.yaml unanswered_results)
        self.unanswered: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in data.get("unanswered_results", {}).items()}
        self.rows = {r["cuda"]: Row(r["cuda"], r.get("npu"), r.get("status", "same"), r.get("hint", ""))
                     for r in data["rows"]}
        # Import paths: torch.npu is registered in sys.modules by torch_npu, its submodules are not, so
        # `import torch.cuda.amp as amp` must become `import torch_npu.npu.amp as amp`.
        self.module_paths = {m["cuda"].replace(CUDA_ROOT, "torch.npu", 1): m["npu"] for m in data["modules"]}
        self.cuda_modules = {m["cuda"] for m in data["modules"]}
        self.module_paths["torch.npu"] = "torch.npu"
        self.module_paths["torch"] = "torch"

    def lookup(self, qualified: str) -> tuple[Optional[Row], str]:
        """The row for the longest known prefix of `qualified`, and the rest of the name after it."""
        name = qualified
        while True:
            row = self.rows.get(name)
            # A module row only covers the module itself: an unknown member must not pass as known.
            if row is not None and (name == qualified or name not in self.cuda_modules):
                return row, qualified[len(name):]
            if "." not in name or name == CUDA_ROOT:
                return None, ""
            name = name.rsplit(".", 1)[0]

    def translate(self, qualified: str) -> Optional[str]:
        """The NPU name for a torch.cuda name, or None when there is none."""
        row, rest = self.lookup(qualified)
        if row is None or row.status in ("unsupported", "differs") or not row.npu:
            return None
        return row.npu + rest

    def import_path(self, npu_module: str) -> Optional[str]:
        """How to spell an NPU module in an import statement, or None if it is not an importable module."""
        return self.module_paths.get(npu_module)

    def rebind(self, local: str, binding: Optional[Binding]) -> tuple[str, Optional[str]]:
        """What a local import-bound name will be called and mean once its import statement is rewritten."""
        if binding is None:
            return local, None
        target = binding.target
        if binding.kind == "import":
            if binding.aliased and is_cuda_name(target):
                new = self.translate(target)
                if new and self.import_path(new):
                    return local, new
            return local, target
        if target == CUDA_ROOT:  # from torch import cuda [as x]
            return (local if binding.aliased else "npu"), "torch.npu"
        if is_cuda_name(target):
            new = self.translate(target)
            if new and self.import_path(new.rsplit(".", 1)[0]):
                return local, new
        return local, target


def canonical(qualified: str) -> str:
    """torch_npu.npu.X and torch.npu.X are the same object; compare names in the torch.npu spelling."""
    return "torch.npu" + qualified[len("torch_npu.npu"):] if qualified.startswith("torch_npu.npu") else qualified


@cache
def table_for(target: str, rules_files: tuple[str, ...] = ()) -> TorchCudaTable:
    """The table, with the rows of the user's `--rules` files (RunOptions.rules_files) first."""
    return TorchCudaTable({**load_table(target, "torch_cuda"), "rows": table_rows(target, "torch_cuda", rules_files)})

"""TF32 switches become Ascend's HF32 switches; other CUDA backend settings are reported."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import ImportTable, dotted_expr, dotted_name
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table

_PREFIXES = ("torch.backends.cuda.", "torch.backends.cudnn.")


@dataclass(frozen=True)
class BackendRow:
    cuda: str
    status: str  # rename | keep | unsupported
    npu: str = ""
    hint: str = ""


@cache
def backend_rows(target: str) -> tuple[dict[str, BackendRow], tuple[tuple[str, BackendRow], ...]]:
    """(exact names, prefix rows longest first) of codemods/data/<target>/backends.yaml."""
    exact: dict[str, BackendRow] = {}
    prefixes: list[tuple[str, BackendRow]] = []
    for raw in load_table(target, "backends")["rows"]:
        row = BackendRow(raw["cuda"], raw["status"], raw.get("npu", ""), raw.get("hint", ""))
        if row.cuda.endswith(".*"):
            prefixes.append((row.cuda[:-1], row))
        else:
            exact[row.cuda] = row
    prefixes.sort(key=lambda p: -len(p[0]))
    return exact, tuple(prefixes)


def lookup_backend(target: str, name: str) -> Optional[BackendRow]:
    exact, prefixes = backend_rows(target)
    if name in exact:
        return exact[name]
    for prefix, row in prefixes:
        if name.startswith(prefix):
            return row
    return None


class TF32ToHF32(PythonRule):
    """TF32 switches become HF32 switches; cuDNN and other CUDA backend settings are reported.

    What it does:
        Rewrites `torch.backends.cuda.matmul.allow_tf32` to `torch.npu.matmul.allow_hf32` and
        `torch.backends.cudnn.allow_tf32` to `torch.npu.conv.allow_hf32`, for reads and assignments,
        also when the module is reached through an import (`from torch.backends import cudnn`,
        `import torch.backends.cudnn as cudnn`). `cudnn.benchmark`, `cudnn.deterministic` and the
        other cuDNN settings stay, with an info finding; `torch.backends.cuda` settings without an
        NPU equivalent (`allow_fp16_reduced_precision_reduction`, `fp32_precision`, ...) stay and are
        reported as warnings. The table is codemods/data/<target>/backends.yaml.

    Why:
        torch_npu leaves `torch.backends.cuda` and `torch.backends.cudnn` alone, so on an NPU those
        switches silently do nothing. Ascend's reduced-precision fp32 mode is HF32, switched per
        matmul and convolution by torch_npu's `torch.npu.matmul` and `torch.npu.conv` objects.

    Example:
        torch.backends.cuda.matmul.allow_tf32 = True   ->  torch.npu.matmul.allow_hf32 = True
        cudnn.allow_tf32 = True                        ->  torch.npu.conv.allow_hf32 = True
        cudnn.benchmark = True                         ->  unchanged, info finding

    With --keep-cuda:
        No device-agnostic form: the line stays as it is, with a warning `kept for CUDA (--keep-cuda)`.
        The TF32 switch keeps working on both hosts (torch has the flag without CUDA; it has no effect
        on an NPU), and its HF32 counterpart is another attribute, of `torch.npu`, which exists only
        once torch_npu is loaded: setting both takes a second statement behind a device check,
        `if hasattr(torch, "npu"): torch.npu.matmul.allow_hf32 = True`, which this rule (an
        expression rewrite) does not write; HF32 is also a precision choice of its own on the NPU. Add
        that line by hand where the NPU should compute in HF32.

    Fix safety:
        Safe: the defaults match (matmul off, convolution on) and the meaning is the same. The HF32
        setters accept only a bool, so assigning an int literal is reported. When `torch` itself
        is not imported in the file, the rewrite would need a new import and is reported instead.
    """

    ID = "tf32-hf32"
    SAFETY = "safe"
    TRIGGERS = ("backends",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Resolved names under torch.backends.cuda / torch.backends.cudnn, spelled in the code.
        return facts.has_all_words("torch", "backends") and facts.has_word("cuda", "cudnn")

    def __init__(self, ctx):
        super().__init__(ctx)
        self._inner: set[int] = set()  # ids of Attribute nodes that are the value of a longer chain
        self._in_import = 0

    def visit_Import(self, node: cst.Import) -> None:
        self._in_import += 1

    def leave_Import(self, original: cst.Import, updated: cst.Import):
        self._in_import -= 1
        return updated

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._in_import += 1

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        self._in_import -= 1
        return updated

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # Only the longest chain is looked up: `torch.backends.cuda.matmul` inside
        # `torch.backends.cuda.matmul.allow_tf32` is not a setting of its own.
        if isinstance(node.value, cst.Attribute):
            self._inner.add(id(node.value))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if self._in_import or id(original) in self._inner:
            return updated
        name = self.ctx.resolve(original)
        if name is None or not name.startswith(_PREFIXES):
            return updated
        row = lookup_backend(self.ctx.target, name)
        if row is None:
            return updated
        if row.status == "keep":
            self.report(original, f"`{name}` is left as is", severity="info", hint=row.hint)
        elif row.status == "unsupported":
            self.report(original, f"`{name}` has no Ascend NPU equivalent; left as is", hint=row.hint)
        elif row.status == "rename":
            return self._rename(original, updated, name, row)
        return updated

    def _rename(self, original: cst.Attribute, updated: cst.Attribute, name: str, row: BackendRow):
        head = self.torch_name(self.ctx.imports, dotted_name(original) or "")
        if head is None:
            self.report(original, f"`{name}` has an NPU equivalent, but `torch` is not imported here",
                        hint=f"import torch and use {row.npu}", fix=row.npu)
            return updated
        new_text = head + row.npu[len("torch"):]
        new = dotted_expr(new_text, like=updated)
        return self.rewrite(original, updated, new, f"{name} -> {row.npu}")

    @staticmethod
    def torch_name(imports: ImportTable, dotted: str) -> Optional[str]:
        """The local name that means `torch` where the chain `dotted` is: its own head when it is one,
        else the name an import binds to torch."""
        head = dotted.split(".", 1)[0]
        if imports.lookup(head) == "torch":
            return head
        found = imports.local_for("torch")
        return found[0] if found else None

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        # torch_npu's allow_hf32 setters raise TypeError for anything but a bool.
        if isinstance(original.value, cst.Integer):
            for target in original.targets:
                name = self.ctx.resolve(target.target) if isinstance(target.target, cst.Attribute) else None
                row = lookup_backend(self.ctx.target, name) if name else None
                if row is not None and row.status == "rename":
                    self.report(original.value, f"{row.npu} accepts only a bool",
                                hint="assign True or False", fix="True" if original.value.value != "0" else "False")
        return updated

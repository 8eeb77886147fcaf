"""torch.profiler names that torch_npu.profiler also exports move there; ProfilerActivity.CUDA becomes NPU."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_expr, dotted_name
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table


@dataclass(frozen=True)
class ProfilerTable:
    cuda_module: str
    npu_module: str
    move: frozenset[str]
    activity_renames: dict[str, str]
    activity_members: frozenset[str]
    activity_hint: str
    reported: dict[str, str]  # qualified name -> hint
    cuda_keyword_callables: frozenset[str]
    cuda_keywords: frozenset[str]
    cuda_keyword_hint: str
    missing_methods: frozenset[str]
    missing_method_hint: str


@cache
def profiler_table(target: str) -> ProfilerTable:
    raw = load_table(target, "profiler")
    act = raw["activities"]
    kw = raw["cuda_keywords"]
    missing = raw["missing_methods"]
    return ProfilerTable(
        cuda_module=raw["module"]["cuda"],
        npu_module=raw["module"]["npu"],
        move=frozenset(raw["move"]),
        activity_renames=dict(act["rename"]),
        activity_members=frozenset(act["npu_members"]),
        activity_hint=act["hint"],
        reported={r["cuda"]: r["hint"] for r in raw["reported"]},
        cuda_keyword_callables=frozenset(kw["callables"]),
        cuda_keywords=frozenset(kw["keywords"]),
        cuda_keyword_hint=kw["hint"],
        missing_methods=frozenset(missing["names"]),
        missing_method_hint=missing["hint"],
    )


# The rule's reports.
REPORTED = "`{}` has no Ascend NPU counterpart of the same meaning"
ACTIVITY = "ProfilerActivity.{} has no Ascend NPU counterpart"
CUDA_KEYWORD = "`{}=` of {} selects CUDA profiling"
LEFT_WHOLE = ("ProfilerActivity.{} has no Ascend NPU counterpart: this file's profiler is left whole on torch.profiler "
              "(it profiles the CPU side on an NPU host; a torch_npu enum without that member would raise)")
_ACTIVITY_MEMBER = re.compile(r"\bProfilerActivity\s*\.\s*([A-Za-z_]\w*)")
MISSING_METHOD = "`.{}()` of a profiler: torch_npu.profiler.profile lacks it"
KEPT_FOR_METHOD = ("`.{}()` of a profiler: torch_npu.profiler.profile lacks it, so this file's profiler is left whole on "
                   "torch.profiler (it profiles the CPU side on an NPU host)")
_IMPORTS_TORCH_NPU = re.compile(r"^[ \t]*(?:import[ \t]+torch_npu\b|from[ \t]+torch_npu\b)", re.M)
UNBOUND = ("this file picks the NPU at run time and does not import torch_npu: its profiler is left whole on "
           "torch.profiler (torch_npu.profiler would be an unbound name here)")
_METHOD_CALL = re.compile(r"\.\s*([A-Za-z_]\w*)\s*\(")


def _with_commas(aliases: Sequence[cst.ImportAlias], original_last_comma) -> list[cst.ImportAlias]:
    """The aliases as one list: commas between them, the original closing layout after the last one."""
    out = []
    for i, alias in enumerate(aliases):
        if i == len(aliases) - 1:
            out.append(alias.with_changes(comma=_closing_comma(alias.comma, original_last_comma)))
        elif alias.comma is cst.MaybeSentinel.DEFAULT:
            out.append(alias.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))))
        else:
            out.append(alias)
    return out


def _closing_comma(own, original_last):
    """The comma after a new last name: the original's closing layout, keeping a comment that followed the name."""
    own_ws = own.whitespace_after if isinstance(own, cst.Comma) else None
    comment = own_ws.first_line if isinstance(own_ws, cst.ParenthesizedWhitespace) else None
    if isinstance(original_last, cst.Comma):
        ws = original_last.whitespace_after
        if comment is not None and isinstance(ws, cst.ParenthesizedWhitespace):
            ws = ws.with_changes(first_line=comment)
        return original_last.with_changes(whitespace_after=ws)
    if comment is not None and comment.comment is not None:
        return own.with_changes(whitespace_after=own_ws.with_changes(indent=False, last_line=cst.SimpleWhitespace("")))
    return cst.MaybeSentinel.DEFAULT


class ProfilerToNpu(PythonRule):
    """torch.profiler's profile, schedule, ProfilerActivity, ... come from torch_npu.profiler.

    What it does:
        Moves the names torch_npu.profiler exports too (profile, ProfilerActivity, schedule,
        tensorboard_trace_handler, ProfilerAction, supported_activities) from `torch.profiler` to
        `torch_npu.profiler`: in `from torch.profiler import ...` (names torch_npu lacks, such as
        record_function, stay on a separate `from torch.profiler import` line) and in attribute uses
        (`torch.profiler.profile(...)` -> `torch_npu.profiler.profile(...)`). `ProfilerActivity.CUDA`
        becomes `ProfilerActivity.NPU` where ProfilerActivity is the profiler's enum; a user enum's
        `.CUDA` never changes. A file that uses an activity torch_npu lacks (XPU, MTIA) or calls a method
        its profile lacks (`prof.key_averages()`) keeps all of its profiler on torch.profiler. Reports `use_cuda=`/`use_device=` on profilers, `emit_nvtx`, torch's
        `_ExperimentalConfig`, and `key_averages()` in files written for torch_npu's profiler already
        (it has no such method). The table is codemods/data/<target>/profiler.yaml.

    Why:
        torch.profiler records no NPU activity; torch_npu.profiler is the Ascend profiler with the
        same interface, and its ProfilerActivity has CPU and NPU members.

    Example:
        from torch.profiler import profile, ProfilerActivity, record_function
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof: ...
        ->
        from torch_npu.profiler import profile, ProfilerActivity
        from torch.profiler import record_function
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof: ...

    Fix safety:
        Review: the interface matches, but torch_npu writes its own trace format through
        on_trace_ready and lacks key_averages()/events(), which are reported. Attribute uses
        emit `torch_npu.`, which needs `import torch_npu` (added by the torch-npu-import rule).
    """

    ID = "profiler-npu"
    SAFETY = "review"
    # torch's profiler through any import form (`import torch.profiler as p`, `from torch import
    # profiler`, `torch.autograd.profiler`); a project's own `myproj.profiler` is no trigger.
    TRIGGERS = ("torch.profiler", "import profiler", "autograd.profiler", "ProfilerActivity", "torch_npu.profiler")

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Names resolved under torch[.autograd].profiler, or torch_npu.profiler (a port, for check).
        return facts.has_word("profiler") and facts.has_word("torch", "torch_npu")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.table = profiler_table(ctx.target)
        self.profile_moved = False
        self._method_uses: list[cst.Attribute] = []
        self._profilers: set[str] = set()  # the profile classes the file names, torch's and torch_npu's
        self._first_use: Optional[cst.Attribute] = None  # the first torch.profiler name that would move
        # One decision per file: the activities are passed to the profiler together (a set of defaults, a
        # list built by flags), so a member torch_npu's enum lacks (XPU, HPU, MTIA) keeps all of the file's
        # profiler on torch.profiler; moved alone, its line raises AttributeError (at import, for a
        # module-level set) and the rest would mix two enums.
        self._whole = frozenset(m for m in _ACTIVITY_MEMBER.findall(ctx.text) if not self._has_counterpart(m))
        # The same for a method the file calls that torch_npu's profile lacks (`prof.key_averages()`): moved, the
        # profiler would be written into a call that raises.
        self._kept_for = sorted({m for m in _METHOD_CALL.findall(ctx.text) if m in self.table.missing_methods})
        # And in a file that picks the NPU at run time without importing torch_npu (torch-npu-import adds no
        # import there): `torch_npu.profiler...` written into it would be an unbound name.
        self._unbound = (ctx.dispatch.selects_npu or ctx.dispatch.npu_code) and not _IMPORTS_TORCH_NPU.search(ctx.text)
        self._keep = bool(self._whole or self._kept_for or self._unbound)

    def _has_counterpart(self, member: str) -> bool:
        return member in self.table.activity_members or member in self.table.activity_renames or member.startswith("_")

    # -- imports ---------------------------------------------------------------------------
    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if self._keep:
            return updated
        body = self._split_imports(updated.body)
        if body is None:
            return updated
        if self.ctx.is_silenced(original, self.ID) or self._keeps_cuda(original):
            return updated
        if len(updated.body) == 1 and len(body) == 2:
            # One import became two: put the torch one on its own line below.
            first = updated.with_changes(body=[body[0].with_changes(semicolon=updated.body[0].semicolon)])
            second = cst.SimpleStatementLine(body=[body[1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
            self._note_import(original)
            return cst.FlattenSentinel([first, second])
        self._note_import(original)
        return updated.with_changes(body=body)

    def leave_SimpleStatementSuite(self, original: cst.SimpleStatementSuite, updated: cst.SimpleStatementSuite):
        body = None if self._keep else self._split_imports(updated.body)
        if body is None or self.ctx.is_silenced(original, self.ID) or self._keeps_cuda(original):
            return updated
        self._note_import(original)
        return updated.with_changes(body=body)

    def _keeps_cuda(self, node: cst.CSTNode) -> bool:
        if self.ctx.options.keep_cuda:
            self.keeps_cuda(node, f"from {self.table.cuda_module} import ... -> from {self.table.npu_module} import ...")
            return True
        return False

    def _note_import(self, node: cst.CSTNode) -> None:
        self.ctx.note(node, self.ID, f"from {self.table.cuda_module} import ... -> "
                                     f"from {self.table.npu_module} import ...", kind="change")

    def _split_imports(self, body: Sequence[cst.BaseSmallStatement]) -> Optional[list[cst.BaseSmallStatement]]:
        """The statements with each `from torch.profiler import` split by where its names live; None: no change."""
        out: list[cst.BaseSmallStatement] = []
        changed = False
        for stmt in body:
            parts = self._split_one(stmt) if isinstance(stmt, cst.ImportFrom) else None
            if parts is None:
                out.append(stmt)
                continue
            changed = True
            out.extend(parts)
        if not changed:
            return None
        # `a; b` needs a semicolon after every statement but the last, which keeps its own.
        last_semicolon = body[-1].semicolon
        fixed = []
        for i, stmt in enumerate(out):
            if i == len(out) - 1:
                fixed.append(stmt.with_changes(semicolon=last_semicolon))
            elif stmt.semicolon is cst.MaybeSentinel.DEFAULT:
                fixed.append(stmt.with_changes(semicolon=cst.Semicolon(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))))
            else:
                fixed.append(stmt)
        return fixed

    def _split_one(self, node: cst.ImportFrom) -> Optional[list[cst.ImportFrom]]:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return None
        if dotted_name(node.module) != self.table.cuda_module:
            return None
        moved = [a for a in node.names if isinstance(a.name, cst.Name) and a.name.value in self.table.move]
        if not moved:
            return None
        if any(a.name.value == "profile" for a in moved):
            self.profile_moved = True
        moved_ids = {id(a) for a in moved}
        stay = [a for a in node.names if id(a) not in moved_ids]
        last_comma = node.names[-1].comma if node.lpar is not None else cst.MaybeSentinel.DEFAULT
        npu = node.with_changes(module=dotted_expr(self.table.npu_module), names=_with_commas(moved, last_comma))
        if not stay:
            return [npu]
        torch = node.with_changes(names=_with_commas(stay, last_comma))
        return [npu, torch]

    # -- uses --------------------------------------------------------------------------------
    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        attr = original.attr.value
        if attr in self.table.missing_methods:
            self._method_uses.append(original)
            return updated
        owner = self.ctx.resolve(original.value)
        if owner is None:
            return updated
        if attr == "profile" and owner in (self.table.cuda_module, self.table.npu_module):
            self._profilers.add(owner)
        if self._first_use is None and owner == self.table.cuda_module and attr in self.table.move:
            self._first_use = original
        if f"{owner}.{attr}" in self.table.reported:
            self.report(original, REPORTED.format(f"{owner}.{attr}"),
                        hint=self.table.reported[f"{owner}.{attr}"])
            return updated
        if self._keep:
            if owner == f"{self.table.npu_module}.ProfilerActivity" and attr in self._whole:
                self.report(original, f"{owner} has no member {attr}: AttributeError where this line runs",
                            severity="error", hint=self.table.activity_hint)
            elif owner.endswith(".ProfilerActivity") and attr in self._whole:
                self.report(original, LEFT_WHOLE.format(attr), hint=self.table.activity_hint)
            return updated
        if owner == self.table.cuda_module and attr in self.table.move:
            if attr == "profile":
                self.profile_moved = True
            new = cst.Attribute(value=dotted_expr(self.table.npu_module), attr=updated.attr,
                                dot=updated.dot, lpar=updated.lpar, rpar=updated.rpar)
            return self.rewrite(original, updated, new, f"{owner}.{attr} -> {self.table.npu_module}.{attr}")
        if owner in (f"{self.table.cuda_module}.ProfilerActivity", f"{self.table.npu_module}.ProfilerActivity"):
            return self._activity(original, updated, attr)
        return updated

    def _activity(self, original: cst.Attribute, updated: cst.Attribute, member: str):
        new_member = self.table.activity_renames.get(member)
        if new_member is not None:
            return self.rewrite(original, updated, updated.with_changes(attr=cst.Name(new_member)),
                                f"ProfilerActivity.{member} -> ProfilerActivity.{new_member}")
        if member not in self.table.activity_members and not member.startswith("_"):
            self.report(original, ACTIVITY.format(member),
                        hint=self.table.activity_hint)
        return updated

    def visit_Call(self, node: cst.Call) -> None:
        callee = self.ctx.resolve(node.func)
        if callee not in self.table.cuda_keyword_callables:
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in self.table.cuda_keywords:
                self.report(arg, CUDA_KEYWORD.format(arg.keyword.value, callee),
                            hint=self.table.cuda_keyword_hint)

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        # Moved here: a warning beside the change. Written so already (a port), with no torch profiler in the
        # file that the call could be made on: the call raises AttributeError (check's error).
        ported = self._profilers == {self.table.npu_module}
        if self._unbound and not self._whole and not self._kept_for and self._first_use is not None:
            self.report(self._first_use, UNBOUND, hint="import torch_npu where the NPU branch runs, then move the "
                                                       "profiler to torch_npu.profiler")
        if self._kept_for and not ported and self._method_uses:
            self.report(self._method_uses[0], KEPT_FOR_METHOD.format(self._method_uses[0].attr.value),
                        hint=self.table.missing_method_hint)
        if self.profile_moved or ported:
            for node in self._method_uses:
                self.report(node, MISSING_METHOD.format(node.attr.value) + ("" if self.profile_moved else
                                                                              ": AttributeError where it runs"),
                            severity="warning" if self.profile_moved else "error", hint=self.table.missing_method_hint)
        return updated

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from typing import Optional, Union, cast

import libcst as cst

from npu_port.codemods._device_agnostic import DeviceAgnostic, attributes, parenthesized, with_quotes_unlike
from npu_port.codemods._device_name_uses import decisions
from npu_port.codemods._torch_cuda_table import CUDA_ROOT, Row, TorchCudaTable, canonical, is_cuda_name, table_for
from npu_port.transpiler.analysis.dispatch import Guard
from npu_port.transpiler.analysis.imports import ImportTable, dotted_expr, dotted_name, leftmost_name
from npu_port.transpiler.core.cst_walk import visit
from npu_port.transpiler.core.rules import CUDA_WORD, PythonRule

ModuleName = Union[cst.Attribute, cst.Name]  # what an ImportFrom's module is


class TorchCudaApi(PythonRule):
    """Rewrite `torch.cuda.X` to `torch.npu.X` wherever torch_npu has X.

    What it does:
        Follows names through imports and aliases (`import torch as T`, `import torch.cuda as tc`,
        `from torch import cuda`, `from torch.cuda import synchronize`, function-local imports) and
        rewrites each use to the torch_npu spelling from the mapping table: same name under `torch.npu`,
        or a known analogue (`CUDAGraph` -> `NPUGraph`, `nvtx.range_push` -> `mstx.range_push`).
        Import statements are rewritten at the import (`import torch.cuda as tc` ->
        `import torch.npu as tc`; `from torch import cuda` -> `from torch import npu` with uses renamed);
        alias uses that need no change stay.
        `torch.cuda.get_device_name()` whose value is looked up in a table or handed to a function that is
        not logging (`GPU_SPECS[normalize(torch.cuda.get_device_name(0))]`) is left, with the CUDA test that
        guards it (`if torch.cuda.is_available():`, `... if torch.cuda.is_available() else None`), and
        reported: the NPU's "Ascend910B2" is no key of a GPU table (codemods/_device_name_uses.py). Logged,
        printed or compared, the name is converted.

    Why:
        On Ascend, `torch.cuda` is CUDA's module and fails at run time; `torch.npu` is torch_npu's.

    Example:
        torch.cuda.synchronize()          ->  torch.npu.synchronize()
        g = torch.cuda.CUDAGraph()        ->  g = torch.npu.NPUGraph()
        torch.cuda.nvtx.range_push("x")   ->  torch.npu.mstx.range_push("x")

    Names without an NPU equivalent (`nvtx.range`, `jiterator`, `get_arch_list`, ...) are left as
    they are and reported; a name missing from the table is reported, never guessed.

    With --keep-cuda:
        torch.cuda.synchronize()          ->  torch.accelerator.synchronize()
        torch.cuda.set_device(rank)       ->  torch.accelerator.set_device_index(rank)
        torch.cuda.max_memory_allocated() ->  torch.accelerator.max_memory_allocated()   (torch 2.13+)
        torch.cuda.manual_seed_all(s)     ->  (torch.npu if hasattr(torch, "npu") else torch.cuda).manual_seed_all(s)
        g = torch.cuda.CUDAGraph()        ->  g = (torch.npu.NPUGraph if hasattr(torch, "npu") else torch.cuda.CUDAGraph)()
        (torch.accelerator where the torch the output must run on has the function and the call passes no
        keyword, not current_stream, whose .cuda_stream vLLM reads; else the device module, not
        torch.get_device_module(), which is torch.cpu on a host without an accelerator; a name whose
        forms are all newer than that torch is kept for CUDA; verl files: get_torch_device(); imports of
        torch.cuda names go once nothing uses them)

    Fix safety:
        safe: every emitted name exists in torch-npu 2.14 (a test checks the table against the API
        snapshot) and takes the same arguments.
    """

    ID = "torch-cuda-api"
    SAFETY = "safe"
    TRIGGERS = ()
    TRIGGER_PATTERNS = (CUDA_WORD,)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Every change and report is about a name the imports resolve under torch.cuda. `torch.cuda` in
        # the code settles it; where the two words lie apart (Triton's `tl.extra.cuda.x()`, a tensor's
        # `.cuda()`, another module's `m.torch.cuda`) the file's imports decide, on Python's ast.
        if not facts.may_name(CUDA_ROOT):
            return False
        if facts.search_code(_TORCH_DOT_CUDA):
            return True
        nodes = facts.nodes
        return nodes is None or _may_resolve_cuda(nodes)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.table = table_for(ctx.target, ctx.options.rules_files)
        self._inner: set[int] = set()  # Attribute/Name nodes inside a chain already planned
        self._plans: dict[int, str] = {}  # id(original node) -> new dotted expression
        self._import_lines: dict[int, list[cst.SimpleStatementLine]] = {}
        # The torch.cuda names this file uses that stay as they are (no NPU equivalent, or one that answers
        # differently): an `if` guarding them keeps its CUDA test, or the branch would run on the NPU and fail.
        self._functions: list[cst.FunctionDef] = []
        self._agnostic_plans: dict[int, tuple[Row, str]] = {}  # --keep-cuda: id(node) -> (row, rest)
        self._keyword_calls: set[int] = set()  # ids of callees called with a keyword argument
        self._fstring_quotes: list[str] = []  # the quotes of the f-strings the walk is inside
        # Only a name whose test in _stays_in the whole text already passes: a node's code is a piece of the
        # text (but for indentation, which neither string holds), and rendering `if` bodies for a name only
        # its last part matches (`range`, `temperature` of torch.cuda.nvtx.range / .temperature) cost trl's
        # online_dpo_trainer.py 183 renderings for nothing.
        self._rendered: dict[int, Optional[str]] = {}  # id(node) -> the staying name its code holds, or None
        self._clean_blocks: set[int] = set()  # ids of `if` bodies that hold none
        self._clean_depth = 0  # how many of those the walk is inside
        self._staying = self.staying_names(self.table, ctx.text)
        self._unanswered_reads = unanswered_reads(self.table, ctx.text)

    @staticmethod
    def staying_names(table, text: str) -> list[str]:
        """The torch.cuda names that stay as they are which `text` may hold (by name or by a call of its
        last part)."""
        return [r.cuda for r in table.rows.values() if r.status in ("unsupported", "differs")
                and (r.cuda in text or f".{r.cuda.rsplit('.', 1)[-1]}(" in text)]

    def visit_Module(self, node: cst.Module) -> None:
        # The device name feeding a decision (a lookup in a table of GPU models, a helper that does one):
        # the call and the CUDA test guarding it stay, as one decision (codemods/_device_name_uses.py).
        if "get_device_name" not in self.ctx.text:
            return
        for found in decisions(node, self.ctx.resolve, self._names_cuda):
            self._mark_chain(found.call.func)
            for guard in found.guards:
                self._skip_chains_in(guard)
            where = "guarded by a CUDA test, which stays too" if found.guards else \
                "not guarded by a CUDA test: this line fails on an NPU host until it is ported by hand"
            self.report(found.call, "left as is: the CUDA device name feeds a decision (a table lookup or a call "
                        f"that expects a GPU model name), not a log; {where}",
                        severity="info" if found.guards else "warning",
                        hint="torch.npu.get_device_name() answers e.g. 'Ascend910B2': give the table an NPU "
                             "entry, then port the whole decision")

    def _names_cuda(self, expr: cst.CSTNode) -> bool:
        rule, found = self, []

        class Find(cst.CSTVisitor):
            def visit_Attribute(self, node: cst.Attribute) -> bool:
                qualified = rule.ctx.resolve(node)
                if qualified and is_cuda_name(qualified):
                    found.append(node)
                    return False
                return True

        visit(expr, Find())
        return bool(found)

    # -- uses -------------------------------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._inner.add(id(node.attr))
        if id(node) in self._inner:
            self._mark_chain(node.value)
            return
        qualified = self.ctx.resolve(node)
        if qualified is None or not is_cuda_name(qualified):
            return
        self._mark_chain(node.value)
        self._plan(node, qualified)

    def visit_Assign(self, node: cst.Assign) -> None:
        # In code that already handles the NPU, `is_cuda_available = torch.cuda.is_available()` is the
        # CUDA probe of a device switch: pointing it at the NPU would send NPU runs down CUDA branches.
        names = [t.target.value for t in node.targets if isinstance(t.target, cst.Name)]
        if "npu" in self.ctx.text and any("cuda" in n.lower() for n in names) and self._skip_chains_in(node.value):
            self.ctx.note(node.value, self.ID, f"left as is: `{names[0]}` is the CUDA probe of code that "
                                               "already handles the NPU", severity="info")

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._clean_depth += id(node) in self._clean_blocks

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        self._clean_depth -= id(original) in self._clean_blocks
        return updated

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._clean_depth += id(node) in self._clean_blocks

    def leave_SimpleStatementSuite(self, original: cst.SimpleStatementSuite,
                                   updated: cst.SimpleStatementSuite) -> cst.SimpleStatementSuite:
        self._clean_depth -= id(original) in self._clean_blocks
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._skip_names(node.name)
        self._functions.append(node)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        self._functions.pop()
        return updated

    def _stays_in(self, node: cst.CSTNode) -> Optional[str]:
        # Once per node: every `if` that exits its function asks about the same function body.
        key = id(node)
        if key not in self._rendered:
            text = cst.Module(body=[]).code_for_node(node)
            self._rendered[key] = next((n for n in self._staying if n in text or f".{n.rsplit('.', 1)[-1]}(" in text),
                                       None)
        return self._rendered[key]

    def visit_If(self, node: cst.If) -> None:
        if not self._staying:
            return
        # A piece of a text that holds no staying name holds none either (as for `_staying`): nothing is
        # rendered inside a function body or an `if` body already found clean.
        if any(self._rendered.get(id(f.body), "") is None for f in self._functions):
            return
        stays = None if self._clean_depth else self._stays_in(node.body)
        if stays is None:
            self._clean_blocks.add(id(node.body))
        # `if not torch.cuda.is_available(): return False` guards the rest of its function.
        if stays is None and self._functions and _exits(node.body):
            stays = self._stays_in(self._functions[-1].body)
        if stays and self._skip_chains_in(node.test):
            self.ctx.note(node.test, self.ID, f"left as is: this test guards `{stays}`, which stays CUDA-only",
                          severity="info")

    def _skip_chains_in(self, expr: cst.CSTNode) -> bool:
        """Keep the torch.cuda names in `expr` as they are; True if there were any."""
        rule, found = self, []

        class Mark(cst.CSTVisitor):
            def visit_Attribute(self, node: cst.Attribute) -> bool:
                qualified = rule.ctx.resolve(node)
                if qualified and is_cuda_name(qualified):
                    rule._mark_chain(node)
                    found.append(node)
                    return False
                return True

        visit(expr, Mark())
        return bool(found)

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self._inner:
            return
        binding = self.ctx.imports.binding(node.value)
        # Bare uses need a change only when the import renames the local (`from torch import cuda`);
        # with --keep-cuda every use of a name imported from torch.cuda is written device-agnostic, and
        # the import stays (torch.cuda imports on every host).
        if binding and binding.kind == "from" and binding.target == CUDA_ROOT and not binding.aliased:
            self._plan(node, CUDA_ROOT)
        elif binding and binding.kind == "from" and is_cuda_name(binding.target) and self.ctx.options.keep_cuda:
            self._plan(node, binding.target)

    def visit_Call(self, node: cst.Call) -> None:
        if any(a.keyword is not None for a in node.args):
            self._keyword_calls.add(id(node.func))
        if self._unanswered_reads and self.ctx.resolve(node.func) in self._unanswered_reads:
            # The call stays CUDA's (see _plan): so do its arguments, or `torch.cuda.get_device_properties(
            # torch.npu.current_device())` would ask CUDA about an NPU index.
            for arg in node.args:
                for inner in _subtree(arg.value):
                    self.ctx.npu_guarded.setdefault(id(inner), _STAYS_WITH_CALL)

    def _skip_names(self, *names: Optional[cst.CSTNode]) -> None:
        for n in names:
            if n is not None:
                self._inner.add(id(n))

    def visit_Arg(self, node: cst.Arg) -> None:
        self._skip_names(node.keyword)

    def visit_Param(self, node: cst.Param) -> None:
        self._skip_names(node.name)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._skip_names(node.name)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        self._mark_chain(node.name)
        if node.asname is not None:
            self._skip_names(node.asname.name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None:
            self._mark_chain(node.module)

    @property
    def agnostic(self) -> DeviceAgnostic:
        return DeviceAgnostic.of(self.ctx)

    def _mark_chain(self, node: cst.CSTNode) -> None:
        while isinstance(node, cst.Attribute):
            self._inner.add(id(node))
            self._inner.add(id(node.attr))
            node = node.value
        if isinstance(node, cst.Name):
            self._inner.add(id(node))

    @staticmethod
    def left_unchanged(row: Optional[Row], qualified: str) -> Optional[tuple[str, str]]:
        """(message, hint) of the warning for a torch.cuda name its row leaves as it is, else None."""
        if row is None:
            return (f"`{qualified}` is not in the torch.cuda -> torch.npu table; left unchanged",
                    "check torch_npu's API for an equivalent")
        if row.status == "unsupported" or not row.npu:
            return f"`{row.cuda}` has no torch_npu equivalent; left unchanged", row.hint
        if row.status == "differs":
            return f"`{row.npu}` exists but does not answer as `{row.cuda}` does; left unchanged", row.hint
        return None

    def _plan(self, node: Union[cst.Attribute, cst.Name], qualified: str) -> None:
        row, rest = self.table.lookup(qualified)
        left = self.left_unchanged(row, qualified)
        if left is not None:
            self.report(node, left[0], hint=left[1])
            return
        read = self._unanswered_reads.get(qualified)
        if read and not self.ctx.left_as_is(node, self.ID):
            self.report(node, f"`{qualified}` left unchanged: this file reads `.{read}` of its result, which "
                              f"the NPU's does not answer", hint="torch.npu.get_device_properties() fills name, "
                        "total_memory, cube_core_num, vector_core_num and L2_cache_size only; keep this path for CUDA "
                        "or compute the value another way on the NPU")
            return
        if read:
            return  # left as is, said why
        assert row is not None and row.npu is not None
        if self.ctx.options.keep_cuda:
            self._agnostic_plans[id(node)] = (row, rest)
            return
        new_q = row.npu + rest
        base = leftmost_name(node)
        assert base is not None
        new_local, new_target = self.table.rebind(base.value, self.ctx.imports.binding(base.value))
        dotted = self.spell(self.table, self.ctx.imports, new_q, new_local, new_target)
        if dotted is None:
            self.report(node, f"`{qualified}` maps to `{new_q}`, which this file cannot name; left unchanged",
                        hint=f"import torch and use {new_q}")
        elif dotted != dotted_name(node):
            self._plans[id(node)] = dotted

    @staticmethod
    def spell(table: TorchCudaTable, imports: ImportTable, new_q: str, local: str,
              target: Optional[str]) -> Optional[str]:
        """Write the NPU name with the base the file already has, or another import-bound name."""
        if target is not None:
            t = canonical(target)
            if new_q == t or new_q.startswith(t + "."):
                return local + new_q[len(t):]
        found = imports.local_for(new_q)
        if found is not None:
            other, other_target = found
            binding = imports.binding(other)
            if table.rebind(other, binding) == (other, other_target):
                return other + new_q[len(other_target):]
        return None

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        return self._apply(original, updated)

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        return self._apply(original, updated)

    def _apply(self, original, updated):
        if id(original) in self._agnostic_plans:
            row, rest = self._agnostic_plans[id(original)]
            quote = self._fstring_quotes[-1] if self._fstring_quotes else None
            return self.rewrite(original, updated, updated, f"`{dotted_name(original)}`",
                                portable=lambda: self._in_fstring(self._agnostic(original, updated, row, rest), quote))
        dotted = self._plans.get(id(original))
        if dotted is None:
            return updated
        return self.rewrite(original, updated, dotted_expr(dotted, like=updated),
                            f"`{dotted_name(original)}` -> `{dotted}`")

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._fstring_quotes.append(node.end)

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString):
        self._fstring_quotes.pop()
        return updated

    @staticmethod
    def _in_fstring(form: Optional[cst.BaseExpression], quote: Optional[str]) -> Optional[cst.BaseExpression]:
        """A device-agnostic form written inside an f-string: its strings (`hasattr(torch, "npu")`) in the
        other quote, which Python before 3.12 requires."""
        return with_quotes_unlike(form, quote) if form is not None and quote is not None else form

    def _agnostic(self, original, updated, row: Row, rest: str) -> Optional[cst.BaseExpression]:
        """--keep-cuda: torch.accelerator's function where there is one and the call passes no keyword
        (its device argument is positional-only); the device module's attribute where torch_npu has the
        same name; else the explicit choice between the two names."""
        agnostic = self.agnostic
        name = row.cuda[len(CUDA_ROOT) + 1:]
        if not rest and name == "current_device" and agnostic.current_device() is not None:
            return agnostic.current_device()  # verl: get_device_id()
        if agnostic.framework_device_module and row.status == "same":
            # verl's own ports write get_torch_device().X for every torch.cuda.X both modules have.
            return attributes(agnostic.device_module(), [p for p in (name + rest).split(".") if p])
        keywords = id(original) in self._keyword_calls
        found = agnostic.torch_form((name + rest).lstrip("."), keywords=keywords)
        if found is None and rest and name:
            found = agnostic.torch_form(name, keywords=keywords)  # `amp` + `.autocast`: the module's form
            if found is not None:
                found = attributes(found, [p for p in rest.split(".") if p])
        if found is not None:
            return found
        if agnostic.too_new((name + rest).lstrip(".")) or (rest and agnostic.too_new(name)):
            return None  # none of its forms exists at the torch the output must run on: kept for CUDA
        if row.status == "same":
            module = parenthesized(agnostic.device_module())
            return attributes(module, [p for p in (name + rest).split(".") if p])
        npu_name = cast(str, row.npu) + rest  # a row that is not `same` names its NPU counterpart
        if not npu_name.startswith("torch."):
            return None  # a torch_npu module: this file may not have it bound on an NPU host
        torch = agnostic.torch_name()
        npu = dotted_expr(torch + npu_name[len("torch"):])
        # The CUDA side spelled in full: an alias import (`from torch.cuda import CUDAGraph`) goes unused.
        cuda = dotted_expr(f"{torch}.cuda.{name}{rest}")
        return parenthesized(agnostic.choose(npu, cuda))

    # -- imports ----------------------------------------------------------------------------
    def leave_Import(self, original: cst.Import, updated: cst.Import):
        if self.ctx.options.keep_cuda:
            # The uses are made device-agnostic: the import goes where nothing uses it any more.
            for alias in updated.names:
                full = dotted_name(alias.name)
                if full and is_cuda_name(full) and alias.asname is not None:
                    self.ctx.drop_if_unused(full, None, dotted_name(alias.asname.name))
            return updated
        names = list(updated.names)
        changed = False
        for i, alias in enumerate(names):
            full = dotted_name(alias.name)
            if full is None or not is_cuda_name(full) or alias.asname is None:
                continue  # `import torch.cuda` binds `torch`: its uses are rewritten instead
            new = self.table.translate(full)
            path = self.table.import_path(new) if new else None
            if path is None:
                self.report(original, f"`import {full}` has no torch_npu module to import instead",
                            hint=self.table.lookup(full)[0].hint if self.table.lookup(full)[0] else "")
                continue
            names[i] = alias.with_changes(name=dotted_expr(path))
            changed = True
        if not changed:
            return updated
        return self.rewrite(original, updated, updated.with_changes(names=names),
                            "import of a torch.cuda module -> its torch_npu module")

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        if self.ctx.options.keep_cuda:
            self._drop_if_unused(updated)
            return updated
        module = dotted_name(updated.module) if updated.module is not None else None
        if module is None or updated.relative:
            return updated
        if isinstance(updated.names, cst.ImportStar):
            if is_cuda_name(module):
                self.report(original, f"`from {module} import *` cannot be ported name by name",
                            hint="import the names you use from torch.npu")
            return updated
        if module == "torch":
            return self._rename_cuda_from_torch(original, updated)
        if not is_cuda_name(module):
            return updated
        groups = self._regroup(original, module, updated.names)
        if groups is None:
            return updated
        if len(groups) == 1:
            (new_module, aliases), = groups.items()
            new = updated.with_changes(module=dotted_expr(new_module), names=aliases)
            return self.rewrite(original, updated, new, f"`from {module} import` -> `from {new_module} import`")
        # Several target modules (or names left on torch.cuda): split the line; done at statement level.
        self._import_lines[id(original)] = [
            cst.SimpleStatementLine(body=[cst.ImportFrom(module=cast(ModuleName, dotted_expr(m)), names=_tidy(a))])
            for m, a in groups.items()
        ]
        return updated

    def _drop_if_unused(self, node: cst.ImportFrom) -> None:
        module = dotted_name(node.module) if node.module is not None else None
        if module is None or node.relative or isinstance(node.names, cst.ImportStar) \
                or not (is_cuda_name(module) or module == "torch"):
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name and (module != "torch" or name == "cuda"):
                asname = dotted_name(alias.asname.name) if alias.asname is not None else None
                self.ctx.drop_if_unused(module, name, asname)

    def _rename_cuda_from_torch(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        names = list(cast(Sequence[cst.ImportAlias], updated.names))  # not `import *` (the caller's test)
        for i, alias in enumerate(names):
            if dotted_name(alias.name) == "cuda":
                names[i] = alias.with_changes(name=cst.Name("npu"))
                return self.rewrite(original, updated, updated.with_changes(names=names),
                                    "`from torch import cuda` -> `from torch import npu`")
        return updated

    def _regroup(self, original, module: str, aliases) -> Optional[dict[str, list[cst.ImportAlias]]]:
        """Target module -> aliases for each imported name; None when nothing can move."""
        groups: dict[str, list[cst.ImportAlias]] = {}
        moved = False
        for alias in aliases:
            name = dotted_name(alias.name)
            left = self.import_left(self.table, module, name)
            if left is not None:
                self.report(original, left[0], hint=left[1])
                groups.setdefault(module, []).append(alias)
                continue
            new = self.table.translate(f"{module}.{name}")
            assert new is not None
            path, _, new_name = new.rpartition(".")
            path = self.table.import_path(path)  # type: ignore[assignment]
            moved = True
            if new_name != name and alias.asname is None:
                alias = alias.with_changes(name=cst.Name(new_name),
                                           asname=cst.AsName(name=cst.Name(cast(str, name))))
            elif new_name != name:
                alias = alias.with_changes(name=cst.Name(new_name))
            groups.setdefault(path, []).append(alias)
        return groups if moved else None

    @staticmethod
    def import_left(table: TorchCudaTable, module: str, name: Optional[str]) -> Optional[tuple[str, str]]:
        """(message, hint) of the warning for `from module import name` (module under torch.cuda) where the
        name stays imported from CUDA, else None (it moves to a torch_npu module)."""
        new = table.translate(f"{module}.{name}")
        if new and table.import_path(new.rpartition(".")[0]) is not None:
            return None
        row = table.lookup(f"{module}.{name}")[0]
        hint = f"use {new} through `import torch`" if new else row.hint if row and row.hint else ""
        return f"`{module}.{name}` cannot be imported from torch_npu; left unchanged", hint

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if len(original.body) != 1 or id(original.body[0]) not in self._import_lines:
            return updated
        lines = self._import_lines[id(original.body[0])]
        lines[0] = lines[0].with_changes(leading_lines=updated.leading_lines)
        lines[-1] = lines[-1].with_changes(trailing_whitespace=updated.trailing_whitespace)
        new = cst.FlattenSentinel(lines)
        if self.ctx.is_silenced(original, self.ID):
            return updated
        self.ctx.note(original, self.ID, "split a torch.cuda import between torch_npu and names left on CUDA",
                      kind="change")
        return new


# `torch.cuda` not preceded by a word or a dot (`m.torch.cuda` is another module's attribute).
_TORCH_DOT_CUDA = re.compile(r"torch(?<![A-Za-z0-9_.]torch)\s*\.\s*cuda(?![A-Za-z0-9_])")


def _may_resolve_cuda(nodes: Iterable[ast.AST]) -> bool:
    """Whether the imports could resolve a name under torch.cuda, scopes ignored (more loosely than
    the rule's import table): an import of a torch.cuda module or of `cuda` from torch (the rule
    rewrites or reports each), or `X.cuda` where some import binds X to torch itself (`import torch`,
    `import torch.nn`, `import torch as T`)."""
    torch_names: set[str] = set()
    cuda_attributes: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Attribute):
            if node.attr == "cuda" and isinstance(node.value, ast.Name):
                cuda_attributes.add(node.value.id)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name != "torch" and not alias.name.startswith("torch."):
                    continue
                if alias.asname is None:
                    torch_names.add("torch")  # `import torch.x` binds torch
                elif alias.name == "torch":
                    torch_names.add(alias.asname)
                elif is_cuda_name(alias.name):
                    return True
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if is_cuda_name(node.module) or (node.module == "torch" and any(a.name == "cuda" for a in node.names)):
                return True
    return not torch_names.isdisjoint(cuda_attributes)


_STAYS_WITH_CALL = Guard("an argument of a torch.cuda call that stays CUDA's (its result is read for a field "
                         "the NPU does not answer)")


def _subtree(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def unanswered_reads(table: TorchCudaTable, text: str) -> dict[str, str]:
    """The functions of the table's `unanswered_results` whose result this file reads a field of that the
    NPU leaves unanswered, directly (`get_device_properties(0).major`) or through a name assigned from a
    call of it (`props = ...get_device_properties(d)` ... `props.multi_processor_count`): function -> the
    first such field."""
    found: dict[str, str] = {}
    for function, fields in table.unanswered.items():
        last = function.rsplit(".", 1)[1]
        if last not in text:
            continue
        alternatives = "|".join(fields)
        direct = re.search(rf"\b{last}\((?:[^()]|\([^()]*\))*\)\.({alternatives})\b", text)
        if direct:
            found[function] = direct.group(1)
            continue
        for name in re.findall(rf"\b(\w+)\s*=\s*[\w.]*\b{last}\(", text):
            through = re.search(rf"\b{re.escape(name)}\.({alternatives})\b", text)
            if through:
                found[function] = through.group(1)
                break
    return found


def _tidy(aliases: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    """Fresh commas: the aliases came from a longer list."""
    out = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in aliases]
    return out


def _exits(block: cst.BaseSuite) -> bool:
    """A block whose last statement returns or raises: an early exit."""
    body = getattr(block, "body", ())
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        return isinstance(last.body[-1], (cst.Return, cst.Raise))
    return False

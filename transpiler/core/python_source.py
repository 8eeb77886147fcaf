"""Python files: one LibCST parse, every selected rule in one traversal, emit in the file's own encoding."""

from __future__ import annotations

import ast
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Optional, cast

import libcst as cst

from npu_port.transpiler.analysis.dispatch import (
    GUARD_TYPES,
    MARKING_TYPES,
    Guard,
    code,
    cuda_api_in,
    dispatch_guard,
    guards_below,
    refuses_saying_cuda,
)
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.patchers import PATCHER_ENDS, is_patcher, names_torch_cuda
from npu_port.transpiler.core import trusted_parse
from npu_port.transpiler.core.cst_walk import TRIVIA, transform, visit
from npu_port.transpiler.core.files import NUL_BYTES, decode_problem, parsed_tree
from npu_port.transpiler.core.import_adder import add_imports
from npu_port.transpiler.core.report import Finding
from npu_port.transpiler.core.rules import PythonContext, PythonRule, RunOptions


class SourceError(Exception):
    """A file that cannot be converted; the message names the reason and, where known, the line."""


def _patch_targets(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The parts of torch.cuda a statement or call assigns to, deletes or patches (a shim such as
    `torch.cuda.Event = torch.npu.Event`): left exactly as written, since renaming them would
    overwrite torch.npu's own names."""
    kind = type(node)  # one of _PATCH_TYPES, as parsed: exact types, no isinstance through ABCMeta
    if kind is cst.Call:
        func = node.func  # type: ignore[attr-defined]
        end = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
        if not node.args or end not in PATCHER_ENDS:  # type: ignore[attr-defined]
            return []
        name = dotted_name(func) or ""
        if not is_patcher(name):
            return []
        targets = [node.args[0].value]  # type: ignore[attr-defined]
    elif kind is cst.Assign:
        targets = [t.target for t in node.targets]  # type: ignore[attr-defined]
    elif kind is cst.AugAssign or kind is cst.AnnAssign or kind is cst.Del:
        targets = [node.target]  # type: ignore[attr-defined]
    else:
        return []
    return [t for t in _flatten_targets(targets) if _names_torch_cuda(t)]


def _flatten_targets(targets):
    for t in targets:
        if isinstance(t, (cst.Tuple, cst.List)):
            yield from _flatten_targets(e.value for e in t.elements)
        else:
            yield t


def _names_torch_cuda(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return isinstance(value, str) and names_torch_cuda(value)
    return names_torch_cuda(dotted_name(node) or "")


def _assigned_torch_cuda(module: cst.Module) -> frozenset[str]:
    """The torch.cuda names `module` assigns to anywhere (the patches of _patch_targets, less the calls)."""
    found: set[str] = set()

    class Targets(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            found.update(dotted_name(t) or "" for t in _patch_targets(node))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            found.update(dotted_name(t) or "" for t in _patch_targets(node))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            found.update(dotted_name(t) or "" for t in _patch_targets(node))

    visit(module, Targets())
    return frozenset(found - {""})


def _subtree(node: cst.CSTNode):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


class _Dispatcher(cst.CSTTransformer):
    """Runs the visit_/leave_ methods of all rules in a single walk, keeping the import table current."""

    def __init__(self, rules: Sequence[PythonRule], ctx: PythonContext):
        super().__init__()
        self._ctx = ctx
        self._visits: dict[str, list[Callable]] = defaultdict(list)
        self._leaves: dict[str, list[Callable]] = defaultdict(list)
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_"):
                    self._visits[attr[6:]].append(getattr(rule, attr))
                elif attr.startswith("leave_"):
                    self._leaves[attr[6:]].append(getattr(rule, attr))
        # The walk leaves out the tokens and layout (cst_walk.TRIVIA: two thirds of a file's nodes) unless a
        # rule hooks one of them: nothing of the walk's own concerns applies to them (no scope, statement,
        # patch, guard or decision is one), a guard or a statement above one covers it, and its position,
        # should a rule ask, comes from the whole module's code generation (analysis/locations).
        hooked = {name for name in (*self._visits, *self._leaves)}
        self.skip = frozenset() if any(t.__name__ in hooked for t in TRIVIA) else TRIVIA
        # What the walk does at a node of each type, worked out at its first node: the walk meets
        # half a million nodes on verl, and one dict lookup by type replaces a set test per concern
        # below and a lookup of the rules' hooks by the type's name.
        self._plans: dict[type, _Plan] = {}
        # The context's tables the walk fills at every node (bound once: attribute lookups per node).
        self._statement_of = ctx.statement_of
        self._statement_indents = ctx.statement_indents
        self._npu_guarded = ctx.npu_guarded

        self._guard: Optional[cst.CSTNode] = None  # the outermost dispatch code being walked through
        self._reason: Optional[Guard] = None
        # Nodes found to be dispatch code before the walk reaches them: `if`s beside one that handles the
        # NPU, registration keys, parameter defaults the function dispatches on, third-party cuda= flags.
        self._marked: dict[int, Guard] = {}
        self._top: Optional[cst.CSTNode] = None  # the statement positions are generated for (see on_visit)
        self._decisions: list[tuple[int, int]] = []  # the notes' marks of the decisions being walked
        # The torch.cuda names the file patches: any other reference to one that is not a call is the
        # original being saved (or handed on) to be put back, part of the same patch, and stays as
        # written; ported alone, the restore would write torch.npu's function onto torch.cuda.
        self._patched_names = _assigned_torch_cuda(ctx.module) if _ASSIGNS_TORCH_CUDA.search(ctx.text) else frozenset()
        self._callees: set[int] = set()
        self._branches: list[tuple[int, int]] = []  # the notes' marks of the `if` statements being walked

    def _plan_for(self, kind: type) -> _Plan:
        flags = (_SCOPE if kind in _SCOPE_TYPES else 0) | (_PATCH if kind in _PATCH_TYPES else 0) \
            | (_MARKING if kind in MARKING_TYPES else 0) | (_GUARD if kind in GUARD_TYPES else 0) \
            | (_STATEMENT if issubclass(kind, cst.BaseStatement) else 0) | (_DECISION if kind is cst.BooleanOperation or kind is cst.IfExp else 0) \
            | (_ORIGINAL if self._patched_names and (kind is cst.Attribute or kind is cst.Call) else 0) \
            | (_BRANCH if kind is cst.If else 0)
        plan = self._plans[kind] = (flags, tuple(self._visits.get(kind.__name__, ())),
                                    tuple(self._leaves.get(kind.__name__, ())))
        return plan

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        flags, visits, _ = self._plans.get(kind) or self._plan_for(kind)
        key = id(node)
        if flags & _SCOPE:
            self._ctx.imports.enter(node)
            if kind is cst.Module:
                for statement in node.body:  # type: ignore[attr-defined]
                    self._statement_indents[id(statement)] = ()
        # Each node goes to the statement its position is generated with (analysis/locations): a
        # top-level one, or one in the body of such a class (a method of a large class is generated
        # without the rest of the class), which makes its own body's statements placeable too.
        # (statement_indents holds statements alone: the bodies of the module and of classes)
        indents = self._statement_indents.get(key) if flags & _STATEMENT else None
        if indents is not None:
            self._top = node
            if kind is cst.ClassDef and type(node.body) is cst.IndentedBlock:  # type: ignore[attr-defined]
                block = node.body  # type: ignore[attr-defined]
                inner = (*indents, self._ctx.module.default_indent if block.indent is None else block.indent)
                for statement in block.body:
                    self._statement_indents[id(statement)] = inner
        if self._top is not None:
            self._statement_of.setdefault(key, self._top)  # the first place a node is met, as codegen's
        if flags & _PATCH:
            targets = _patch_targets(node)
            for target in targets:
                self._ctx.patched.update(id(n) for n in _subtree(target))
            if targets and kind is cst.Assign:
                # The value of a shim is what torch.cuda is made to point at: written as meant.
                self._ctx.patched.update(id(n) for n in _subtree(node.value))  # type: ignore[attr-defined]
        if flags & _ORIGINAL:
            if kind is cst.Call:
                self._callees.add(id(node.func))  # type: ignore[attr-defined]
            elif key not in self._ctx.patched and key not in self._callees \
                    and dotted_name(node) in self._patched_names:  # type: ignore[arg-type]
                self._ctx.patched.update(id(n) for n in _subtree(node))
                self._ctx.saved_originals.add(key)
        if flags & _DECISION:
            self._decisions.append(self._ctx.mark())
        if flags & _BRANCH:
            self._branches.append(self._ctx.mark())
        if flags & _MARKING:
            self._mark_ahead(node)
        if self._guard is None:
            guard = self._marked.get(key) if self._marked else None
            if guard is None and flags & _GUARD:
                guard = dispatch_guard(node, self._ctx.dispatch)
            if guard is not None:
                self._guard, self._reason = node, guard
        if self._guard is not None:
            self._npu_guarded[key] = self._reason  # type: ignore[assignment]
        for fn in visits:
            fn(node)
        return True

    def _leave_decision(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        """A rule rewrites a whole decision or nothing. A boolean chain or a conditional expression that
        some rule changed but that still calls CUDA (`torch.npu.is_available() and
        torch.cuda.get_device_capability() >= (8, 0)`, `torch.cuda.get_device_capability()[0] if
        torch.npu.is_available() else 0`, where the capability has no NPU form) would take another branch
        on the NPU than either the CUDA original (which stops at the availability test there) or a whole
        port: it is put back as it was, its changes withdrawn, and the reason reported."""
        mark = self._decisions.pop()
        if self._decisions:
            return updated
        changed_by = self._ctx.changes_since(mark)
        if not changed_by or updated is original:
            return updated
        # Of a conditional expression, the arms: a CUDA test left beside a ported arm only keeps the NPU
        # on the other arm, as the original did; a CUDA call in an arm after a ported test is reached.
        arms = (updated.body, updated.orelse) if isinstance(updated, cst.IfExp) else (updated,)
        left = next((m for m in (cuda_api_in(a) for a in arms) if m is not None), None)
        if left is None:
            return updated
        self._ctx.withdraw_changes(mark)
        self._ctx.note(original, changed_by[0], f"left whole: this condition also uses `{left.group().rstrip('(')}`, "
                       "which is left for CUDA; converting only part of it would change which branch runs on the NPU",
                       severity="warning", hint="port the condition as a whole (an NPU test of the same meaning), "
                       "or keep it for CUDA only")
        return original

    def _leave_branch(self, original: cst.If, updated: cst.CSTNode) -> cst.CSTNode:
        """A test and the code it tests are one decision. An `if` whose test some rule changed (`device.type
        == "cuda"` -> `"npu"`, `torch.cuda.is_available()` -> `torch.npu.is_available()`) while the branch it
        now takes on the NPU still calls CUDA (`torch.cuda.memory._record_memory_history`, which has no NPU
        form, left as written) would send the NPU into CUDA-only code that the original kept it out of: the
        whole statement is put back as it was, its changes withdrawn, and the reason reported. The branch
        taken on the NPU is the body, or the `else` of a negated test (`!=`, `not`)."""
        mark = self._branches.pop()
        if type(updated) is not cst.If or updated.test is original.test:
            return updated
        changed_by = self._ctx.changes_since(mark)
        if not changed_by:
            return updated
        test = code(original.test)
        negated = "!=" in test or " not " in f" {test}"
        if "!=" in test and refuses_saying_cuda(updated.body, updated.orelse is not None):
            # `if device != "cuda": raise ...("... only on CUDA ...")`: the author's statement of what the code
            # supports; ported, the NPU would get past it into code nobody said runs there.
            reason = "this guard turns away every device but CUDA and says so; ported, it would let the NPU through"
            hint = "if the code supports the NPU, accept \"npu\" in the guard beside \"cuda\" and say so in its message"
        else:
            arm = updated.orelse if negated else updated.body
            left = cuda_api_in(arm) if arm is not None else None
            if left is None or self._left_on_purpose(original.orelse if negated else original.body):
                return updated
            reason = (f"the branch this test would take on the NPU still calls `{left.group().rstrip('(')}`, which is "
                      "left for CUDA; ported alone, the test would send the NPU into it")
            hint = "port the branch with its test (an NPU call of the same meaning), or keep both for CUDA"
        self._ctx.withdraw_changes(mark)
        self._ctx.note(original.test, changed_by[0], f"left whole: {reason}", severity="warning", hint=hint)
        return original

    def _left_on_purpose(self, arm: Optional[cst.CSTNode]) -> bool:
        """The arm is dispatch code left as written by design (another vendor's branch behind a test that is
        false on the NPU: `if "AMD" in torch.cuda.get_device_name():`): its CUDA calls are no sign of a half port."""
        guarded = self._npu_guarded
        if isinstance(arm, cst.Else):
            arm = arm.body
        if arm is None or id(arm) in guarded:
            return arm is not None
        body = getattr(arm, "body", None)
        statements = body if isinstance(body, (list, tuple)) else ()
        return bool(statements) and all(id(s) in guarded for s in statements)

    def _mark_ahead(self, node: cst.CSTNode) -> None:
        ctx = self._ctx
        for n, guard in guards_below(node, ctx.dispatch, ctx.resolve):
            self._marked.setdefault(id(n), guard)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        kind = type(original)
        flags, _, leaves = self._plans.get(kind) or self._plan_for(kind)
        if original is self._guard:
            self._guard = self._reason = None
        for fn in leaves:
            updated = fn(original, updated)
            if type(updated) is not kind:
                break  # replaced by another kind of node (or removed): later rules do not apply
        if flags & _DECISION:
            updated = self._leave_decision(original, updated)
        if flags & _BRANCH:
            updated = self._leave_branch(original, updated)  # type: ignore[arg-type]
        if flags & _SCOPE:
            self._ctx.imports.leave(original)
        return updated

    # Rules hook node types only; skipping LibCST's per-field visit_<Node>_<field> lookups (two
    # getattr calls for every field of every node) saves about a tenth of a traversal.
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None


# The nodes ImportTable.enter/leave act on (it opens a scope for a module, def or class); calling it
# for these alone spares an isinstance test through ABCMeta on every other node.
_SCOPE_TYPES = frozenset({cst.Module, cst.FunctionDef, cst.ClassDef})
_PATCH_TYPES = frozenset({cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del, cst.Call})
# A type's plan: which of the walk's concerns apply to its nodes (the bits below), the rules'
# visit_ and leave_ hooks for it.
_Plan = tuple[int, tuple[Callable, ...], tuple[Callable, ...]]
_SCOPE, _PATCH, _MARKING, _GUARD, _STATEMENT, _DECISION, _ORIGINAL, _BRANCH = 1, 2, 4, 8, 16, 32, 64, 128
# A file that assigns a torch.cuda name (`torch.cuda.empty_cache = lambda: None`) may save the original
# first and put it back after (`saved = torch.cuda.empty_cache` ... `torch.cuda.empty_cache = saved`).
_ASSIGNS_TORCH_CUDA = re.compile(r"\btorch\.cuda\.[A-Za-z_][\w.]*\s*(?::[^=\n]*)?=(?!=)")
def parse_module(source: bytes | str) -> cst.Module:
    """cst.parse_module, except that a file ending in a lone CR (old Mac line ends) keeps it when printed:
    LibCST's native parser takes only a final "\n" for a trailing newline, so the module it returns
    would drop the last "\r" of the file. Parsed without LibCST's re-validation of its own nodes
    (core/trusted_parse.py): the same tree, without the check's cost."""
    module = trusted_parse.parse_module(source)
    ends_in_cr = source.endswith("\r") if isinstance(source, str) else source.endswith(b"\r")
    if not module.has_trailing_newline and ends_in_cr:
        module = module.with_changes(has_trailing_newline=True)
    return module


def parse(data: bytes, path: str) -> cst.Module:
    if b"\x00" in data:
        raise SourceError(NUL_BYTES)
    try:
        return parse_module(data)
    except cst.ParserSyntaxError as exc:
        raise SourceError(syntax_error_message(data, exc)) from None
    except UnicodeDecodeError as exc:
        raise SourceError(decode_problem(exc)) from None
    except (LookupError, SyntaxError) as exc:  # an unknown or impossible coding line
        raise SourceError(f"cannot decode: {exc}") from None
    except RecursionError:
        raise SourceError("too deeply nested for the parser (RecursionError)") from None


def syntax_error_message(source: bytes | str, exc: cst.ParserSyntaxError) -> str:
    """`syntax error at line L, column C: WHAT`, placed where Python's own compiler places it.

    LibCST's native parser reports the token after the mistake (the line after a missing colon or an
    unclosed bracket) and line 1 for every tokenizer error (a bad indent, an unterminated string), so
    Python is asked; LibCST's position is kept only for a file Python accepts."""
    found = python_syntax_error(source)
    if found is not None:
        line, column, what = found
        return f"syntax error at line {line}, column {column}: {what}"
    # Python compiles it: no syntax error of the file's, but a limit of LibCST's native parser (5,000
    # adjacent string literals in one expression, say), which the user cannot fix by editing the line.
    return (f"valid Python that LibCST's parser cannot read (it stops at line {exc.raw_line}, column "
            f"{exc.raw_column + 1}: {exc.message.splitlines()[0] if exc.message else 'parser error'}); left as it is")


def python_syntax_error(source: bytes | str) -> Optional[tuple[int, int, str]]:
    """(line, column, message) of the first syntax error Python's compiler finds in `source`, both
    numbers 1-based; None when it finds none (or gives up: too deep, NUL bytes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like: not what is asked here
        try:
            compile(source, "<source>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:
            if exc.lineno:
                return exc.lineno, max(exc.offset or 1, 1), exc.msg
        except (ValueError, RecursionError, MemoryError, OverflowError):
            pass
    return None


def analyse_python(path: str, text: str, rule_class: type[PythonRule], options: RunOptions) -> Optional[PythonRule]:
    """A rule's state after its walk over another file of the project (`PythonContext.analyse`: what that
    file's functions do with their parameters), or None where the file does not parse. The walk is the
    conversion's own, its result dropped; it does not look further into other files itself."""
    key = (path, text, rule_class, repr(options))
    if key in _ANALYSED:
        return _ANALYSED[key]
    try:
        module = parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError, SyntaxError):
        found = None
    else:
        ctx = PythonContext(path, text, module, options)
        found = rule_class(ctx)
        try:
            transform(module, _Dispatcher([found], ctx))
        except RecursionError:
            found = None
    if len(_ANALYSED) >= 64:
        _ANALYSED.pop(next(iter(_ANALYSED)))
    _ANALYSED[key] = found
    return found


_ANALYSED: dict[tuple, Optional[PythonRule]] = {}


def convert_python(data: bytes, path: str, rule_classes: Sequence[type[PythonRule]],
                   options: RunOptions) -> tuple[bytes, list[Finding]]:
    tree = parsed_tree(data)  # the worker's parse_refusal parsed these very bytes with Python's parser already
    module = parse(data, path)
    ctx = PythonContext(path, data.decode(module.encoding, errors="replace"), module, options, tree)
    ctx.analyse = analyse_python
    ctx.torch_npu_free = frozenset(cls.ID for cls in rule_classes if not cls.NEEDS_TORCH_NPU)
    rules = [cls(ctx) for cls in rule_classes]
    try:
        dispatcher = _Dispatcher(rules, ctx)
        updated = cast(cst.Module, transform(module, dispatcher, dispatcher.skip))  # a module stays a module
        for rule in rules:
            updated = rule.finalize(module, updated)
        ctx.resolve_pending()
    except RecursionError:
        raise SourceError("expression too deeply nested to rewrite (RecursionError)") from None
    if not ctx.changed:
        return data, ctx.findings
    if ctx.needed_imports or ctx.unused_imports:
        updated = _tidy_imports(updated, ctx.needed_imports, ctx.unused_imports)
    return updated.bytes, ctx.findings


def _tidy_imports(module: cst.Module, needed, unused) -> cst.Module:
    """Remove the imports the changes left unused, as LibCST's `RemoveImportsVisitor` does (it needs scope
    analysis: only files that asked for it pay), and add those the changes need that the module lacks."""
    if unused:
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import RemoveImportsVisitor

        module = RemoveImportsVisitor(CodemodContext(), list(unused)).transform_module(module)
    return add_imports(module, needed) if needed else module

"""Files nothing changes, on Python's `ast`: the findings a LibCST pass would give, at a tenth of its cost.

A file in which no rule changes anything needs no tree that prints back, and most of what a run parses
on a real repository is such files (verl: 45 of 82, trl: 18 of 38, each a full LibCST parse and walk
for a few findings). A rule that ships an `AST_TWIN` (a class with visit_<ast node>/leave_<ast node>
hooks and `finalize`, reading an `AstContext`; a rewriting rule's twin declines where it would change
the file) is run here instead,
in one walk that keeps what the LibCST walk keeps for rules: the import table per scope, the nodes
that pick a branch by device (analysis/ast_dispatch), the names a shim patches, positions in LibCST's
columns. Nodes are visited in LibCST's order (its children are in source order; some of ast's fields
are not), so findings come out in the same order.

Exactness comes first: where `ast` cannot tell what LibCST sees, the pass declines (returns None) and
the engine takes the LibCST path, as it does for every file this pass cannot read. Both paths run over
every fixture and odd text in tests/test_ast_pass.py and must agree.
"""

from __future__ import annotations

import ast
import importlib
import io
import tokenize
import warnings
from collections.abc import Sequence
from typing import Any, Optional

from npu_port.transpiler.analysis.ast_dispatch import AstDispatch
from npu_port.transpiler.analysis.ast_source import Decline, Source, dotted, is_elif
from npu_port.transpiler.analysis.dispatch import FileDispatch
from npu_port.transpiler.analysis.patchers import PATCHER_ENDS, is_patcher, names_torch_cuda
from npu_port.transpiler.core.report import Finding
from npu_port.transpiler.core.rules import AstContext, Rule, RunOptions

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Fields that never hold a node of code (contexts, operators, names as strings): not walked.
_NO_NODE_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "type_comment", "kind", "conversion",
                             "level", "module", "is_async"})
_PATCH_TYPES = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.Call})
# Types whose children _children visits by hand: LibCST's order differs from their fields' (or blocks).
_BY_HAND = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.IfExp, ast.Call, ast.Dict,
                      ast.Lambda, ast.Subscript, ast.If})


def report(data: bytes, path: str, rule_classes: Sequence[type[Rule]], options: RunOptions,
           tree: Optional[ast.Module] = None) -> Optional[list[Finding]]:
    """The findings of `rule_classes` on the file, or None where this pass does not answer (a rule
    without a twin, text LibCST may read otherwise, anything `ast` refuses): the caller parses with
    LibCST then, which also reports every error as before."""
    names = [getattr(cls, "AST_TWIN", "") for cls in rule_classes]
    if not names or not all(names) or b"\x00" in data or data.startswith(b"\xef\xbb\xbf"):
        return None
    if options.keep_cuda and any(cls.SAFETY != "report-only" and not cls.FOLLOWS_CHANGES for cls in rule_classes):
        return None  # the device-agnostic forms of --keep-cuda are not mirrored: a rule that rewrites has the file
    twins = [_twin(name) for name in names]
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
        if tree is None:  # (the engine passes the one the worker's parse_refusal built)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(data)
    except (SyntaxError, ValueError, LookupError, UnicodeError, RecursionError, MemoryError):
        return None
    if "\r" in text and text.count("\r") != text.count("\r\n"):
        return None  # lone carriage returns: lines counted differently
    source = Source(text)
    ctx = AstContext(path, text, source, options)
    if ctx.ignores:
        return None  # `# npu-port: ignore` spans LibCST's node extents, which ast does not give
    source.tree = tree
    try:
        ctx.dispatch = AstDispatch(source, FileDispatch.of(path, text), ctx.imports.resolve)
        rules = [twin(ctx) for twin in twins]  # type: ignore[misc]
        _Walk(ctx, rules).node(tree)
        for rule in rules:
            finalize = getattr(rule, "finalize", None)  # (a twin that reports as it walks has none)
            if finalize is not None:
                finalize()
    except (Decline, RecursionError):
        return None
    return ctx.findings


def _twin(name: str) -> type:
    """The twin class a rule names ("module:Class"), imported when a file first needs it."""
    found = _TWINS.get(name)
    if found is None:
        module, _, attr = name.partition(":")
        found = _TWINS[name] = getattr(importlib.import_module(module), attr)
    return found


_TWINS: dict[str, type] = {}


class _Walk:
    """One pre-order walk in LibCST's order, running the twins' hooks and keeping the context current."""

    def __init__(self, ctx: AstContext, rules: Sequence[Any]):
        self.ctx = ctx
        self.dispatch: AstDispatch = ctx.dispatch  # type: ignore[assignment]
        self._plans: dict[type, tuple] = {}
        self._rules = rules
        self._decorator_hooks = [(getattr(r, "visit_decorator", None), getattr(r, "leave_decorator", None)) for r in rules]

    def _plan_for(self, kind: type) -> tuple:
        """What the walk does at a node of this type, worked out at its first node: whether it opens a
        scope or can patch, the twins' hooks, its generic fields (None: _children reads it by hand), and
        the dispatch's `enter` for it."""
        name = kind.__name__
        visits = tuple(getattr(r, "visit_" + name) for r in self._rules if hasattr(r, "visit_" + name))
        leaves = tuple(getattr(r, "leave_" + name) for r in self._rules if hasattr(r, "leave_" + name))
        fields = None if kind in _BY_HAND else tuple(f for f in kind._fields if f not in _NO_NODE_FIELDS)  # type: ignore[attr-defined]
        plan = self._plans[kind] = (issubclass(kind, _SCOPES), kind in _PATCH_TYPES, visits, leaves, fields,
                                    self.dispatch.enter_for(kind))
        return plan

    def node(self, node: ast.AST) -> None:
        kind = type(node)
        scope, patch, visits, leaves, fields, enter = self._plans.get(kind) or self._plan_for(kind)
        if scope:
            self.ctx.imports.enter(node)
        if patch:
            self._patch(node)
        enter(node)
        for fn in visits:
            fn(node)
        if fields is None:
            self._children(node)
        else:
            for name in fields:
                value = getattr(node, name)
                if type(value) is list:
                    if value and isinstance(value[0], ast.stmt):
                        self._block(node, name, value)
                    else:
                        for item in value:
                            if isinstance(item, ast.AST):
                                self.node(item)
                elif isinstance(value, ast.AST):
                    self.node(value)
        for fn in leaves:
            fn(node)
        self.dispatch.leave(node)
        if scope:
            self.ctx.imports.leave(node)

    def _children(self, node: ast.AST) -> None:
        """The children of the node types whose fields are not in LibCST's order (or hold blocks)."""
        if isinstance(node, _FUNCTIONS) or isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                self._decorator(decorator)
            if isinstance(node, ast.ClassDef):
                self._exprs([*node.bases, *node.keywords])
            else:
                self._arguments(node.args)
                if node.returns is not None:
                    self.node(node.returns)
            self._block(node, "body", node.body)
            return
        if isinstance(node, ast.IfExp):
            self.node(node.body)
            self.node(node.test)
            self.node(node.orelse)
            return
        if isinstance(node, ast.Call):
            self.node(node.func)
            self._exprs([*node.args, *node.keywords])
            return
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is not None:
                    self.node(key)
                self.node(value)
            return
        if isinstance(node, ast.Lambda):
            self._arguments(node.args)
            self.node(node.body)
            return
        if isinstance(node, ast.Subscript):
            self.node(node.value)
            self.dispatch.note_slice(node)
            self.node(node.slice)
            return
        if isinstance(node, ast.If):
            self.node(node.test)
            self._block(node, "body", node.body)
            orelse = node.orelse
            if len(orelse) == 1 and is_elif(self.ctx.source, orelse[0]):
                self.node(orelse[0])
            elif orelse:
                self._block(node, "orelse", orelse)
            return

    def _block(self, owner: ast.AST, field: str, body: list[ast.stmt]) -> None:
        if isinstance(owner, ast.Module):
            for stmt in body:
                self.node(stmt)
            return
        key = (id(owner), field)
        self.dispatch.enter_block(key, body, self.ctx.source.starts_line(body[0]))
        for stmt in body:
            self.node(stmt)
        self.dispatch.leave_block(key)

    def _exprs(self, nodes: list) -> None:
        for item in sorted(nodes, key=lambda n: (n.lineno, n.col_offset)):
            self.node(item)

    def _arguments(self, args: ast.arguments) -> None:
        found = [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs,
                 *([args.kwarg] if args.kwarg else []), *args.defaults, *(d for d in args.kw_defaults if d is not None)]
        self._exprs(found)

    def _decorator(self, expr: ast.expr) -> None:
        for visit, _ in self._decorator_hooks:
            if visit is not None:
                visit(expr)
        self.node(expr)
        for _, leave in self._decorator_hooks:
            if leave is not None:
                leave(expr)

    def _patch(self, node: ast.AST) -> None:
        """python_source._patch_targets: what the code assigns to, deletes or patches under torch.cuda."""
        if isinstance(node, ast.Call):
            func = node.func
            end = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if not (node.args or node.keywords) or end not in PATCHER_ENDS or not is_patcher(dotted(func) or ""):
                return
            arguments: list[Any] = [*node.args, *node.keywords]
            first = min(arguments, key=lambda n: (n.lineno, n.col_offset))
            targets = [first.value if isinstance(first, (ast.keyword, ast.Starred)) else first]
        elif isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)  # `del a, b`: LibCST's one tuple target, flattened the same
        else:
            targets = [node.target]  # type: ignore[attr-defined]
        found = [t for t in _flatten(targets) if self._names_torch_cuda(t)]
        for target in found:
            self.ctx.patched.update(id(n) for n in ast.walk(target))
        if found and isinstance(node, ast.Assign):
            self.ctx.patched.update(id(n) for n in ast.walk(node.value))

    def _names_torch_cuda(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if self.ctx.source.string_token(node) is None:
                return False  # glued literals: not LibCST's SimpleString, and no dotted name
            return names_torch_cuda(node.value)
        return names_torch_cuda(dotted(node) or "")


def _flatten(targets):
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            yield from _flatten(e.value if isinstance(e, ast.Starred) else e for e in t.elts)
        else:
            yield t

"""analysis/dispatch's guards over Python's `ast`: which nodes sit in code that picks a branch by device.

The same shapes, the same reasons, the same outermost-first marking as the LibCST walk
(core/python_source._Dispatcher), for the report-only pass (core/ast_pass). LibCST's tests read the
code of a node as LibCST renders it; here the node's text is read instead, and where the two could
differ (a comment among the parentheses, glued string literals) the file is declined (`Decline`) and
takes the LibCST path.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Optional

from npu_port.transpiler.analysis import dispatch as d
from npu_port.transpiler.analysis.ast_source import (
    COMPOUND,
    Decline,
    Source,
    dotted,
    is_elif,
    raw_value,
    single_string_token,
)
from npu_port.transpiler.analysis.dispatch import FileDispatch, Guard

_NPU_GUARD_TYPES = (ast.If, ast.IfExp, ast.List, ast.Tuple, ast.Set)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# What `enter` reads by type (_dispatch_guard's and the marks'), for enter_for.
_GUARD_TYPES = frozenset(_NPU_GUARD_TYPES)
_NVIDIA_TEST_TYPES = frozenset({ast.If, ast.IfExp, ast.BoolOp})
_MARKING_TYPES = frozenset({ast.Module, ast.Call, *_FUNCTIONS})


class AstDispatch:
    """The walk's dispatch state for one file: call `enter`/`leave` at every node, `enter_block` /
    `leave_block` around every statement list; `guarded` maps id(node) to why it is left as written."""

    def __init__(self, source: Source, shapes: FileDispatch, resolve: Callable[[ast.AST], Optional[str]]):
        self.source = source
        self.shapes = shapes
        self._resolve = resolve
        self.guarded: dict[int, Guard] = {}
        self._marked: dict[object, Guard] = {}
        self._guard: object = None  # the outermost guarded node (or block key) being walked through
        self._reason: Optional[Guard] = None
        self._slice_tuples: set[int] = set()  # tuples that are a subscript's slice (note_slice)

    @property
    def current(self) -> Optional[Guard]:
        return self._reason

    # -- the walk ----------------------------------------------------------------------------------
    def enter(self, node: ast.AST) -> None:
        if isinstance(node, ast.Module):
            self._mark(self._block_guards(node.body) if self.shapes.npu else [])
        elif isinstance(node, ast.Call):
            self._mark(self._call_guards(node))
        elif isinstance(node, _FUNCTIONS):
            self._mark(self._function_guards(node))
        if self._guard is None:
            guard = self._marked.get(id(node)) if self._marked else None
            if guard is None:
                guard = self._dispatch_guard(node)
            if guard is not None:
                self._guard, self._reason = node, guard
        if self._guard is not None:
            self.guarded[id(node)] = self._reason  # type: ignore[assignment]

    def enter_for(self, kind: type) -> Callable[[ast.AST], None]:
        """`enter` for the nodes of one type in this file: the nodes of most types (names, attributes,
        constants, most statements) neither mark nor guard anything here, and are only marked or guarded."""
        shapes = self.shapes
        may_guard = (kind in _GUARD_TYPES and shapes.npu) or (kind is ast.Compare and (shapes.npu_code or shapes.selects_npu)) \
            or kind is ast.IfExp or (kind in _NVIDIA_TEST_TYPES and shapes.nvidia_tests)
        return self.enter if may_guard or kind in _MARKING_TYPES else self._enter_unguarding

    def _enter_unguarding(self, node: ast.AST) -> None:
        """`enter` for a node that is no guard itself (enter_for)."""
        if self._guard is None:
            if self._marked:
                guard = self._marked.get(id(node))
                if guard is not None:
                    self._guard, self._reason = node, guard
                    self.guarded[id(node)] = guard
        else:
            self.guarded[id(node)] = self._reason  # type: ignore[assignment]

    def leave(self, node: ast.AST) -> None:
        if node is self._guard:
            self._guard = self._reason = None

    def enter_block(self, key: tuple[int, str], body: list[ast.stmt], indented: bool) -> None:
        """A statement list: LibCST's IndentedBlock (or one-line suite) of a compound statement."""
        if indented and self.shapes.npu:
            self._mark(self._block_guards(body))
        if self._guard is None and self._marked:
            guard = self._marked.get(key)
            if guard is not None:
                self._guard, self._reason = key, guard

    def leave_block(self, key: tuple[int, str]) -> None:
        if key == self._guard:
            self._guard = self._reason = None

    def _mark(self, found: list[tuple[object, Guard]]) -> None:
        for key, guard in found:
            self._marked.setdefault(key, guard)

    # -- dispatch.dispatch_guard -------------------------------------------------------------------
    def _dispatch_guard(self, node: ast.AST) -> Optional[Guard]:
        shapes = self.shapes
        guard = None
        if shapes.npu and isinstance(node, _NPU_GUARD_TYPES):
            guard = self._npu_guard(node)
        if guard is None and isinstance(node, ast.Compare) and (shapes.npu_code or shapes.selects_npu):
            guard = self._comparison_guard(node, shapes.npu_code)
        if guard is None and isinstance(node, ast.IfExp):
            guard = self._mapping_guard(node)
        if guard is None and shapes.nvidia_tests and isinstance(node, (ast.If, ast.IfExp, ast.BoolOp)):
            guard = self._nvidia_guard(node)
        return guard

    def _nvidia_guard(self, node: ast.AST) -> Optional[Guard]:
        source, test = self.source, d._NVIDIA_TEST
        if isinstance(node, ast.If):
            return d.NVIDIA_ONLY if any(test.search(t) for t in self._chain_texts(node)) else None
        if isinstance(node, ast.IfExp):
            return d.NVIDIA_ONLY if source.search_code(test, node.test) else None
        if not isinstance(node.op, ast.And):  # type: ignore[attr-defined]
            return None
        # `a and b and c` is one BoolOp here and LibCST's ((a and b) and c): its left operand is every
        # value but the last, and an inner one's left is part of that text, so this node answers for all.
        values = node.values  # type: ignore[attr-defined]
        if len(values) == 2:
            return d.NVIDIA_ONLY if source.search_code(test, values[0]) else None
        return d.NVIDIA_ONLY if source.search_span(test, source.start(values[0]), source.end(values[-2])) else None

    def _npu_guard(self, node: ast.AST) -> Optional[Guard]:
        if isinstance(node, ast.If):
            return d.NPU_BRANCH if any(d.NPU_WORD.search(t) for t in self._chain_texts(node)) else None
        if isinstance(node, ast.IfExp):
            return d.NPU_BRANCH if self.source.search_code(d.NPU_WORD, node) else None
        if isinstance(node, ast.Tuple) and self._bare_subscript_tuple(node):
            return None  # `d["cuda", "npu"]`: LibCST has subscript elements there, no tuple
        elements = node.elts  # type: ignore[attr-defined]
        return d.NPU_BRANCH if any(self._names_npu_value(e.value if isinstance(e, ast.Starred) else e)
                                   for e in elements) else None

    def _names_npu_value(self, node: ast.expr) -> bool:
        token = self.source.string_token(node)
        return token is not None and d.NPU_WORD.search(token) is not None

    def _bare_subscript_tuple(self, node: ast.Tuple) -> bool:
        return id(node) in self._slice_tuples and not self.source.text.startswith("(", self.source.start(node))

    def note_slice(self, node: ast.Subscript) -> None:
        """Called by the walk before it enters a subscript's slice."""
        if isinstance(node.slice, ast.Tuple):
            self._slice_tuples.add(id(node.slice))

    def _chain_texts(self, node: ast.If):
        """The text LibCST's `code(test)` searches, for each test of an if/elif chain."""
        current: Optional[ast.stmt] = node
        while isinstance(current, ast.If):
            yield self._test_text(current)
            orelse = current.orelse
            current = orelse[0] if len(orelse) == 1 and is_elif(self.source, orelse[0]) else None

    def _test_text(self, node: ast.If) -> str:
        """The text between `if` / `elif` and the colon: the test, its own parentheses and blanks (which no
        dispatch pattern reads), and the comments inside those parentheses, as LibCST's test holds them."""
        source = self.source
        text = source.text
        start = source.start(node) + (4 if is_elif(source, node) else 2)
        j = source.end(node.test)
        while j < len(text) and text[j] != ":":
            c = text[j]
            if c == "#":
                j = text.find("\n", j)
                if j == -1:
                    raise Decline("unterminated header")
            elif c in " \t\f\\\n\r)":
                j += 1
            else:
                raise Decline("unexpected text before an if's colon")
        return text[start:j]

    def _comparison_guard(self, node: ast.Compare, npu_module: bool) -> Optional[Guard]:
        source = self.source
        operands = [node.left, *node.comparators]
        tokens = [source.string_token(o) for o in operands]
        if not any(t is not None and raw_value(t).split(":")[0] == "cuda" for t in tokens):
            return None
        others = [o for o, t in zip(operands, tokens) if t is None and not self._fstring(o)]
        if npu_module:
            return d.DEVICE_COMPARISON if others else None
        return d.RESOLVER_COMPARISON if any(source.search_code(d._RESOLVERS, o) for o in others) else None

    def _fstring(self, node: ast.expr) -> bool:
        """One f-string literal (LibCST's FormattedString), not one glued to other literals."""
        if not isinstance(node, ast.JoinedStr):
            return False
        return single_string_token(self.source.segment(node))

    def _is_device_literal(self, node: ast.expr) -> bool:
        token = self.source.string_token(node)
        return token is not None and d._DEVICE_NAME.match(raw_value(token).split(":")[0]) is not None

    def _mapping_guard(self, node: ast.IfExp) -> Optional[Guard]:
        test = node.test
        if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
            return None
        left, right = test.left, test.comparators[0]
        subject = left if self._is_device_literal(right) else right if self._is_device_literal(left) else None
        if subject is None:
            return None
        source = self.source
        if not all(source.bare(n) for n in (subject, node.body, node.orelse)):
            raise Decline("a device-name mapping with parentheses or comments")
        arms = (source.segment(node.body), source.segment(node.orelse))
        return d.NAME_MAPPING if source.segment(subject) in arms else None

    # -- dispatch.guards_below ---------------------------------------------------------------------
    def _call_guards(self, node: ast.Call) -> list[tuple[object, Guard]]:
        shapes = self.shapes
        out: list[tuple[object, Guard]] = []
        if shapes.module_by_name and self._looks_up_device_module(node):
            out.append((id(node), d.DEVICE_MODULE_RESOLVER))
        if shapes.npu_code:
            out += self._dispatched_lookup_default(node)
        if shapes.registry:
            last = (dotted(node.func) or "").rsplit(".", 1)[-1]
            if d._REGISTER.search(last):
                out += [(id(k.value), d.REGISTRY_KEY) for k in node.keywords
                        if k.arg is not None and k.arg in d._DEVICE_KEYWORDS]
        if shapes.cuda_flags:
            flagged = [k.value for k in node.keywords if k.arg is not None and k.arg in d._CUDA_FLAGS]
            name = (self._resolve(node.func) or dotted(node.func) or "") if flagged else ""
            if flagged and not name.startswith(("torch.", "torch_npu.")):
                out += [(id(v), d.THIRD_PARTY_CUDA_FLAG) for v in flagged]
        return out

    def _looks_up_device_module(self, node: ast.Call) -> bool:
        if not (isinstance(node.func, ast.Name) and node.func.id == "getattr"):
            return False
        args = sorted([*node.args, *(k.value for k in node.keywords)], key=lambda a: (a.lineno, a.col_offset))
        if len(args) < 2:
            return False
        first = args[0].value if isinstance(args[0], ast.Starred) else args[0]
        second = args[1].value if isinstance(args[1], ast.Starred) else args[1]
        return dotted(first) == "torch" and self.source.string_token(second) is None

    def _dispatched_lookup_default(self, node: ast.Call) -> list[tuple[object, Guard]]:
        args = [a for a in node.args if not isinstance(a, ast.Starred)]
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(args) == 3:
            key, default = args[1], args[2]
        elif isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault") and len(args) == 2:
            key, default = args[0], args[1]
        else:
            return []
        token = self.source.string_token(key)
        if token is None or not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            return []
        name = key.value
        if self.shapes.may_compare_with_npu(name) and \
                re.search(rf"""\b{re.escape(name)}\s*(?:==|!=)\s*["'](?:npu|NPU)["']""", self.shapes.text):
            return [(id(default), d.DISPATCH_PARAMETER)]
        return []

    def _function_guards(self, node) -> list[tuple[object, Guard]]:
        shapes = self.shapes
        out: list[tuple[object, Guard]] = []
        if not (shapes.module_by_name or shapes.nvidia_tests or shapes.npu_code or shapes.registry):
            return out
        if shapes.module_by_name and self._body_search(d._TORCH_GETATTR, node):
            out.append(((id(node), "body"), d.DEVICE_MODULE_RESOLVER))
        if shapes.nvidia_tests and shapes.rocm_variables and self._body_search(d._ROCM_VARIABLES, node):
            out.append(((id(node), "body"), d.NVIDIA_ONLY))
        if shapes.npu_code or shapes.registry:
            out += self._dispatch_parameter_defaults(node)
        return out

    def _body_search(self, pattern, node) -> bool:
        """`pattern.search(code(fn.body))`: the body's statements, or, where a match could lie only in
        what LibCST's block holds beside them (the header's comment, comment lines), decline."""
        source = self.source
        found = pattern.search(source.text[source.start(node.body[0]):source.end(node.body[-1])]) is not None
        wider = pattern.search(source.text[source.start(node):source.next_statement_start(source.end(node))])
        if found != (wider is not None):
            raise Decline("a function body's text and its surroundings disagree")
        return found

    def _dispatch_parameter_defaults(self, node) -> list[tuple[object, Guard]]:
        a = node.args
        positional = [*a.posonlyargs, *a.args]
        pairs = [(p, dft) for p, dft in zip(positional[len(positional) - len(a.defaults):], a.defaults)
                 if p not in a.posonlyargs]
        pairs += [(p, dft) for p, dft in zip(a.kwonlyargs, a.kw_defaults) if dft is not None]
        if not pairs:
            return []
        if d._REGISTER.search(node.name):
            return [(id(dft), d.REGISTRY_KEY) for p, dft in pairs
                    if p.arg in d._DEVICE_KEYWORDS or p.arg.endswith("device")]
        if not self.shapes.npu_code:
            return []
        out: list[tuple[object, Guard]] = []
        for p, dft in pairs:
            if not self.shapes.may_compare_with_npu(p.arg):
                continue
            name = re.escape(p.arg)
            pattern = re.compile(rf"""\b{name}\s*(?:==|!=)\s*["'](?:npu|NPU)|["'](?:npu|NPU)["']\s*(?:==|!=)\s*{name}\b""")
            if self._body_search(pattern, node):
                out.append((id(dft), d.DISPATCH_PARAMETER))
        return out

    def _block_guards(self, body: list[ast.stmt]) -> list[tuple[object, Guard]]:
        ifs = [(s, self._npu_guard(s)) for s in body if isinstance(s, ast.If)]
        npu_ifs = [i for i, guard in ifs if guard is not None]
        if not npu_ifs:
            return []
        out: list[tuple[object, Guard]] = [(id(i), d.NPU_BRANCH) for i in npu_ifs]
        out += [(id(i), d.NPU_BRANCH) for i, guard in ifs
                if guard is None and any(d._CUDA_TEST.search(t) for t in self._chain_texts(i))]
        npu_names = set()
        for i in npu_ifs:
            npu_names |= self._names(r"\btorch\.npu\.(\w+)", i, i)
        if not npu_names:
            return out
        for group in self._lines(body):
            names = self._names(r"\btorch\.cuda\.(\w+)", group[0], group[-1])
            if names and names <= npu_names:
                out += [(id(s), d.NPU_TWIN) for s in group]
        return out

    def _names(self, pattern: str, first: ast.stmt, last: ast.stmt) -> set[str]:
        """The names `pattern` finds in LibCST's code of the statements first..last (their text, the
        comment lines above and the comment after): declined where those comments would change them."""
        source = self.source
        text, lines = source.text, source.lines
        start, end = source.start(first), source.end(last)
        names = set(re.findall(pattern, text[start:end]))
        top = first.lineno - 1
        while top > 0 and (lines[top - 1].strip() == "" or lines[top - 1].lstrip().startswith("#")):
            top -= 1
        bottom = last.end_lineno or last.lineno
        while bottom < len(lines) and (lines[bottom].strip() == "" or lines[bottom].lstrip().startswith("#")):
            bottom += 1
        wide_start = source.offset(top + 1, 0)
        wide_end = source.offset(bottom, 0) + len(lines[bottom - 1])
        if set(re.findall(pattern, text[wide_start:wide_end])) != names:
            raise Decline("comments around a statement name torch.cuda / torch.npu")
        return names

    def _lines(self, body: list[ast.stmt]):
        """The simple statements of a block grouped as LibCST's SimpleStatementLines (`a; b` is one)."""
        group: list[ast.stmt] = []
        for stmt in body:
            if isinstance(stmt, _COMPOUND):
                if group:
                    yield group
                group = []
                continue
            if group and stmt.lineno == group[-1].end_lineno and \
                    ";" in self.source.text[self.source.end(group[-1]):self.source.start(stmt)]:
                group.append(stmt)
                continue
            if group:
                yield group
            group = [stmt]
        if group:
            yield group


_COMPOUND = (*COMPOUND, *_FUNCTIONS, ast.ClassDef)  # what is no SimpleStatementLine in LibCST

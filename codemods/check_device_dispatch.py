"""`broken-device-dispatch`: converted code whose device dispatch can no longer tell the devices apart."""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.dispatch import chain_tests, code
from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.analysis.source_facts import LiteralContext
from npu_port.transpiler.core.rules import PythonRule

_CAPABILITY = "torch.npu.get_device_capability"
_RAY_COLLECTIVE = "ray.util.collective"
_NPU_VALUES = frozenset({"npu", "NPU", "hccl", "HCCL"})


def _npu_value(node: cst.BaseExpression) -> Optional[str]:
    value = string_value(node)
    return value if value is not None and value.split(":")[0] in _NPU_VALUES else None


def _ast_npu_value(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(":")[0] in _NPU_VALUES:
        return node.value
    return None


# The beginnings of a literal that implicit concatenation may complete into an NPU value (`"np" "u"`).
_NPU_HEADS = frozenset(v[:i] for v in _NPU_VALUES for i in range(1, len(v)))
_HCCL_HEADS = frozenset("hccl"[:i] for i in range(1, len("hccl")))
_HCCL_WORDS = _HCCL_HEADS | {"hccl"}


def _may_hold_two_npu_values(strings: tuple[str, ...]) -> bool:
    """Whether the file's literals (`SourceFacts.strings`, unsure facts aside) may hold two NPU values
    or one "hccl" in any case, which every shape `_may_report` answers needs (two arms, two tests, two
    entries; the value Ray is given). A literal the parser glues from pieces starts with its first
    non-empty piece, which is a value or a value's beginning: the latter alone makes the answer yes."""
    count = 0
    for s in strings:  # every literal of every file that names the NPU: the short test first
        if len(s) <= 4 and (s in _NPU_HEADS or s.lower() in _HCCL_WORDS):
            return True
        if s in _NPU_VALUES or (":" in s and s.split(":", 1)[0] in _NPU_VALUES):
            count += 1
            if count == 2:
                return True
    return False


def _may_report_lexically(literals: tuple[LiteralContext, ...], names_collective: bool) -> bool:
    """`_may_report`'s shapes read from the tokens beside each literal (a looser test, no `ast`): an NPU
    value twice after `==`; once before a comma and again after one (two entries of a collection: the
    later one follows a comma, the earlier one a comma follows); before `if`, then after `else`;
    "hccl" in any case in a file that may name ray.util.collective. Literals the parser glues into one (`"np" "u"`) make
    the answer yes where their first piece may begin such a value, and are no value otherwise."""
    compared: set[str] = set()
    listed: set[str] = set()
    if_arms: set[str] = set()
    for k, literal in enumerate(literals):
        if literal.glued or (k + 1 < len(literals) and literals[k + 1].glued):
            if not literal.glued and _may_begin_a_value(literals, k):
                return True
            continue
        for text in literal.texts:
            if names_collective and text.lower() == "hccl":
                return True
            if text.split(":")[0] not in _NPU_VALUES:
                continue
            if literal.before == "==":
                if text in compared:
                    return True
                compared.add(text)
            if literal.before == "," and text in listed or literal.before == "else" and text in if_arms:
                return True
            if literal.after == ",":
                listed.add(text)
            if literal.after == "if":
                if_arms.add(text)
    return False


def _may_begin_a_value(literals: tuple[LiteralContext, ...], first: int) -> bool:
    """Whether the glued literal whose first piece is `literals[first]` may be an NPU value or "hccl":
    its first non-empty piece is one, or begins one."""
    for literal in literals[first:]:
        if literal is not literals[first] and not literal.glued:
            return False  # all pieces empty
        if literal.texts[0]:
            return any(t.split(":")[0] in _NPU_VALUES or t in _NPU_HEADS or t.lower() in _HCCL_WORDS
                       for t in literal.texts)
    return False


def _may_report(nodes: tuple[ast.AST, ...], names_collective: bool) -> bool:
    """Whether the file has a shape the rule reports: an over-approximation on the file's `ast`.
    `names_collective`: whether its code may name ray.util.collective (`SourceFacts.may_name`), which a
    call the rule reports "hccl" in resolves to."""
    tested: set[tuple[str, str]] = set()
    for node in nodes:
        if isinstance(node, ast.IfExp):
            value = _ast_npu_value(node.body)
            if value is not None and isinstance(node.orelse, ast.Constant) and node.orelse.value == value:
                return True
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            value = _ast_npu_value(node.comparators[0])
            if value is not None:
                key = (ast.dump(node.left), value)
                if key in tested:
                    return True
                tested.add(key)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            named = [v for e in node.elts if (v := _ast_npu_value(e)) is not None]
            if len(named) != len(set(named)):
                return True
        elif names_collective and isinstance(node, ast.Call) and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.lower() == "hccl"
                for a in [*node.args, *(k.value for k in node.keywords)]):
            return True
    return False


class BrokenDeviceDispatch(PythonRule):
    """Reports device dispatch that a CUDA->NPU rewrite (by hand or by a tool) has made one-sided.

    What it does:
        In code that is meant to run on the NPU already, reports as errors:
        - a conditional whose two arms are the same NPU value: `"hccl" if on_gpu else "hccl"`;
        - an `if`/`elif` chain, or neighbouring `if`s, that test the same value against the NPU's name
          twice (`if name == "npu": ... if name == "npu": ...`): the former CUDA branch now runs on the
          NPU as well;
        - a list, tuple or set of devices holding the NPU twice (`device=["npu", "npu"]`): the CUDA entry
          of a registration is gone;
        - `torch.npu.get_device_capability()` unpacked or indexed: it returns None unless
          TORCH_NPU_DEVICE_CAPABILITY is set (torch-npu 2.14), so the line raises or misleads;
        - `"hccl"` given to `ray.util.collective`: Ray 2.60 accepts only nccl and gloo there and raises.

    Why:
        These are the marks of a CUDA branch renamed beside the NPU branch it sat next to. The code
        runs, picks the wrong branch, and nothing says so.

    Example:
            backend = "hccl" if get_device_name() == "npu" else "hccl"    # error
        should read:
            backend = "nccl" if get_device_name() == "cuda" else "hccl"

    Fix safety:
        Report-only: restore the CUDA side of the dispatch (see the original code) or remove the branch.
    """

    ID = "broken-device-dispatch"
    SAFETY = "report-only"
    GROUP = "check"
    # Each report is about a string literal whose value begins with an NPU value (`"npu"`, `"hccl:0"`; in
    # any case for Ray, whose `collective` module the file then names), or about get_device_capability.
    # Such a literal's text begins with that value, or with an escape (`\x6e`, `\156`, `\N{...}`, a line
    # continuation) among its first four characters, which the last pattern lets through.
    TRIGGERS = ("get_device_capability",)
    TRIGGER_PATTERNS = (*(rf"""{v}(?<=["']{v})""" for v in ("npu", "NPU", "hccl", "HCCL")),
                        r"collective(?<![A-Za-z0-9_]collective)(?![A-Za-z0-9_])",
                        r"""\\(?=[xuUN0-7\r\n])(?:(?<=["']\\)|(?<=["'][^"'\\\n]\\)|(?<=["'][^"'\\\n]{2}\\)"""
                        r"""|(?<=["'][^"'\\\n]{3}\\))""")

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Each report is about a string literal naming the NPU (or "hccl" in any case, for Ray), or a call
        # resolving to torch.npu.get_device_capability: without either the file costs no parse.
        if facts.has_all_words("torch", "npu", "get_device_capability"):
            return True
        if not facts.any_string(lambda s: s.split(":")[0] in _NPU_VALUES or s.lower() == "hccl"):
            return False
        if not facts.unsure and not _may_hold_two_npu_values(facts.strings):
            return False
        # Ray's shape: the call given "hccl" resolves to ray.util.collective, which spells every part of
        # that name in the code (an import, an attribute chain), whatever the aliases.
        names_collective = facts.may_name(_RAY_COLLECTIVE)
        literals = facts.literals
        if literals is not None and not _may_report_lexically(literals, names_collective):
            return False
        # Then the shapes it reports, looked for on Python's ast, more loosely than the rule does (any two
        # equal NPU tests in the file, any call given "hccl" in a file that imports Ray): a converted file
        # names the NPU all over, and most have none of them.
        nodes = facts.nodes
        return nodes is None or _may_report(nodes, names_collective)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        value = _npu_value(node.body)
        if value is not None and value == string_value(node.orelse):
            self.report(node, f'both arms of this conditional are "{value}": the other device lost its value',
                        severity="error", hint="restore the other device's value (before conversion it was the "
                                               "CUDA one: \"cuda\" / \"nccl\")")

    def _tests_npu_twice(self, tests: list[cst.BaseExpression]) -> None:
        seen: set[str] = set()
        for test in tests:
            if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 \
                    or not isinstance(test.comparisons[0].operator, cst.Equal):
                continue
            value = _npu_value(test.comparisons[0].comparator)
            if value is None:
                continue
            key = f'{code(test.left)} == "{value}"'
            if key in seen:
                self.report(test, f"`{key}` is tested twice: the branch that handled the other device now runs "
                                  "on the NPU too", severity="error",
                            hint="restore the CUDA comparison of one of the two branches")
            seen.add(key)

    def visit_If(self, node: cst.If) -> None:
        self._tests_npu_twice(list(chain_tests(node)))

    def _block(self, body) -> None:
        tests = [t for s in body if isinstance(s, cst.If) for t in [s.test]]
        if len(tests) > 1:
            self._tests_npu_twice(tests)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block(node.body)

    def visit_Module(self, node: cst.Module) -> None:
        self._block(node.body)

    def _collection(self, node) -> None:
        values = [_npu_value(e.value) for e in node.elements]
        named = [v for v in values if v is not None]
        if len(named) != len(set(named)):
            self.report(node, "this collection names the NPU twice: the entry for the other device is gone",
                        severity="error", hint="restore the CUDA entry (\"cuda\")")

    visit_List = visit_Tuple = visit_Set = _collection  # type: ignore[assignment]

    # Compared with SM numbers (`>= (8, 0)`) it is cuda-version-probes' warning, not reported twice here.
    def _capability_use(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Call) and self.ctx.resolve(node.func) == _CAPABILITY:
            self.report(node, "`torch.npu.get_device_capability()` returns None unless TORCH_NPU_DEVICE_CAPABILITY "
                              "is set: unpacking or indexing it fails", severity="error",
                        hint="test the feature itself (torch.npu.is_bf16_supported(), try/except) instead of SM "
                             "numbers")

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self._capability_use(node.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._capability_use(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve(node.func) or ""
        if not name.startswith(_RAY_COLLECTIVE + "."):
            return
        for arg in node.args:
            value = string_value(arg.value)
            if value is not None and value.lower() == "hccl":
                self.report(arg.value, f"`{name}` does not know the \"{value}\" backend (Ray 2.60: nccl and gloo "
                                       "only) and raises", severity="error",
                            hint="register an HCCL group with ray.util.collective.backend_registry."
                                 "register_collective_backend, or use torch.distributed with backend=\"hccl\"")

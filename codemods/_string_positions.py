"""Base for rules that rewrite string values in one kind of position (device, AMP device type, backend)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from typing import ClassVar, Optional

import libcst as cst

from npu_port.codemods._device_agnostic import DeviceAgnostic, LiteralOnly, parenthesized
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.positions import PositionFinder, PositionPolicy, string_leaves
from npu_port.transpiler.analysis.project_devices import imports_from_project, project_function
from npu_port.transpiler.core.cst_walk import transform, visit
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table


class StringPositionRule(LiteralOnly, PythonRule):
    POSITION: ClassVar[str]  # section of positions.yaml

    def __init__(self, ctx):
        super().__init__(ctx)
        policy = PositionPolicy.from_data(load_table(ctx.target, "positions")[self.POSITION])
        self.finder = PositionFinder(policy, ctx.resolve)
        self.finder.bound = lambda name: name in self._scopes[-1].bound or name in self._scopes[0].bound
        self._marked: set[int] = set()
        self._operands: set[int] = set()  # strings that are operands of a comparison or an operator
        # Local variables: `loc = f"cuda:{rank}"` ... `torch.load(p, map_location=loc)`. The assignment
        # is seen before the use, so its strings are held until the end of the scope decides.
        self._scopes: list[_LocalFlow] = [_LocalFlow()]
        # The file's own functions: `def average(x, dev): ... torch.zeros(n, device=dev)` makes `dev` a
        # position, so `average(x, "cuda")` and a default `dev="cuda"` are too. Call sites and defaults
        # are held until the end of the module, when every function has been seen.
        self._signatures: dict[str, Optional[_Signature]] = {}  # None: defined twice, not followed
        self._held_args: dict[int, tuple] = {}  # id(original string) -> ("call", f, index, kw) | ("param", f, p)
        self._deferred: dict[int, tuple] = {}  # id(updated string) -> (key, new node, original node)
        self._returning: set[str] = set()  # the file's functions whose result is used in a position
        self._expected: list[Optional[str]] = []  # per `with`: what an expected error quotes (visit_With)

    @staticmethod
    def new_text(text: str) -> Optional[str]:
        """The target spelling of a string's text (or its leading part), or None to leave it."""
        raise NotImplementedError

    def agnostic_value(self, node, agnostic: DeviceAgnostic) -> Optional[cst.BaseExpression]:
        """--keep-cuda: the expression that reads as the string does on each device. By default the
        explicit choice `<target spelling> if <NPU> else <string>`; rules with a named form override."""
        new = self._converted(node)
        return agnostic.choose(new, node) if new is not None else None

    def _portable(self, original, updated):
        """The device-agnostic form of a string's change, for PythonRule.rewrite (None: a literal must stay)."""
        def form():
            if self.literal_only(original):
                return None
            value = self.agnostic_value(updated, self.agnostic)
            # `x.type == "cuda"` -> `x.type == (a if c else b)`: unparenthesized, the comparison would
            # become the conditional's body.
            return parenthesized(value) if value is not None and id(original) in self._operands else value
        return form

    @property
    def agnostic(self) -> DeviceAgnostic:
        return DeviceAgnostic.of(self.ctx)

    def _replacement(self, original, updated, new) -> Optional[cst.CSTNode]:
        """What a held string (one that flows into a position) becomes: `new`, or with --keep-cuda its
        device-agnostic form; None (with a warning) where it has none."""
        if not self.ctx.options.keep_cuda:
            return new
        form = self._portable(original, updated)()
        if form is None:
            self.keeps_cuda(original, f"{_text_of(original)} -> {_text_of(new)}")
        return form

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Only literals whose own text new_text changes are ever rewritten (or noted in an NPU branch), and
        # only in a file that spells one of the policy's positions (a list of language names holding "cuda").
        return facts.any_string(lambda s: cls.new_text(s) not in (None, s)) \
            and (_Sinks.of(options.target, cls.POSITION).spelled_in(facts) or imports_from_project(facts))

    def _mark(self, nodes, at: cst.CSTNode) -> None:
        # A variable used in code left as written (dispatch: `if device == "cuda"` beside an NPU branch) is
        # no position: a value passed in for it must keep the spelling that code compares with.
        guarded = self.ctx.guard_of(at) is not None
        for node in nodes:
            if isinstance(node, cst.Name):
                if not guarded:
                    self._scopes[-1].used.add(node.value)
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
                self._returning.add(node.func.value)  # a call of a plain name (string_leaves)
            else:
                self._marked.add(id(node))

    def visit_Return(self, node: cst.Return) -> None:
        # `def get_device(): return "cuda"` used as `device=get_device()`: held until the module's end.
        signature = self._scopes[-1].signature
        if signature is not None and node.value is not None:
            self._hold_argument(node.value, ("return", signature.name))

    # -- local variables that carry a device/backend string into a position --------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        flow = _LocalFlow()
        if len(self._scopes) == 1:  # a function of the module (not nested in another): calls can be followed
            name = node.name.value
            flow.signature = _Signature(name, [p.name.value for p in (*node.params.posonly_params, *node.params.params)],
                                        {p.name.value for p in node.params.kwonly_params})
            self._signatures[name] = None if name in self._signatures else flow.signature
            for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
                if param.default is not None:
                    self._hold_argument(param.default, ("param", name, param.name.value))
        self._scopes.append(flow)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        flow = self._scopes.pop()
        if flow.signature is not None:
            flow.signature.positions = {p for p in flow.signature.all_params() if p in flow.used}
            if flow.signature.positions:
                # A parameter the body still compares with the old spelling (a test left whole with its
                # branch: `if device != "cuda": raise ...`) picks a branch by it: a caller's value passed
                # in must keep the spelling that comparison expects.
                flow.signature.positions -= self._compared_as_written(updated.body, flow.signature.positions)
        return self._settle(flow, updated)

    def _compared_as_written(self, body: cst.CSTNode, names: set[str]) -> set[str]:
        found: set[str] = set()
        rule = self

        class _Comparisons(cst.CSTVisitor):
            def visit_Comparison(self, node: cst.Comparison) -> None:
                operands = [node.left, *(c.comparator for c in node.comparisons)]
                named = {o.value for o in operands if isinstance(o, cst.Name) and o.value in names}
                if named and any(isinstance(o, cst.SimpleString) and rule._converted(o) is not None for o in operands):
                    found.update(named)

        visit(body, _Comparisons())
        return found

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        return self._settle_arguments(self._settle(self._scopes.pop(), updated))

    # -- strings passed to the file's own functions ---------------------------------------------
    def _hold_argument(self, value: cst.BaseExpression, key: tuple) -> None:
        for leaf in string_leaves(value):
            if not isinstance(leaf, (cst.Name, cst.Call)) and id(leaf) not in self._marked \
                    and self._converted(leaf) is not None:
                self._held_args.setdefault(id(leaf), key)

    def _hold_call(self, node: cst.Call) -> None:
        if not isinstance(node.func, cst.Name) or any(a.star for a in node.args):
            return
        # A function imported from the project itself is followed into its module (_project_signature).
        how = "call" if self.ctx.imports.binding(node.func.value) is None else "import"
        if how == "import" and self.ctx.analyse is None:
            return
        index = 0
        for arg in node.args:
            if arg.keyword is None:
                self._hold_argument(arg.value, (how, node.func.value, index, None))
                index += 1
            else:
                self._hold_argument(arg.value, (how, node.func.value, None, arg.keyword.value))

    def _project_signature(self, local: str) -> Optional[_Signature]:
        """The signature, with the parameters its body uses in a position, of the project function the file
        imports as `local` (the same rule's walk over that function's module), or None."""
        found = project_function(self.ctx.path, self.ctx.text, local)
        if found is None or self.ctx.analyse is None:
            return None
        other = self.ctx.analyse(found[0], found[1], type(self), self.ctx.options)
        return other._signatures.get(found[2]) if isinstance(other, StringPositionRule) else None

    def _settle_arguments(self, updated):
        todo = {}
        imported: dict[str, Optional[_Signature]] = {}
        for i, (key, new, original) in self._deferred.items():
            if key[0] == "import":
                if key[1] not in imported:
                    imported[key[1]] = self._project_signature(key[1])
                how = flow_into_position(imported, set(), ("call", *key[1:]))
                how = how and f"{how}, defined in {os.path.basename(project_function(self.ctx.path, self.ctx.text, key[1])[0])}"  # type: ignore[index]
            else:
                how = flow_into_position(self._signatures, self._returning, key)
            if how is None or self.ctx.left_as_is(original, self.ID):
                continue
            form = self._replacement(original, original, new)
            if form is None:
                continue
            todo[i] = form
            self.ctx.note(original, self.ID, f"{_text_of(original)} -> {_text_of(form)} (flows into a {self.POSITION} "
                                             f"position through {how})", kind="change")
        return transform(updated, _ReplaceStrings(todo)) if todo else updated

    def _bind(self, targets, value) -> None:
        """`d = torch.device("cuda", i)`: `d` holds a device, so `d.type == "cuda"` and `str(d).startswith("cuda:")`
        compare one (the string converts with the device, or the branch would flip)."""
        if len(targets) == 1 and isinstance(targets[0], cst.Name) and self.finder.produces(value):
            self._scopes[-1].bound.add(targets[0].value)

    def _hold(self, targets, value) -> None:
        if len(targets) == 1 and isinstance(targets[0], cst.Name) and value is not None:
            for leaf in string_leaves(value):
                if not isinstance(leaf, cst.Name) and id(leaf) not in self._marked:
                    self._scopes[-1].held.setdefault(id(leaf), targets[0].value)

    def _settle(self, flow: _LocalFlow, updated):
        todo = {i: new for i, (var, new, _) in flow.rewrites.items() if var in flow.used}
        if not todo:
            return updated
        for i, (var, new, original) in flow.rewrites.items():
            form = self._replacement(original, original, new) if i in todo and not self.ctx.left_as_is(original, self.ID) \
                else None
            if form is not None:
                todo[i] = form
                self.ctx.note(original, self.ID, f"{_text_of(original)} -> {_text_of(form)} (flows into a position through `{var}`)",
                              kind="change")
            else:
                todo.pop(i, None)
        return transform(updated, _ReplaceStrings(todo))

    def visit_Call(self, node: cst.Call) -> None:
        self._visit_call(node)
        self._hold_call(node)

    def _visit_call(self, node: cst.Call) -> None:
        why = self.finder.excluded(node)
        if why:
            callee = self.ctx.resolve(node.func)
            for leaf in self.finder.argument_leaves(node):
                if not isinstance(leaf, cst.Name) and self._converted(leaf) is not None:
                    self.report(leaf, f"{_text_of(leaf)} left as is: `{callee}` takes no NPU {self.POSITION}",
                                hint=why)
            return
        leaves = list(self.finder.in_call(node))
        keyed = _dict_keys_among(node, {id(x) for x in leaves}) if any(isinstance(a.value, cst.Dict) for a in node.args) \
            else set()
        for leaf in leaves:
            value = leaf.evaluated_value if isinstance(leaf, cst.SimpleString) else None
            if value in keyed and self._converted(leaf) is not None:
                # `backend="nccl", engine_kwargs={"nccl": {...}}`: the value and its key go together.
                self.report(leaf, f"{_text_of(leaf)} left as is: the same call keys a dict by it; rename the value "
                                  "and the key together", severity="info")
                leaves = [x for x in leaves if x is not leaf]
        self._mark(leaves, node)

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = [t.target for t in node.targets]
        self._mark(self.finder.in_assign(targets, node.value), node)
        self._hold(targets, node.value)
        self._bind(targets, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._mark(self.finder.in_assign([node.target], node.value), node)
        self._bind([node.target], node.value)
        self._mark(self.finder.in_annotation(self.finder.setting_name(node.target), node.annotation), node)

    def visit_Param(self, node: cst.Param) -> None:
        self._mark(self.finder.in_param(node), node)
        self._mark(self.finder.in_annotation(node.name.value, node.annotation), node)

    def visit_Dict(self, node: cst.Dict) -> None:
        self._mark(self.finder.in_dict(node), node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._operands.update(id(o) for o in (node.left, *(c.comparator for c in node.comparisons)))
        self._mark(self.finder.in_comparison(node), node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._operands.update((id(node.left), id(node.right)))  # "cuda:" + str(i)

    def _converted(self, node):
        """The node with its text in the target spelling, or None when it has nothing to change."""
        if not isinstance(node, (cst.SimpleString, cst.FormattedString)):
            return None
        if isinstance(node, cst.SimpleString):
            if "b" in node.prefix.lower():
                return None
            new = self.new_text(node.raw_value)
            if new is None or new == node.raw_value:
                return None
            return node.with_changes(value=f"{node.prefix}{node.quote}{new}{node.quote}")
        if not node.parts or not isinstance(node.parts[0], cst.FormattedStringText):
            return None
        first = node.parts[0]
        new = self.new_text(first.value)
        if new is None or new == first.value:
            return None
        return node.with_changes(parts=[first.with_changes(value=new), *node.parts[1:]])

    # -- a test's call and the error it expects ------------------------------------------------
    def visit_With(self, node: cst.With) -> None:
        # `with pytest.raises(E, match="... cuda:0 ...")` / `assertRaisesRegex(E, "...")`: the strings the
        # expected error quotes (each literal's text, lower case), for the strings of the body.
        items = [i.item for i in node.items]
        if any(isinstance(i, cst.Call) and "aises" in (dotted_name(i.func) or "") for i in items):
            quoted = " ".join(s.lower() for i in items for s in _strings_in(i))
            self._expected.append(quoted)
        else:
            self._expected.append(None)

    def leave_With(self, original: cst.With, updated: cst.With):
        self._expected.pop()
        return updated

    def _quoted_by_expected_error(self, node) -> bool:
        """The string's text appears in the message a surrounding `raises` expects: ported alone, the call
        would raise with the NPU's spelling and the match would fail. The two go together, by hand."""
        if not isinstance(node, cst.SimpleString):
            return False
        text = node.raw_value.lower()
        if not any(e and re.search(rf"(?<![\w:]){re.escape(text)}(?![\w:])", e) for e in self._expected):
            return False
        self.report(node, f"{_text_of(node)} left as is: the error this test expects quotes it; ported alone, "
                          "the call would name the NPU's and the expected message would not match",
                    hint="port the call and the expected message together, by hand")
        return True

    def _leave_string(self, original, updated):
        key = id(original)
        if self._expected and (key in self._marked or key in self._held_args or key in self._scopes[-1].held) \
                and self._converted(original) is not None and self._quoted_by_expected_error(original):
            return updated
        if id(original) in self._marked:
            new = self._converted(updated)
            if new is not None:
                return self.rewrite(original, updated, new, f"{_text_of(original)} -> {_text_of(new)}",
                                    portable=self._portable(original, updated))
            return updated
        key = self._held_args.get(id(original))
        if key is not None:
            new = self._converted(updated)
            if new is not None:
                self._deferred[id(updated)] = (key, new, original)
        var = self._scopes[-1].held.get(id(original))
        if var is not None:
            new = self._converted(updated)
            if new is not None:
                self._scopes[-1].rewrites[id(updated)] = (var, new, original)
        return updated

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString):
        return self._leave_string(original, updated)

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString):
        return self._leave_string(original, updated)


def _strings_in(node: cst.CSTNode) -> list[str]:
    """The text of every string literal under `node` (f-strings: their literal parts)."""
    found: list[str] = []

    class _Collect(cst.CSTVisitor):
        def visit_SimpleString(self, n: cst.SimpleString) -> None:
            found.append(n.raw_value)

        def visit_FormattedStringText(self, n: cst.FormattedStringText) -> None:
            found.append(n.value)

    visit(node, _Collect())
    return found


@dataclass(frozen=True)
class _Sinks:
    """How a file spells the positions of a policy, for the scouts. Each string PositionFinder yields sits in
    a setting (named by a code word: a keyword, target, parameter or compared name; or by a string: a dict
    key, a subscript, an argparse option, a looked-up name), a call the imports resolve to one of the
    policy's callees, a method call (`.to(`) or a test's stand-in (`return_value=`); a string that flows
    through variables and the file's own functions ends in one of these too."""
    names: frozenset[str]  # settings and compared names, lower case (names_setting compares so)
    suffixes: tuple[str, ...]  # settings that a name may end with
    callees: tuple[str, ...]  # dotted names (or the module of `x.*`) some call must resolve to
    methods: Optional[re.Pattern]  # `.name` in the code, line continuations included
    stand_ins: bool  # the policy follows patched return values

    @staticmethod
    @cache
    def of(target: str, position: str) -> _Sinks:
        policy = PositionPolicy.from_data(load_table(target, "positions")[position])
        names = {s.lower() for s in (*policy.settings, *policy.compared_with) if not s.startswith("_")}
        callees = [c.removesuffix(".*") for c in (*policy.positional, *policy.not_positions, *policy.returned_by)]
        methods = "|".join(re.escape(m) for m in policy.methods)
        return _Sinks(frozenset(names), tuple(s for s in policy.settings if s.startswith("_")), tuple(callees),
                      re.compile(rf"\.[\s\\]*(?:{methods})(?![A-Za-z0-9_])") if methods else None,
                      bool(policy.returned_by))

    def spelled_in(self, facts) -> bool:
        if facts.unsure or not self.names.isdisjoint(facts.words):
            return True
        if any(facts.may_name(c) for c in self.callees) or (self.stand_ins and facts.has_word("return_value")):
            return True
        if self.methods is not None and facts.search_code(self.methods):
            return True
        # A string may name a setting whole (a dict key, `getattr(x, "device")`) or as the last part of a patch
        # target (`monkeypatch.setattr("pkg.utils.device_type", "cuda")`).
        return any(self._names_setting(w) for w in facts.words) or facts.any_string(
            lambda s: self._names_setting(s.rsplit(".", 1)[-1]))

    def _names_setting(self, name: str) -> bool:
        name = name.lstrip("-").replace("-", "_").lower()  # as PositionPolicy.names_setting reads a name
        return name in self.names or name.endswith(self.suffixes)


def flow_into_position(signatures: dict[str, Optional[_Signature]], returning: set[str], key: tuple) -> Optional[str]:
    """How a held string reaches a position through the file's own functions, for the message (`what f()
    returns`, `` `f(dev)` ``), or None where it does not: `key` is ("return", f), ("param", f, name) or
    ("call", f, index, keyword), `returning` the functions whose result is used in a position."""
    signature = signatures.get(key[1])
    if signature is None:
        return None
    if key[0] == "return":
        return f"what `{signature.name}()` returns" if key[1] in returning else None
    if key[0] == "param":
        param = key[2]
    else:
        _, _, index, keyword = key
        if index is not None:
            param = signature.params[index] if index < len(signature.params) else None
        else:
            param = keyword if keyword in signature.all_params() else None
    return f"`{signature.name}({param})`" if param in signature.positions else None


class _Signature:
    """A module-level function's parameters, and those its body uses in a position."""

    def __init__(self, name: str, params: list[str], kwonly: set[str]):
        self.name = name
        self.params = params  # positional, in order
        self.kwonly = kwonly
        self.positions: set[str] = set()

    def all_params(self) -> set[str]:
        return {*self.params, *self.kwonly}


class _LocalFlow:
    """Per scope: variables used in a position, held strings assigned to plain variables, and variables
    that hold a value of the position's kind."""

    def __init__(self):
        self.signature: Optional[_Signature] = None
        self.used: set[str] = set()
        self.held: dict[int, str] = {}  # id(original string) -> variable
        self.rewrites: dict[int, tuple] = {}  # id(updated string) -> (variable, new node, original node)
        self.bound: set[str] = set()  # variables assigned a value of the position's kind (PositionFinder.bound)


class _ReplaceStrings(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, cst.CSTNode]):
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original, updated):
        return self.replacements.get(id(original), updated)


def _text_of(node) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _dict_keys_among(call: cst.Call, positions: set[int]) -> set[str]:
    """The string keys of the dict displays given as a call's arguments, except dicts that are positions
    themselves (`map_location={"cuda:1": "cuda:0"}`: keys and values are devices alike)."""
    keys: set[str] = set()
    for arg in call.args:
        if isinstance(arg.value, cst.Dict) and not any(
                isinstance(e, cst.DictElement) and id(e.value) in positions for e in arg.value.elements):
            for element in arg.value.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                    key = element.key.evaluated_value
                    if isinstance(key, str):
                        keys.add(key)
    return keys

"""`cuda-only-deps`: setup.py requirements and Ray runtime_env `pip` lists that depend on packages with
no Ascend build."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from npu_port.codemods._cuda_packages import match_requirement, message
from npu_port.transpiler.core.cst_walk import visit
from npu_port.transpiler.core.rules import PythonRule

_SETUP_CALLS = {"setuptools.setup", "distutils.core.setup"}
_REQUIREMENT_KEYWORDS = {"install_requires", "setup_requires", "tests_require", "extras_require"}
_RUNTIME_ENV_CLASSES = ("ray.runtime_env.RuntimeEnv", "ray.runtime_env.runtime_env.RuntimeEnv")
# Methods that add to a module-level list, set or dict of requirements.
_GROWERS = frozenset({"append", "extend", "update", "insert", "add"})


def _bound_name(target: cst.BaseExpression) -> Optional[str]:
    """The module-level name an assignment target binds or adds to: `R`, `R["gpu"]` (an entry of R)."""
    if isinstance(target, cst.Subscript):
        target = target.value
    return target.value if isinstance(target, cst.Name) else None


def _returns(body: cst.BaseSuite) -> list[cst.BaseExpression]:
    """The values a function body returns, outside the functions and classes it defines."""
    found: list[cst.BaseExpression] = []

    class Returns(cst.CSTVisitor):
        def visit_Return(self, node: cst.Return) -> None:
            if node.value is not None:
                found.append(node.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    visit(body, Returns())
    return found


def _string(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


class CudaOnlyDeps(PythonRule):
    """Reports Python-declared dependencies with no Ascend build: setup.py and Ray runtime_env pip lists.

    What it does:
        Reads the requirements `setup(...)` declares (`install_requires`, `setup_requires`,
        `tests_require`, `extras_require`), as literals or through what the module binds to the names
        they are built from: assignments, `+=`, `R["extra"] = ...`, `R.append(...)`, the results of the
        module's own functions, lookups in a table and comprehensions over one (`deps["trl"]` with
        `deps = {... for x in _deps}`, the layout transformers' setup.py made common); lookup keys and
        function arguments are not read as requirements. Also the `pip` list of every runtime_env written in Python (a dict
        with a `"pip"` key, its `{"packages": [...]}` form, `RuntimeEnv(pip=[...])`). Each
        requirement of a distribution in codemods/data/<target>/cuda_only_packages.yaml
        (`flash-attn`, `cupy-cuda12x`, `bitsandbytes`, `nvidia-*`, `triton` -> `triton-ascend`, ...) is
        reported where it is written.

    Why:
        `pip install .` (or every Ray worker's runtime_env) then fails on the NPU host or installs
        CUDA libraries nothing there can load, at install time or at the start of every job.

    Example:
        GPU_REQUIRES = ["liger-kernel", "flash-attn"]         ->  unchanged; two warnings
        _deps = ["bitsandbytes>=0.43", "torch"]; deps = {re.split("[<>=]", d)[0]: d for d in _deps}
        setup(install_requires=[deps["bitsandbytes"]])         ->  unchanged; warning at "bitsandbytes>=0.43"
        ray.init(runtime_env={"pip": ["cupy-cuda12x"]})       ->  unchanged; warning

    Fix safety:
        Report-only: which dependency replaces one (or whether it can simply go) is a decision.
    """

    ID = "cuda-only-deps"
    SAFETY = "report-only"
    # `pip` as a word (the scout's word or whole string), not in `pipeline`.
    TRIGGERS = ("install_requires", "setup_requires", "tests_require", "extras_require")
    TRIGGER_PATTERNS = (r"pip(?<![A-Za-z0-9_]pip)(?![A-Za-z0-9_])",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # It reports only string literals that name a distribution with no Ascend build.
        target = options.target
        return (facts.has_word(*_REQUIREMENT_KEYWORDS) or facts.any_string(lambda s: s == "pip")
                or facts.has_word("pip")) and facts.any_string(lambda s: match_requirement(target, s) is not None)

    def __init__(self, ctx):
        super().__init__(ctx)
        # Module-level bindings of each name: what it is assigned (`R = [...]`, `R += [...]`, `R["x"] = ...`,
        # `R.append(...)` / `.extend` / `.update` / `.insert` / `.add`) or, for a function, what it returns.
        self._bound: dict[str, list[cst.BaseExpression]] = {}
        self._declared: list[cst.BaseExpression] = []  # setup(...) requirement values, read at the end
        self._depth = 0  # function and class bodies: their assignments are not module-level

    def _bind(self, name: str, value: Optional[cst.BaseExpression]) -> None:
        if value is not None:
            self._bound.setdefault(name, []).append(value)

    # -- what the module binds, for `install_requires=REQUIRES` ----------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._depth == 0:
            for ret in _returns(node.body):
                self._bind(node.name.value, ret)
        self._depth += 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._depth -= 1
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._depth += 1

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._depth -= 1
        return updated

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._depth == 0:
            for target in node.targets:
                name = _bound_name(target.target)
                if name is not None:
                    self._bind(name, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        name = _bound_name(node.target) if self._depth == 0 else None
        if name is not None:
            self._bind(name, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        name = _bound_name(node.target) if self._depth == 0 else None
        if name is not None:
            self._bind(name, node.value)

    # -- setup(...) and runtime_env pip lists -------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (self._depth == 0 and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                and func.attr.value in _GROWERS and node.args):
            self._bind(func.value.value, node.args[-1].value)  # REQUIRES.append("flash-attn")
        name = self.ctx.resolve(func)
        if name in _SETUP_CALLS:
            self._declared.extend(a.value for a in node.args
                                  if a.keyword is not None and a.keyword.value in _REQUIREMENT_KEYWORDS)
        elif name in _RUNTIME_ENV_CLASSES:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "pip":
                    self._pip(arg.value)

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement) and _string(element.key) == "pip":
                self._pip(element.value)

    def _pip(self, value: cst.BaseExpression) -> None:
        if isinstance(value, cst.Dict):  # {"packages": [...], "pip_check": False}
            for element in value.elements:
                if isinstance(element, cst.DictElement) and _string(element.key) == "packages":
                    self._requirements(element.value, set())
        else:
            self._requirements(value, set())

    def _requirements(self, value: cst.BaseExpression, seen: set[str]) -> None:
        """Every requirement string `value` is built from: literals, `+`, containers (dict values), and
        what the module binds to the names it reads (`deps["trl"]` reads `deps`, a comprehension reads its
        iterables, `deps_list(...)` what the module's function returns), each name once. Dict keys and
        subscripts are keys, not requirements (`deps["bitsandbytes"]` looks one up)."""
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            for element in value.elements:
                self._requirements(element.value, seen)
        elif isinstance(value, cst.Dict):
            for entry in value.elements:
                self._requirements(entry.value, seen)  # `**other` too
        elif isinstance(value, cst.BinaryOperation):
            self._requirements(value.left, seen)
            self._requirements(value.right, seen)
        elif isinstance(value, cst.Name):
            if value.value in self._bound and value.value not in seen:
                seen.add(value.value)
                for bound in self._bound[value.value]:
                    self._requirements(bound, seen)
        elif isinstance(value, cst.Subscript):
            self._requirements(value.value, seen)
        elif isinstance(value, cst.Call):
            self._requirements(value.func, seen)  # a module function's results; its arguments are keys
        elif isinstance(value, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            self._requirements(value.value if isinstance(value, cst.DictComp) else value.elt, seen)
            clause: Optional[cst.CompFor] = value.for_in
            while clause is not None:
                self._requirements(clause.iter, seen)
                clause = clause.inner_for_in
        elif isinstance(value, cst.IfExp):
            self._requirements(value.body, seen)
            self._requirements(value.orelse, seen)
        else:
            text = _string(value)
            found = match_requirement(self.ctx.target, text) if text is not None else None
            if found is not None:
                self.report(value, message(found[1], text or ""), hint=found[1].hint)

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        reported: set[str] = set()
        for value in self._declared:
            self._requirements(value, reported)
        return updated

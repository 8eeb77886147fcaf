"""`cuda-only-deps`: setup.py requirements and Ray runtime_env `pip` lists that depend on packages with
no Ascend build."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from npu_port.codemods._cuda_packages import match_requirement, message
from npu_port.transpiler.core.rules import PythonRule

_SETUP_CALLS = {"setuptools.setup", "distutils.core.setup"}
_REQUIREMENT_KEYWORDS = {"install_requires", "setup_requires", "tests_require", "extras_require"}
_RUNTIME_ENV_CLASSES = ("ray.runtime_env.RuntimeEnv", "ray.runtime_env.runtime_env.RuntimeEnv")


def _string(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


class CudaOnlyDeps(PythonRule):
    """Reports Python-declared dependencies with no Ascend build: setup.py and Ray runtime_env pip lists.

    What it does:
        Reads the requirements `setup(...)` declares (`install_requires`, `setup_requires`,
        `tests_require`, `extras_require`, as literals or through the module-level names they are
        built from, `+` included) and the `pip` list of every runtime_env written in Python (a dict
        with a `"pip"` key, its `{"packages": [...]}` form, `RuntimeEnv(pip=[...])`). Each
        requirement of a distribution in codemods/data/<target>/cuda_only_packages.yaml
        (`flash-attn`, `cupy-cuda12x`, `bitsandbytes`, `nvidia-*`, `triton` -> `triton-ascend`, ...) is
        reported where it is written.

    Why:
        `pip install .` (or every Ray worker's runtime_env) then fails on the NPU host or installs
        CUDA libraries nothing there can load, at install time or at the start of every job.

    Example:
        GPU_REQUIRES = ["liger-kernel", "flash-attn"]         ->  unchanged; two warnings
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
        self._assigned: dict[str, cst.BaseExpression] = {}  # module-level NAME = <value>
        self._declared: list[cst.BaseExpression] = []  # setup(...) requirement values, read at the end
        self._depth = 0  # function and class bodies: their assignments are not module-level

    # -- what the module binds, for `install_requires=REQUIRES` ----------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
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
                if isinstance(target.target, cst.Name):
                    self._assigned[target.target.value] = node.value

    # -- setup(...) and runtime_env pip lists -------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve(node.func)
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
        """Every requirement string `value` is built from: literals, `+`, dict values, module names."""
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            for element in value.elements:
                self._requirements(element.value, seen)
        elif isinstance(value, cst.Dict):
            for entry in value.elements:
                if isinstance(entry, cst.DictElement):
                    self._requirements(entry.value, seen)
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            self._requirements(value.left, seen)
            self._requirements(value.right, seen)
        elif isinstance(value, cst.Name) and value.value in self._assigned and value.value not in seen:
            seen.add(value.value)
            self._requirements(self._assigned[value.value], seen)
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

"""`npu-method-receiver`: `.npu()` called on an object whose class has no such method."""

from __future__ import annotations

import libcst as cst

from npu_port.codemods.tensor_cuda_method import RETURN_SELF, lacks_npu_class
from npu_port.transpiler.analysis.dispatch import npu_framework_file
from npu_port.transpiler.core.cst_walk import visit
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables.mapping import load_table


class NpuMethodReceiver(PythonRule):
    """Reports `.npu()` on an object whose class has `.cuda()` but no `.npu()`.

    What it does:
        The classes are tensor-cuda-method's (codemods/data/<target>/cuda_method_receivers.yaml:
        tensordict's `TensorDict` and the functions that build one). Reported as an error: `.npu()` on
        such a call (`TensorDict(d, [2]).npu()`, `TensorDict.from_dict(d).npu()`), on a name assigned from
        one in the same scope, and on an attribute that a class of the same file declares with such a
        type (`batch: TensorDict` in a dataclass, then `data.batch.npu()`).

    Why:
        torch_npu adds `.npu()` to torch's tensors and modules only. A `.cuda()` rewritten into `.npu()` on
        any other object (by a tool or by hand) raises AttributeError on the NPU; `.to("npu")` is what
        these classes have.

    Example:
        data.batch = data.batch.npu()          # error, where `batch: TensorDict` is declared
        should read:
        data.batch = data.batch.to("npu")

    Fix safety:
        Report-only: use `.to("npu")` (or `.to(f"npu:{index}")`).
    """

    ID = "npu-method-receiver"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = (".npu(",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # A listed class's package named in the code (tensordict), outside NPU frameworks' own modules.
        packages = {p.split(".", 1)[0] for p in load_table(options.target, "cuda_method_receivers")["to_device"]}
        return facts.has_word(*packages) and not npu_framework_file(facts.path, facts.code)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._classes = tuple(load_table(ctx.target, "cuda_method_receivers")["to_device"])
        self._built: list[set[str]] = [set()]  # per scope: names assigned from such a class's call
        self._annotations = self._declared_attributes(ctx.module)
        self._attributes: set[str] | None = None

    def _is_listed(self, node: cst.BaseExpression) -> bool:
        name = self.ctx.resolve(node) or ""
        return lacks_npu_class(name, self._classes)

    def _declared_attributes(self, module: cst.Module) -> list[tuple[str, cst.BaseExpression]]:
        """(attribute, annotation) of what the classes of this file annotate (`batch: TensorDict`); read
        before the walk (a class may be declared below the code that uses it), resolved when first asked
        (the walk has met the imports by then)."""
        found: list[tuple[str, cst.BaseExpression]] = []

        class Annotations(cst.CSTVisitor):
            def visit_ClassDef(self, node: cst.ClassDef) -> None:
                for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
                    for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                            found.append((small.target.value, _unoptional(small.annotation.annotation)))

        if any(p.split(".")[0] in self.ctx.text for p in self._classes):
            visit(module, Annotations())
        return found

    def _attribute_lacks_npu(self, name: str) -> bool:
        if self._attributes is None:
            self._attributes = {a for a, annotation in self._annotations if self._is_listed(annotation)}
        return name in self._attributes

    def _lacks_npu(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value in self._built[-1]
        if isinstance(node, cst.Attribute):
            return self._attribute_lacks_npu(node.attr.value)
        if not isinstance(node, cst.Call):
            return False
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in RETURN_SELF:  # TensorDict(...).cpu(): one still
            return self._lacks_npu(node.func.value)
        return self._is_listed(node.func)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._built.append(set())

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._built.pop()
        return updated

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                if self._lacks_npu(node.value):
                    self._built[-1].add(target.target.value)
                else:
                    self._built[-1].discard(target.target.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "npu" and self._lacks_npu(func.value):
            self.report(node, "`.npu()` on an object whose class has no `.npu()` (a TensorDict): it raises "
                        "AttributeError", severity="error", hint='use .to("npu") (or .to(f"npu:{index}"))')


def _unoptional(annotation: cst.BaseExpression) -> cst.BaseExpression:
    """`Optional[X]` and `X | None` as X."""
    if isinstance(annotation, cst.Subscript) and len(annotation.slice) == 1 \
            and isinstance(annotation.slice[0].slice, cst.Index):
        return annotation.slice[0].slice.value
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return annotation.left
    return annotation

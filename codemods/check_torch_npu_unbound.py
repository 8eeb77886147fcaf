"""`torch-npu-unbound`: the name `torch_npu` used in a file that never binds it."""

from __future__ import annotations

import re

import libcst as cst

from npu_port.transpiler.core.rules import PythonRule

# Anything that binds the name somewhere in the file: an import of it (in any scope, a try, a function), an
# assignment, a parameter, a global. Any one of them and the file is not judged.
_BINDS = re.compile(r"\bimport\s+torch_npu\b|\bimport\b[^\n#]*\btorch_npu\b|\btorch_npu\s*(?::[^=\n]*)?=(?!=)"
                    r"|\bas\s+torch_npu\b|\bglobal\s+[^\n#]*\btorch_npu\b|\(\s*torch_npu\b|,\s*torch_npu\s*[,):=]")


class TorchNpuUnbound(PythonRule):
    """Reports `torch_npu.` in a file that never imports torch_npu.

    What it does:
        Where the file names `torch_npu` in code (`torch_npu.profiler.profile`, `torch_npu.npu_rms_norm(x)`)
        and nothing in it binds that name (no `import torch_npu` in any scope, no `from ... import torch_npu`,
        no assignment, parameter or `as torch_npu`), reports (error) the first use on each line. Uses
        inside annotations of a file with `from __future__ import annotations` are not evaluated and are
        not reported.

    Why:
        `import torch` loads torch_npu on an Ascend host (its autoload entry point) but does not bind the
        name `torch_npu` in the module: the use raises NameError where it runs, at import for a module-level
        line or a function's annotation. A port that writes `torch_npu.` names (a profiler moved, an op
        replaced) in a file where the import was not added, or was added in another function only, breaks
        the file.

    Example:
        import torch
        def setup() -> Union[torch_npu.profiler.profile, None]:       # error
        should read: `import torch_npu` at the top (or the annotation left on torch.profiler).

    Fix safety:
        Report-only: import torch_npu in the file (inside the NPU branch for code that also runs on GPUs).
    """

    ID = "torch-npu-unbound"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("torch_npu",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.has_word("torch_npu") and _BINDS.search(facts.code) is None

    def __init__(self, ctx):
        super().__init__(ctx)
        self._lazy_annotations = "annotations" in ctx.text and re.search(
            r"^from\s+__future__\s+import\s+[^\n]*\bannotations\b", ctx.text, re.M) is not None
        self._annotations = 0
        self._imports = 0
        self._attributes: set[int] = set()  # ids of names that are an attribute's name (`x.torch_npu`)
        self._lines: set[int] = set()
        self._bound = False

    def visit_Module(self, node: cst.Module) -> None:
        # Bound somewhere (the scout's question, on the whole text): nothing to judge.
        self._bound = _BINDS.search(self.ctx.text) is not None

    # `from torch_npu.contrib import x` names the module, not the variable (the walk enters every node).
    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._imports += 1

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        self._imports -= 1
        return updated

    def visit_Annotation(self, node: cst.Annotation) -> None:
        self._annotations += 1

    def leave_Annotation(self, original: cst.Annotation, updated: cst.Annotation) -> cst.Annotation:
        self._annotations -= 1
        return updated

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._attributes.add(id(node.attr))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value != "torch_npu" or self._bound or id(node) in self._attributes or self._imports:
            return
        if self._annotations and self._lazy_annotations:
            return
        line = self.ctx.position(node).start.line
        if line in self._lines:
            return
        self._lines.add(line)
        self.report(node, "`torch_npu` is used here but nothing in this file imports it: NameError where this line "
                          "runs (`import torch` loads torch_npu on an Ascend host without binding the name)",
                    severity="error", hint="add `import torch_npu` to the file (inside the NPU branch where the file also "
                                           "runs on GPUs), or keep the torch name")

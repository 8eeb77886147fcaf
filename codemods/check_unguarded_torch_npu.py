"""`unguarded-torch-npu-import`: `import torch_npu` at the top of a module of a library that loads it lazily."""

from __future__ import annotations

import os
import re

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.project_modules import lazy_torch_npu_loader
from npu_port.transpiler.core.rules import PythonRule

# A module (or its folder) named for the NPU or its tools (npu_patch.py, ascend_utils.py, mstx_profile.py: Ascend's profiler
# extension), and a test file under a tests/ folder.
_NPU_MODULE = re.compile(r"(?<![a-z])(?:npu|ascend|hccl|mstx)(?![a-z])", re.I)
_TESTS = re.compile(r"(?:^|/)tests?/")


def _inner_name(path: str) -> str:
    """The module's name below its outermost package (`model/npu_patch/model.py` of swift/...): what it is named
    for inside its library, not the library's own name."""
    folder, parts = os.path.dirname(os.path.abspath(path)), [os.path.basename(path)]
    while os.path.isfile(os.path.join(os.path.dirname(folder), "__init__.py")):
        parts.append(os.path.basename(folder))
        folder = os.path.dirname(folder)
    return "/".join(reversed(parts))


class UnguardedTorchNpuImport(PythonRule):
    """Reports an unconditional `import torch_npu` in a module of a package that loads torch_npu only where it is installed.

    What it does:
        A module-level `import torch_npu` (not inside a `try`, an `if` or a function) in a module of a package
        that elsewhere imports torch_npu only where it is installed (inside a function, a `try` or an `if`, or
        through `find_spec("torch_npu")`: accelerate's `is_npu_available()`, ms-swift's NPU patches; the same
        reading torch-npu-import makes, project_modules.lazy_torch_npu_loader) is reported (warning), with
        where the package loads it lazily. Modules of an NPU framework (vllm_ascend, a `*_npu` package, MindSpeed's),
        modules named for the NPU (`npu_patch.py`, `mstx_profile.py`: imported where the NPU is) and test files
        under a tests/ folder are not.

    Why:
        Such a library imports on GPU and CPU hosts too; one module that imports torch_npu unconditionally
        (a port that added it) makes `import <package>` fail with ModuleNotFoundError everywhere but on an
        Ascend host. convert writes the guarded import in such a package.

    Example:
        # accelerate/utils/megatron_lm.py, in a package whose utils/imports.py imports torch_npu inside
        # is_npu_available()
        import torch
        import torch_npu                                   # warning

    Fix safety:
        Report-only: guard the import (`try: import torch_npu` / `except ImportError: pass`), or import it where
        the NPU branch runs.
    """

    ID = "unguarded-torch-npu-import"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("torch_npu",)

    def visit_Module(self, node: cst.Module) -> None:
        found = next((small for statement in node.body if isinstance(statement, cst.SimpleStatementLine)
                      for small in statement.body if isinstance(small, cst.Import)
                      and any(dotted_name(a.name) == "torch_npu" for a in small.names)), None)
        if found is None or self.ctx.dispatch.npu_framework or _NPU_MODULE.search(_inner_name(self.ctx.path)) \
                or _TESTS.search(self.ctx.path.replace("\\", "/")):
            # A module of an NPU framework (vllm_ascend, a *_npu package, MindSpeed's), one named for the NPU (verl's
            # npu_patch.py, mstx_profile.py: imported where the NPU is), a test under tests/: NPU hosts only, or
            # the CI's choice.
            return
        loader = lazy_torch_npu_loader(self.ctx.path)
        if loader is not None:
            self.report(found, f"`import torch_npu` at the top of a module of a package that loads it only where it is "
                               f"installed ({loader}): importing the package now fails on GPU and CPU hosts",
                        severity="warning", hint="guard it (try: import torch_npu / except ImportError: pass), or "
                                                 "import it where the NPU branch runs")

"""`relative-import`: relative imports, for scripts that run without a parent package (`--no-relative`)."""

from __future__ import annotations

import libcst as cst

from npu_port.transpiler.analysis.import_policy import parse_for_imports, relative_imports
from npu_port.transpiler.core.rules import PythonRule


class RelativeImport(PythonRule):
    """Reports relative imports (`from . import x`, `from ..pkg import y`).

    What it does:
        Flags every `from .` import when `--no-relative` (or `no-relative = true`) is set.

    Why:
        Scripts that are copied onto NPU hosts, run with `python file.py` or shipped to Ray workers
        as loose files have no parent package, and a relative import fails there with
        "attempted relative import with no known parent package".

    Example:
            from .utils import load_config        # error: relative-import
        becomes, by hand:
            from mypkg.utils import load_config

    Fix safety:
        Report-only: the absolute name depends on how the project is installed.
    """

    ID = "relative-import"
    SAFETY = "report-only"
    GROUP = "policy"
    TRIGGERS = ("from",)

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        tree = parse_for_imports(self.ctx.text)
        if tree is None:
            return updated
        for site in relative_imports(tree):
            self.ctx.add(self.ID, site.line, site.col, f"relative import `{site.text}`", severity="error",
                         hint="use the absolute module name")
        return updated

"""`forbidden-import`: imports of packages the project must not depend on (`npu-port check --forbid`)."""

from __future__ import annotations

import ast

import libcst as cst

from npu_port.transpiler.analysis.import_policy import dynamic_imports, forbidden_imports, parse_for_imports
from npu_port.transpiler.core.rules import PythonRule


class ForbiddenImport(PythonRule):
    """Reports imports of packages the project must not depend on.

    What it does:
        Flags `import pkg`, `from pkg.sub import x` and `importlib.import_module("pkg...")` for every
        package named by `--forbid pkg,...` (or `forbid = [...]` in `[tool.npu-port]`).

    Why:
        A port that must run where a project-internal framework (say `agentic_rl`) is not installed
        fails at import time on the NPU host. Catching the import in CI is cheaper than a failed job.

    Example:
        With `--forbid agentic_rl`:

            from agentic_rl.trainer import Trainer   # error: forbidden-import

        `npu-port standalone` can inline or strip such imports.

    Fix safety:
        Report-only: whether to inline, vendor or drop the dependency is a human decision.
    """

    ID = "forbidden-import"
    SAFETY = "report-only"
    GROUP = "policy"
    TRIGGERS = ("import",)

    def finalize(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        packages = self.ctx.options.forbid
        if not packages:
            return updated
        tree = parse_for_imports(self.ctx.text)
        if tree is None:
            return updated
        for site, pkg in forbidden_imports(tree, packages):
            self.ctx.add(self.ID, site.line, site.col, f"`{site.text}` imports forbidden package `{pkg}`",
                         severity="error", hint="remove the dependency, or inline it with `npu-port standalone`")
        for line, col, arg in dynamic_imports(tree):
            try:
                name = ast.literal_eval(arg)
            except (ValueError, SyntaxError):
                continue  # a computed module name: nothing certain to report
            if not isinstance(name, str):
                continue
            loaded = next((p for p in packages if name == p or name.startswith(p + ".")), None)
            if loaded:
                self.ctx.add(self.ID, line, col, f"dynamic import of {name!r} loads forbidden package `{loaded}`",
                             severity="error", hint="remove the dependency")
        return updated

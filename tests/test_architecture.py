"""The shape the design depends on, enforced: one import namespace; the engine imports no rule; rules
import only the rule framework, the analysis layer, the text engines and the tables (their data)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a rule may import from outside the rules package.
RULE_MAY_IMPORT = (
    "npu_port.transpiler.core.rules",
    "npu_port.transpiler.core.cst_walk",
    "npu_port.transpiler.core.files",
    "npu_port.transpiler.core.report",
    "npu_port.transpiler.analysis",
    "npu_port.transpiler.text",
    "npu_port.transpiler.tables",
)
GENERIC = ("transpiler", "codemods", "skeletons")


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, absolute, with its line (a `from X import y` counts as X and X.y)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def _python_files(*folders: str) -> list[Path]:
    return [p for f in folders for p in sorted((ROOT / f).rglob("*.py")) if "__pycache__" not in p.parts]


def _is_rule_module(name: str) -> bool:
    parts = name.split(".")
    return parts[:2] == ["npu_port", "codemods"] and len(parts) > 2


def test_no_module_outside_the_rules_package_imports_a_rule_module():
    found = [f"{p.relative_to(ROOT)}:{line}: {name}"
             for p in _python_files("transpiler", "npu_port", "tools", "benchmarks", "skeletons")
             for line, name in _imports(p) if _is_rule_module(name) and name.split(".")[2] != "data"]
    assert found == []


def test_rules_import_only_the_framework_the_analysis_layer_the_text_engines_and_the_tables():
    found = []
    for p in _python_files("codemods"):
        for line, name in _imports(p):
            if name.startswith("npu_port.") and not _is_rule_module(name) and name != "npu_port.codemods" \
                    and not any(name == a or name.startswith(a + ".") for a in RULE_MAY_IMPORT):
                found.append(f"{p.relative_to(ROOT)}:{line}: {name}")
    assert found == []


def test_nothing_imports_a_generic_top_level_name():
    found = [f"{p.relative_to(ROOT)}:{line}: {name}"
             for p in _python_files("transpiler", "codemods", "skeletons", "npu_port", "tools", "tests", "benchmarks")
             for line, name in _imports(p) if name.split(".")[0] in GENERIC]
    assert found == []


def test_the_framework_lives_in_the_engine():
    from npu_port.transpiler.core import rules

    assert rules.Rule.__module__ == "npu_port.transpiler.core.rules"
    assert not (ROOT / "codemods" / "_base.py").exists()

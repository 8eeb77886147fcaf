"""Settings a project's own Python code defines: the default a config file's key overrides.

A config file (`distributed_backend: nccl` in gpt-neox's YAML) sets a value the project's code reads under the
same name (`distributed_backend: str = "nccl"`, a dataclass field). The two are one decision: where convert ports
the code's default, the config's value goes with it; where the code is left (an NPU framework's module, which
runs with torch.cuda patched onto the NPU: MindSpeed-RL keeps `nccl`), so is the config. Read from the project's
files (never imported or run); every file read is recorded (project_modules.recording_reads).
"""

from __future__ import annotations

import ast
import os
import warnings
from typing import Optional

from npu_port.transpiler.analysis.dispatch import npu_framework_reason
from npu_port.transpiler.analysis.project_modules import (
    Remembered,
    project_folders,
    python_files,
    remembered,
)


def _gives_default(tree: ast.AST, key: str, value: str) -> Optional[int]:
    """The line where code gives the setting `key` the value `value`: `key: T = "value"`, `self.key = "value"`,
    `key="value"` (a keyword or a parameter default), `{"key": "value"}`, argparse's `add_argument("--key", ...,
    default="value")` (dashes or underscores); None where none does (prose in a docstring does not)."""
    def is_value(node: Optional[ast.AST]) -> bool:
        return isinstance(node, ast.Constant) and node.value == value

    def names_key(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == key or isinstance(node, ast.Attribute) and node.attr == key

    options = {f"--{key}", f"--{key.replace('_', '-')}"}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and names_key(node.target) and is_value(node.value) \
                or isinstance(node, ast.Assign) and is_value(node.value) and any(names_key(t) for t in node.targets) \
                or isinstance(node, ast.keyword) and node.arg == key and is_value(node.value):
            return node.lineno
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == key and is_value(v)
                                              for k, v in zip(node.keys, node.values)):
            return node.lineno
        if isinstance(node, ast.arguments):
            defaults = list(zip(node.args[len(node.args) - len(node.defaults):], node.defaults))
            defaults += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
            if any(a.arg == key and is_value(d) for a, d in defaults):
                return next(d.lineno for a, d in defaults if a.arg == key)
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value in options for a in node.args) \
                and any(k.arg == "default" and is_value(k.value) for k in node.keywords):
            return node.lineno
    return None


_KNOWN: Remembered = {}


def ported_default(path: str, key: str, value: str) -> Optional[str]:
    """Where ("file:line") the project of the config file `path` gives its setting `key` the default `value` in a
    module convert ports (not an NPU framework's), or None."""
    return next((found for root in project_folders(path) if (found := _ported_default(root, key, value))), None)


def _ported_default(root: str, key: str, value: str) -> Optional[str]:
    return remembered(_KNOWN, (root, key, value), lambda: _find(root, key, value), limit=256)


def _find(root: str, key: str, value: str) -> Optional[str]:
    for full, text in python_files(root):
        if value not in text or key.replace("_", "") not in text.replace("_", "").replace("-", ""):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        line = _gives_default(tree, key, value)
        if line is not None and not npu_framework_reason(full, text):
            return f"{os.path.relpath(full, root)}:{line}"
    return None

"""The user's own agent files for `weave --agent-loop --tools/--reward`, checked by reading them.

They are parsed, never imported or run (npu-port runs no code of the tree it works on): a tools file must
define at least one module-level function under VERL's `@function_tool` (the only tools the rollouts'
`multi_turn.function_tool_path` loads), a reward file the function VERL calls.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Optional

from npu_port.transpiler.core.files import ReadError, read_text
from npu_port.transpiler.generate.schema import is_identifier

DEFAULT_REWARD_FUNCTION = "compute_score"


class AgentFileError(ValueError):
    pass


def split_reward(spec: str) -> tuple[str, str]:
    """`FILE.py[:NAME]` -> (FILE.py, NAME); NAME defaults to compute_score, VERL's default name."""
    path, sep, name = spec.rpartition(":")
    if sep and path and is_identifier(name):
        return path, name
    return spec, DEFAULT_REWARD_FUNCTION


def _parsed(path: Path, flag: str) -> ast.Module:
    if path.suffix != ".py":
        raise AgentFileError(f"{flag} {path}: not a Python file (.py); VERL loads the file as a module")
    try:
        text = read_text(path)
    except ReadError as exc:
        raise AgentFileError(f"{flag} {path}: {exc}") from None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise AgentFileError(f"{flag} {path}: does not parse ({exc})") from None


def _decorator_name(node: ast.expr) -> Optional[str]:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else None


def check_tools_file(path: Path) -> list[str]:
    """The names of the file's @function_tool functions; AgentFileError when it has none."""
    tree = _parsed(path, "--tools")
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
             and any(_decorator_name(d) == "function_tool" for d in node.decorator_list)]
    if not names:
        raise AgentFileError(f"--tools {path}: no module-level @function_tool function (verl.tools.function_tool): "
                             "VERL's agent loop would offer the model no tool")
    return names


def check_reward_file(path: Path, name: str) -> None:
    tree = _parsed(path, "--reward")
    if not any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name for node in tree.body):
        raise AgentFileError(f"--reward {path}: no module-level function {name}() "
                             f"(give another name as --reward {path}:NAME)")


def as_seen_from(path: Path, folder: Path) -> str:
    """`path` as the woven script in `folder` names it: relative to that folder (an absolute path stays)."""
    if path.is_absolute():
        return str(path)
    return Path(os.path.relpath(path.resolve(), folder.resolve())).as_posix()

"""Which functions of a file launch a GPU kernel: a Triton kernel (`kernel[grid](...)`, a `@triton.jit` function
of the file), a function of a kernel library (DeepGEMM, CuTe, a `*_cuda` extension: the caller says which
modules are such), or a function imported from a module of the project that defines Triton kernels or imports
such a library (the wrapper that launches them). In a module that registers operators for CUDA devices alone
(`torch.library.custom_op(..., device_types="cuda")`) every function counts: its eligibility tests
(`return x.is_cuda and x.ndim == 4`) pick those operators.

A device test in such a function (`if x.is_cuda: kernel[grid](...) else: fallback(x)`) picks the kernel path:
renamed for the NPU, it sends NPU tensors into a kernel written for CUDA where the original took the fallback.
Read with `ast` (the functions in source order, as LibCST visits them), never imported or run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Optional

from npu_port.transpiler.analysis.project_devices import _parse, names_from_project
from npu_port.transpiler.analysis.project_modules import module_text
from npu_port.transpiler.analysis.source_facts import dotted

_TRITON_DECORATOR = re.compile(r"^[ \t]*@triton\.(?:jit|autotune|heuristics)\b", re.M)
# A module that registers its own operators for CUDA devices (`@torch.library.custom_op(..., device_types="cuda")`,
# `triton_op`, `.register_kernel("cuda")`, `torch.library.impl(lib, "op", "CUDA")`): every device test in it
# decides whether those operators (kernels for CUDA alone) run, wherever the test sits.
_CUDA_OPERATORS = re.compile(r"""device_types\s*=\s*[(\[]?\s*["']cuda["']|register_kernel\(\s*["']cuda["']"""
                             r"""|\bimpl\([^()\n]*,\s*["']CUDA["']\s*\)""")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _kernel_module(text: str, is_library: Callable[[str], bool]) -> bool:
    """A module that defines Triton kernels or imports a kernel library."""
    if _TRITON_DECORATOR.search(text):
        return True
    tree = _parse(text)
    return tree is not None and any(
        isinstance(n, ast.Import) and any(is_library(a.name) for a in n.names)
        or isinstance(n, ast.ImportFrom) and n.module and not n.level and is_library(n.module)
        for n in ast.walk(tree))


def kernel_functions(path: str, text: str, is_library: Callable[[str], bool]) -> Optional[list[bool]]:
    """For each function of `text` (the file at `path`), in source order (nested ones after their parent),
    whether its own body launches a kernel; None where the file cannot be read as Python."""
    tree = _parse(text)
    if tree is None:
        return None
    if _CUDA_OPERATORS.search(text):
        return [True] * sum(isinstance(n, _FUNCTIONS) for n in ast.walk(tree))
    kernels: set[str] = set()  # names that launch kernels when called
    libraries: set[str] = set()  # local names bound to a kernel library's module
    for node in ast.walk(tree):
        if isinstance(node, _FUNCTIONS) and any(
                (dotted(d.func if isinstance(d, ast.Call) else d) or "").startswith(
                    ("triton.jit", "triton.autotune", "triton.heuristics")) for d in node.decorator_list):
            kernels.add(node.name)
        elif isinstance(node, ast.Import):
            libraries.update((a.asname or a.name).split(".")[0] for a in node.names if is_library(a.name))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level and is_library(node.module):
            kernels.update(a.asname or a.name for a in node.names)
    for root, qualified, name, alias in names_from_project(path, text):
        source = module_text(root, f"{qualified}.{name}" if qualified else name) or module_text(root, qualified)
        if source is not None and _kernel_module(source, is_library):
            kernels.add(alias)
    # `self.norm_fn = FusedRMSNormAffineFunction` (gpt-neox's fused norms): the attribute launches what it holds.
    kernels.update(f"self.{t.attr}" for node in ast.walk(tree) if isinstance(node, ast.Assign)
                   and (dotted(node.value) or "") in kernels
                   for t in node.targets if isinstance(t, ast.Attribute) and dotted(t.value) == "self")
    flags: list[bool] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FUNCTIONS):
                flags.append(_launches(child, kernels, libraries, is_library))
            visit(child)

    visit(tree)
    return flags


def _launches(fn: ast.AST, kernels: set[str], libraries: set[str], is_library: Callable[[str], bool]) -> bool:
    """Whether the body of `fn` (not of functions nested in it) calls a kernel or imports a kernel library."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (*_FUNCTIONS, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call):
            func = node.func.value if isinstance(node.func, ast.Subscript) else node.func  # kernel[grid](...)
            name = dotted(func) or ""
            # `kernel(...)`, `Fn.apply(...)` (an autograd Function of a kernel library), `self.fn.apply(...)` (one
            # bound to an attribute: kernel_functions), `lib.op(...)`
            parts = name.split(".")
            if any(".".join(parts[:i]) in kernels for i in range(1, len(parts) + 1)) or parts[0] in libraries:
                return True
        elif isinstance(node, ast.Import) and any(is_library(a.name) for a in node.names) \
                or isinstance(node, ast.ImportFrom) and node.module and not node.level and is_library(node.module):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False

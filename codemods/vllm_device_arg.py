"""vLLM: the removed `device=` argument."""

from __future__ import annotations

import ast
import re
from typing import cast

import libcst as cst

from npu_port.transpiler.analysis.literals import keyword, remove_arg, string_value
from npu_port.transpiler.core.rules import PythonRule

# Where vLLM takes engine arguments as keywords (public re-exports and their defining modules).
ENGINE_ARG_CALLS = frozenset({
    "vllm.LLM", "vllm.entrypoints.llm.LLM",
    "vllm.EngineArgs", "vllm.engine.arg_utils.EngineArgs",
    "vllm.AsyncEngineArgs", "vllm.engine.arg_utils.AsyncEngineArgs",
})
# `device=` (not `==`) and `LLM(` / `LLM as` in the code: spaces, line continuations (and a parenthesis
# before the call's) may come between.
_DEVICE_KEYWORD = re.compile(r"device[\s\\]*=(?!=)")
_CLASS_NAMES = "|".join(sorted({re.escape(c.rsplit(".", 1)[-1]) for c in ENGINE_ARG_CALLS}))
_CALLS = re.compile(rf"(?:{_CLASS_NAMES})(?:[\s\\)]*\(|(?P<alias>[\s\\]+as(?![A-Za-z0-9_])))")
_INSIDE = re.compile(r"""[()'"]|device[\s\\]*=(?!=)""")
REMOVED_IN = "vLLM 0.10 removed the device argument (vllm-project/vllm#21349); passing it raises TypeError"
PLATFORM_HINT = "delete it: the vllm-ascend platform plugin selects the NPU by itself"


class VllmDeviceArg(PythonRule):
    """Drop `device=` from vLLM engine arguments.

    What it does:
        In `LLM(...)`, `EngineArgs(...)` and `AsyncEngineArgs(...)` (resolved through the imports):
        - `device="cuda"` (any string literal, or None) is removed;
        - `device=<expression>` is reported (error) with the hint to delete it;
        (`npu_memory_utilization=`, which never existed, is reported by `check`'s unknown-framework-arg.)
        Everything else in the call stays: vLLM code is identical on Ascend.

    Why:
        The vllm-ascend plugin registers the NPU platform when vLLM starts; there is no device switch.
        `device=` was deprecated in May 2025 and removed in vLLM 0.10, and `npu_memory_utilization` never
        existed in vLLM, vllm-ascend or VERL.

    Example:
        LLM(model=path, device="cuda", gpu_memory_utilization=0.8)
        ->
        LLM(model=path, gpu_memory_utilization=0.8)

    With --keep-cuda:
        The same removal: it is device-agnostic already. vLLM picks its platform itself on either host
        (CUDA, or vllm-ascend's NPU plugin), and current vLLM refuses `device=` on both.

    Fix safety:
        Safe: removing a literal `device=` cannot change behaviour on vLLM >= 0.10, where the argument
        raises TypeError, and on older releases the default ("auto") picks the platform the plugin
        registered. A computed value is only reported, because removing it would drop the expression.
    """

    ID = "vllm-device-arg"
    SAFETY = "safe"
    # The class a call resolves to is named in the code, in its import or its attribute chain: `LLM` as a
    # word or `EngineArgs` (in AsyncEngineArgs too). `vllm` would be no filter in a vLLM plugin (931 of
    # vllm-ascend's 1,208 files spell it; 46 these).
    TRIGGERS = ("EngineArgs",)
    TRIGGER_PATTERNS = (r"LLM(?<![A-Za-z0-9_]LLM)(?![A-Za-z0-9_])",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        if not (facts.has_word("device") and any(facts.may_name(c) for c in ENGINE_ARG_CALLS)):
            return False
        # The words are common apart (vLLM files pass device= to torch and to its own classes). The code must
        # call an engine-argument class by its name with `device=` inside the parentheses (or an import
        # rename one); then the ast says whether such a call has a callee bound toward one.
        if facts.unsure:
            return True
        if not (facts.search_code(_DEVICE_KEYWORD) and _calls_with_device(facts.code)):
            return False
        return _may_call_with_device(facts)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        resolved = self.ctx.resolve(original.func)
        if resolved not in ENGINE_ARG_CALLS:
            return updated
        name = resolved.rsplit(".", 1)[-1]
        device = keyword(updated, "device")
        if device is None:
            return updated
        # What the code wrote, not what another rule made of it: --keep-cuda's device-string turns "cuda"
        # into `current_platform.device_type`, which vLLM refuses as much.
        written = keyword(original, "device")
        value = written.value if written is not None else device.value
        literal = string_value(value) is not None or (isinstance(value, cst.Name) and value.value == "None")
        if not literal:
            self.report(cast(cst.Arg, keyword(original, "device")), f"{name}(device=...): {REMOVED_IN}", severity="error",
                        hint=PLATFORM_HINT)
            return updated
        args = remove_arg(updated.args, list(updated.args).index(device))
        return self.rewrite(original, updated, updated.with_changes(args=args),
                            f"{name}(device=...) removed: {REMOVED_IN}; the platform plugin selects the NPU",
                            portable=lambda: updated.with_changes(args=args))


def _calls_with_device(code: str) -> bool:
    """Whether the code (comments gone, each literal a space) renames an engine-argument class in an
    import, or calls one by its name with `device=` somewhere inside the call's parentheses. A quote
    there (an f-string's body, where literals stay) or a parenthesis never closed: yes."""
    for call in _CALLS.finditer(code):
        if call.group("alias") is not None:
            return True
        depth = 1
        for token in _INSIDE.finditer(code, call.end()):
            text = token.group()
            if text == "(":
                depth += 1
            elif text == ")":
                depth -= 1
                if depth == 0:
                    break
            else:
                return True  # `device=` inside, or a quote
        else:
            return True
    return False


def _may_call_with_device(facts) -> bool:
    """Whether some call given a `device=` keyword has a callee (a name or an attribute chain) whose first
    name an import binds to an engine-argument class or a module it lies in, scopes ignored: each call
    the rule resolves to one is such a call."""
    bound = facts.names_bound_toward(ENGINE_ARG_CALLS)
    if bound is None:
        return True
    if not bound:
        return False
    for node in facts.nodes:
        if isinstance(node, ast.Call) and any(k.arg == "device" for k in node.keywords):
            func = node.func
            while isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name) and func.id in bound:
                return True
    return False

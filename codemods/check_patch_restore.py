"""`patch-restore-pair`: a patched device function put back from the other device's module."""

from __future__ import annotations

import re
from typing import Optional, Union

import libcst as cst

from npu_port.transpiler.core.rules import PythonRule

# torch.cuda.x / torch.npu.x / torch_npu.npu.x: the same function of one device module or the other.
_DEVICE_MODULE = re.compile(r"^(?:torch\.(?:cuda|npu)|torch_npu\.npu)\.")


def _device_function(name: Optional[str]) -> Optional[tuple[str, str]]:
    """(module, function) of a device module's name (`torch.npu.empty_cache` -> ("torch.npu", "empty_cache"))."""
    m = _DEVICE_MODULE.match(name or "")
    return (m.group()[:-1], name[m.end():]) if m and name else None


class PatchRestorePair(PythonRule):
    """Reports a device function saved from one device module and put back into the other.

    What it does:
        In one function (or at module level), a name bound to a device module's function
        (`saved = torch.npu.empty_cache`), the other device's function patched (`torch.cuda.empty_cache =
        lambda: None`) and then restored from that name (`torch.cuda.empty_cache = saved`) is reported
        (error) at the restore.
        `torch.cuda`, `torch.npu` and `torch_npu.npu` are the device modules; a save and restore of the same
        module, or a shim that points one at the other without a save (`torch.cuda.Event = torch.npu.Event`),
        or one pointed at the other's through a name with no patch before (`s = torch.npu.current_stream;
        torch.cuda.current_stream = s`) are not reported.

    Why:
        Code that patches a device function for a while (`torch.cuda.empty_cache = lambda: None` while a
        library initialises) saves the original first and restores it after. A port that renames the save
        alone (`torch.cuda.empty_cache` -> `torch.npu.empty_cache`) leaves the patch and the restore on
        torch.cuda: the workaround no longer covers the NPU, and the restore writes the NPU's function onto
        torch.cuda. convert leaves such a save with the patch (a warning); this finds it where a port was
        made otherwise.

    Example:
        empty_cache = torch.npu.empty_cache
        torch.cuda.empty_cache = lambda: None
        model = load()
        torch.cuda.empty_cache = empty_cache                 # error
        should read (the whole patch on the NPU's module):
        empty_cache = torch.npu.empty_cache
        torch.npu.empty_cache = lambda: None
        model = load()
        torch.npu.empty_cache = empty_cache

    Fix safety:
        Report-only: save, patch and restore the same module's function.
    """

    ID = "patch-restore-pair"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ()
    # The restore: an assignment to a device module's name (`torch.cuda.empty_cache = saved`).
    TRIGGER_PATTERNS = (r"cuda\.[A-Za-z_]\w*\s*=(?!=)", r"npu\.[A-Za-z_]\w*\s*=(?!=)")

    @classmethod
    def scout(cls, facts, options) -> bool:
        return facts.has_word("npu") and facts.has_word("cuda")

    def __init__(self, ctx):
        super().__init__(ctx)
        # Per scope: local name -> the (module, function) it saved, and the device functions patched since.
        self._saves: list[dict[str, tuple[str, str]]] = [{}]
        self._patched: list[set[tuple[str, str]]] = [set()]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._saves.append({})
        self._patched.append(set())

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._saves.pop()
        self._patched.pop()
        return updated

    def visit_Assign(self, node: cst.Assign) -> None:
        saves = self._saves[-1]
        value: Union[cst.BaseExpression, None] = node.value
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Name):
                saved = _device_function(self.ctx.resolve(value)) if value is not None else None
                if saved is not None:
                    saves[target.value] = saved
                else:
                    saves.pop(target.value, None)
                continue
            into = _device_function(self.ctx.resolve(target))
            if into is None:
                continue
            if not (isinstance(value, cst.Name) and value.value in saves):
                self._patched[-1].add(into)  # the patch (or a shim)
                continue
            module, function = saves[value.value]
            # A restore puts back what a patch replaced; without the patch it is a shim (on purpose).
            if into in self._patched[-1] and into[1] == function and into[0] != module:
                self.report(node, f"`{into[0]}.{function}` is put back from `{value.value}`, which saved "
                                  f"`{module}.{function}`: the save was ported and the patch and restore were not "
                                  "(or the reverse)", severity="error",
                            hint=f"save, patch and restore the same module's function ({module}.{function} "
                                 "on the NPU)")

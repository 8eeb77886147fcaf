"""What the rules write in `convert --keep-cuda`: device-agnostic code that picks the accelerator at run time.

One spelling per file, chosen the way its maintainers would:
- a file of a VERL project (it imports verl, or is part of verl): verl's own helpers from
  `verl.utils.device` (`get_device_name()`, `get_torch_device()`, `get_nccl_backend()`,
  `is_npu_available`), as verl's maintainers port their code;
- a file that imports vLLM: its device type from `vllm.platforms.current_platform.device_type` (vLLM picks
  the platform plugin, vllm-ascend's answers "npu");
- otherwise PyTorch's device-agnostic API (`torch.accelerator`) where the oldest torch the project accepts
  has it (RunOptions.torch_version: --torch-version, else the project's pins, else the oldest torch-npu
  release; None, for an API caller, the newest), and the device module as an explicit choice;
- otherwise, and for names that differ between the two stacks (`CUDAGraph` / `NPUGraph`), an explicit
  choice: `<npu form> if hasattr(torch, "npu") else <cuda form>` (torch_npu adds `torch.npu` on import).

The facts are data: which torch release has which form of each torch.cuda name in
codemods/data/<target>/portable_torch.yaml (read from the torch and torch-npu wheels,
codemods/data/api/torch_device_api.json), the rest and verl's helpers in device_agnostic.yaml; tests check
both against the snapshots.
"""

from __future__ import annotations

import re
from typing import Optional, cast

import libcst as cst

from npu_port.transpiler.analysis.project_modules import project_defines
from npu_port.transpiler.core.cst_walk import visit
from npu_port.transpiler.core.rules import PythonContext
from npu_port.transpiler.tables.device_agnostic import facts as _facts
from npu_port.transpiler.tables.device_agnostic import portable_forms
from npu_port.transpiler.tables.device_agnostic import release as _release


def _imported_at_top(text: str, package: str) -> bool:
    """The module imports `package` unconditionally: an import statement at column 0. One inside
    `if is_vllm_available():` or `try:` is indented, and its helpers must not be imported at the top."""
    return re.search(rf"^(?:import|from)[ \t]+{package}\b", text, re.M) is not None


def uses_verl(ctx: PythonContext) -> bool:
    """A file of a VERL project: it imports verl unconditionally, or it is part of verl itself."""
    path = "/" + ctx.path.replace("\\", "/")
    return "/verl/" in path or _imported_at_top(ctx.text, "verl")


def verl_defines(ctx: PythonContext, helpers: dict[str, str]) -> bool:
    """A file of a VERL tree (VERL itself, an old release, a fork) uses verl's device helpers only where that
    tree has them: a fork that never had verl/utils/device.py gets torch's own forms, never an import of a
    module it lacks. A file that imports an installed VERL goes by the VERL its pins name."""
    modules: dict[str, list[str]] = {}
    for qualified in helpers.values():
        module, name = qualified.rsplit(".", 1)
        modules.setdefault(module, []).append(name)
    return all(project_defines(ctx.path, module, tuple(names)) is not False for module, names in modules.items())


def uses_vllm(ctx: PythonContext) -> bool:
    return _imported_at_top(ctx.text, "vllm")


def framework_loads_torch_npu(ctx: PythonContext) -> bool:
    """verl (verl.utils.device) and vLLM (vllm-ascend's platform plugin) import torch_npu themselves where
    it is installed: their files need no import of it. A VERL tree without verl.utils.device (an old release,
    a fork) has nothing that does."""
    return (uses_verl(ctx) and verl_defines(ctx, _facts(ctx.target)["verl"]["helpers"])) or uses_vllm(ctx)


class DeviceAgnostic:
    """The device-agnostic expressions of one file; asking for one records the import it needs. One per
    file, shared by its rules (`of`): the file's style is decided once."""

    @classmethod
    def of(cls, ctx: PythonContext) -> DeviceAgnostic:
        found = ctx.shared.get(cls)
        if not isinstance(found, cls):
            found = ctx.shared[cls] = cls(ctx)
        return found

    def __init__(self, ctx: PythonContext):
        self.ctx = ctx
        facts = _facts(ctx.target)
        self._torch = _release(ctx.options.torch_version or facts["torch"]["newest"])
        self._since = {name: _release(v) for name, v in facts["torch"]["since"].items()}
        self._portable = portable_forms(ctx.target)  # torch.cuda name -> its forms (portable_torch.yaml)
        verl = ctx.options.verl_version
        helpers = facts["verl"]["helpers"]
        self._verl = helpers if uses_verl(ctx) and (
            verl is None or _release(verl) >= _release(facts["verl"]["since"])) and verl_defines(ctx, helpers) else None
        # A vLLM file names its device through vLLM's platform (vllm-ascend's NPUPlatform answers "npu").
        self._vllm = facts["vllm"] if self._verl is None and uses_vllm(ctx) else None

    @property
    def framework_device_module(self) -> bool:
        """The file's framework has its own device-module helper (verl's get_torch_device()), which its
        maintainers write for every torch.cuda name rather than torch.accelerator's."""
        return self._verl is not None

    def has(self, form: str) -> bool:
        """The oldest torch the output must run on has this form (a key of device_agnostic.yaml's since:)."""
        return self._torch >= self._since[form]

    # -- the three values every rule asks for ------------------------------------------------------
    def is_npu(self) -> cst.BaseExpression:
        if self._verl:
            return self._verl_name("is_npu")
        if self._vllm:  # vLLM's platform plugin knows, also before torch_npu is imported
            return cst.Comparison(left=self._vllm_device_type(), comparisons=[
                cst.ComparisonTarget(cst.Equal(), cst.SimpleString('"npu"'))])
        return self._torch_expr('hasattr(torch, "npu")')

    def device_type(self, *, available: bool = False, compared: bool = False) -> cst.BaseExpression:
        """A str at run time: the accelerator's device type ("cuda" or "npu"); where torch has no accelerator
        "cpu", as PyTorch's own idiom says, for a value, and None for an operand of `==` / `!=` (`compared`),
        which must stay false on a CPU host as `x.type == "cuda"` was (`available`: the code has just
        checked there is one)."""
        if self._verl:
            return cst.Call(self._verl_name("device_name"))
        if self._vllm:
            return self._vllm_device_type()
        if self.has("current_accelerator"):
            if available:
                return self._torch_expr("torch.accelerator.current_accelerator().type")
            otherwise = "None" if compared else '"cpu"'
            return self._torch_expr(f"torch.accelerator.current_accelerator().type "
                                    f"if torch.accelerator.is_available() else {otherwise}")
        return self.choose(cst.SimpleString('"npu"'), cst.SimpleString('"cuda"'))

    def device(self) -> cst.BaseExpression:
        """For positions that take a torch.device (`.to(...)`): the accelerator's device; None (the
        current device) where torch has no accelerator; in verl files the current device's index
        (`get_device_id()`), as verl writes it."""
        if self._verl:
            return cst.Call(self._verl_name("device_id"))
        if self.has("current_accelerator") and not self._vllm:
            return self._torch_expr("torch.accelerator.current_accelerator()")
        return self.device_type()

    def current_device(self) -> Optional[cst.BaseExpression]:
        """The framework's own spelling of `torch.cuda.current_device`, or None (verl: get_device_id)."""
        return self._verl_name("device_id") if self._verl else None

    def device_module(self) -> cst.BaseExpression:
        """The accelerator's torch module (torch.cuda or torch.npu) at run time."""
        if self._verl:
            return cst.Call(self._verl_name("torch_device"))
        # Not torch.get_device_module(): on a host without an accelerator it returns torch.cpu, which has
        # no manual_seed_all, empty_cache, ... (device_agnostic.yaml): the input's no-op would raise there.
        return self.choose(self._torch_expr("torch.npu"), self._torch_expr("torch.cuda"))

    def backend(self) -> cst.BaseExpression:
        """A str at run time: the collective backend of the accelerator ("nccl" or "hccl")."""
        if self._verl:
            return cst.Call(self._verl_name("backend"))
        return self.choose(cst.SimpleString('"hccl"'), cst.SimpleString('"nccl"'))

    def too_new(self, cuda_name: str) -> bool:
        """Every form portable_torch.yaml gives the name (torch.accelerator's, torch's, the device module's)
        is newer than the torch the output must run on (ExternalStream: torch.npu has it from 2.10): the
        line is kept for CUDA rather than written in a form that torch (or its torch-npu) lacks."""
        entry = self._portable.get(cuda_name)
        if entry is None or entry.get("note") == "graph":
            return False
        forms = [f for f in (entry, entry.get("older")) if f and any(k in f for k in ("accelerator", "torch", "device_module"))]
        # An entry with torch.accelerator's form alone (synchronize, set_device, current_device, device_count,
        # is_available, set_stream) falls back to the device module: torch.npu has those in every release.
        return any("device_module" in f for f in forms) and all(self._torch < _release(f["since"]) for f in forms)

    def torch_form(self, cuda_name: str, *, keywords: bool = False) -> Optional[cst.BaseExpression]:
        """The device-agnostic spelling of `torch.cuda.<cuda_name>` (a dotted name under torch.cuda) from
        portable_torch.yaml, in the first of its forms that the torch the output must run on has:
        torch.accelerator's function (not for a call with keywords: its device argument is positional
        only), torch's own name, or the device module's; None where there is none."""
        entry = self._portable.get(cuda_name)
        if entry is not None and entry.get("note") == "graph":
            # torch.accelerator.Graph is not what `torch.get_device_module().graph(g)` captures with: a
            # CUDAGraph keeps its device's own class (the explicit choice, in torch_cuda_api).
            return None
        for form in (entry, (entry or {}).get("older")):
            if not form or "none" in form or self._torch < _release(form["since"]):
                continue
            if "accelerator" in form and not keywords:
                return self._torch_expr(f"torch.accelerator.{form['accelerator']}")
            if "torch" in form:
                return self._torch_expr(f"torch.{form['torch']}")
            if "device_module" in form:
                return attributes(parenthesized(self.device_module()), form["device_module"].split("."))
        return None

    def choose(self, npu: cst.BaseExpression, cuda: cst.BaseExpression) -> cst.BaseExpression:
        """`npu if <the NPU is there> else cuda`."""
        return cst.IfExp(test=self.is_npu(), body=npu, orelse=cuda)

    def _vllm_device_type(self) -> cst.BaseExpression:
        assert self._vllm is not None
        module, name = self._vllm["platform"].rsplit(".", 1)
        self.ctx.require_import(module, name)
        return cst.Attribute(value=cst.Name(name), attr=cst.Name(self._vllm["device_type"]))

    def torch_name(self) -> str:
        """How this scope of the file names torch (`import torch as T`: `T`); `torch`, imported if need be."""
        found = self.ctx.imports.local_for("torch")
        if found is not None and found[1] == "torch":
            return found[0]
        self.ctx.require_import("torch")
        return "torch"

    def _torch_expr(self, code: str) -> cst.BaseExpression:
        name = self.torch_name()
        return cst.parse_expression(code if name == "torch" else re.sub(r"\btorch\b", name, code))

    def _verl_name(self, helper: str) -> cst.BaseExpression:
        assert self._verl is not None
        module, name = self._verl[helper].rsplit(".", 1)
        self.ctx.require_import(module, name)
        return cst.Name(name)


def attributes(value: cst.BaseExpression, names: list[str]) -> cst.BaseExpression:
    for name in names:
        value = cst.Attribute(value=value, attr=cst.Name(name))
    return value


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` wrapped in parentheses where it is a conditional: `(a if c else b).attr`, `f"{(a if c else b)}"`."""
    if isinstance(node, cst.IfExp) and not node.lpar:
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


def with_quotes_unlike(expr: cst.BaseExpression, quote: str) -> cst.BaseExpression:
    """`expr` with its string literals in the other quote than `quote`: an expression inside an f-string
    may not use the f-string's own quote before Python 3.12."""
    text = cst.Module(body=[]).code_for_node(expr)
    other = "'" if quote[0] == '"' else '"'
    return cst.parse_expression(text.replace(quote[0], other)) if quote[0] in text else expr


def device_text_expr(text_head: str, device: cst.BaseExpression, rest: list, start: str, end: str) -> cst.BaseExpression:
    """A device string whose leading `cuda` (the first `len(text_head)` characters of its text, after
    which `rest` follows) becomes `device`: `"cuda"` -> device, `"cuda:1"` -> f"{device}:1"."""
    if not rest and text_head == "":
        return device
    inner = parenthesized(with_quotes_unlike(device, end))
    parts: list[cst.BaseFormattedStringContent] = [cst.FormattedStringExpression(expression=inner)]
    if text_head:
        parts.append(cst.FormattedStringText(text_head))
    return cst.FormattedString(parts=[*parts, *rest], start=start, end=end)  # type: ignore[arg-type]


class _Strings(cst.CSTVisitor):
    """Every string literal under a node, f-strings and the strings inside their expressions too."""

    def __init__(self, held: set[int]):
        super().__init__()
        self.held = held

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.held.add(id(node))

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.held.add(id(node))


def _hold_strings(node: cst.CSTNode, held: set[int]) -> None:
    """`_Strings` over `node`, walked by hand through the shapes nearly every annotation has (`int`,
    `torch.Tensor`, `Optional[dict[str, "Tensor"]]`, `A | None`): a LibCST visit of each annotation of a
    large file was a second of its run. Any other node is left to the visitor, so the set is the same."""
    if isinstance(node, cst.Name):
        return
    if isinstance(node, cst.SimpleString):
        held.add(id(node))
    elif isinstance(node, cst.Annotation):
        _hold_strings(node.annotation, held)
    elif isinstance(node, cst.Attribute):
        _hold_strings(node.value, held)
    elif isinstance(node, cst.Subscript) and all(isinstance(e.slice, cst.Index) for e in node.slice):
        _hold_strings(node.value, held)
        for element in node.slice:
            _hold_strings(cast(cst.Index, element.slice).value, held)
    elif isinstance(node, cst.BinaryOperation):
        _hold_strings(node.left, held)
        _hold_strings(node.right, held)
    else:
        visit(node, _Strings(held))


class LiteralOnly:
    """Mixin: the string literals that only a literal may replace (an annotation such as
    `Literal["cuda"]`, an implicit concatenation, a `case` pattern); their device-agnostic form is none."""

    def _literal_only_set(self) -> set[int]:
        if not hasattr(self, "_literal_only"):
            self._literal_only: set[int] = set()
        return self._literal_only

    def _hold_literals(self, node: cst.CSTNode) -> None:
        _hold_strings(node, self._literal_only_set())

    def visit_Annotation(self, node: cst.Annotation) -> None:
        self._hold_literals(node)

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> None:
        self._hold_literals(node)

    def visit_MatchValue(self, node: cst.MatchValue) -> None:
        self._hold_literals(node)

    def literal_only(self, node: cst.CSTNode) -> bool:
        return id(node) in self._literal_only_set()

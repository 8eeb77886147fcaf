"""`half-ported-condition`: a decision that picks the NPU and then calls CUDA anyway."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from npu_port.codemods.amp_state import amp_state_calls
from npu_port.transpiler.analysis.dispatch import (
    AMP_STATE_CUDA,
    code,
    cuda_api_in,
    npu_framework_file,
    refuses_saying_cuda,
)
from npu_port.transpiler.analysis.imports import dotted_name, iter_scope_statements
from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.analysis.positions import setting_read
from npu_port.transpiler.core.rules import PythonRule

# A test that is true on the NPU: torch.npu's availability or count asked, a device compared with "npu", an
# `is_npu*` helper or attribute. (`"AMD" in torch.npu.get_device_name()` asks the NPU, and is false there.) (What is true on CUDA only is the converse; a condition may hold both, `or`-ed.)
_NPU_TEST = re.compile(r"""\btorch(?:_npu\.npu|\.npu)\.(?:is_available|device_count)\b|["']npu(?::\d+)?["']"""
                       r"""|\bis_npu\w*|\.is_npu\b""")
# A call CUDA alone answers: torch.cuda's functions and torch.backends.cuda's, `.cuda(`, torch's AMP state asked
# without a device.
_CUDA_CALL_OR_BUILD = re.compile(r"\btorch\.(?:backends\.)?cuda\.\w|\.cuda\s*\(|Platform\w*\s*\(|\btorch\.version\.cuda\b|"
                                 + AMP_STATE_CUDA)
_CUDA_CALL = re.compile(r"\btorch\.(?:backends\.)?cuda\.[A-Za-z_][A-Za-z_0-9.]*|\.cuda\(|" + AMP_STATE_CUDA)


# A CUDA test (the converse of _NPU_TEST): torch.cuda's availability, a device compared with "cuda", `.is_cuda`.
# An NPU call, and a predicate named for CUDA (`is_cuda_available()`, a project's or a library's).
_NPU_CALL = re.compile(r"\btorch(?:_npu)?\.npu\.[A-Za-z_]\w*|\.npu\(")
_CUDA_PREDICATE = re.compile(r"\bis_(?:torch_)?cuda(?:_\w+)?_available\b")
_CUDA_TEST = re.compile(r"""\btorch\.cuda\.(?:is_available|device_count)\b|==\s*["']cuda(?::\d+)?["']|\.is_cuda\b""")
# The values one device's arm of a decision gives: its device name or its collective backend.
_CUDA_VALUES = frozenset({"cuda", "nccl"})
_NPU_VALUES = frozenset({"npu", "hccl"})


def _device_value(node: cst.BaseExpression, values: frozenset[str]) -> Optional[str]:
    value = string_value(node)
    return value if value is not None and value.split(":")[0] in values else None


# A module of NVIDIA's stack by its dotted name: a `nvidia` or `cuda` segment (triton.backends.nvidia.driver,
# cupy.cuda, torch.cuda's submodules).
_NVIDIA_MODULE = re.compile(r"(?:^|\.)(?:nvidia|cuda)(?:\.|$)")
_IMPORTED = re.compile(r"^[ \t]*(?:from|import)[ \t]+([\w.]+)", re.M)

_FORK_RNG = frozenset({"torch.random.fork_rng", "torch.fork_rng"})

# A class named for another vendor, built: `return CudaPlatform()` (ROLL's platform detection, renamed).
_VENDOR_BUILD = re.compile(r"(?<![\w.])\w*(?:Cuda|CUDA|Nvidia|NVIDIA|Rocm|ROCm|ROCM)\w*Platform\w*\(")


def _gate_against(test: cst.Comparison, values: frozenset[str]) -> bool:
    """`x != "npu"`: one `!=` against one of `values` (a device's names)."""
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.NotEqual):
        return False
    return any(_device_value(o, values) for o in (test.left, test.comparisons[0].comparator))


def _and_operands(node: cst.BooleanOperation) -> list[cst.BaseExpression]:
    """`a and b and c` in order; an `or` inside stays one operand."""
    out: list[cst.BaseExpression] = []
    for side in (node.left, node.right):
        if isinstance(side, cst.BooleanOperation) and isinstance(side.operator, cst.And) and not side.lpar:
            out += _and_operands(side)
        else:
            out.append(side)
    return out


class HalfPortedCondition(PythonRule):
    """Reports a condition or branch that is taken on the NPU and then calls a CUDA API.

    What it does:
        Reports as errors:
        - in an `and` chain, a CUDA call after an operand that tests for the NPU:
          `torch.npu.is_available() and torch.cuda.get_device_capability() >= (8, 0)`;
        - in the body of an `if` whose test is an NPU test (`torch.npu.is_available()`,
          `device.type == "npu"`, `is_npu_available()`), a call of torch.cuda (memory, streams, graphs,
          ...) or `.cuda()`, torch's AMP state asked without a device (`torch.get_autocast_gpu_dtype()`: CUDA's,
          amp-state's table), and the building of another vendor's platform class (`CudaPlatform()`, at the
          test: a detection renamed so that the NPU picks CUDA's platform); the `else` side is CUDA's and
          is not judged;
        - in the same body, the profiler's `ProfilerActivity.CUDA`, or CUDA's version (`torch.version.cuda`,
          None on the NPU);
        - a gate `if device != "npu":` whose arm turns away every other device and says CUDA is needed
          (`print("FP8 training requires CUDA, ignoring --fp8")`, an error that demands CUDA): a feature its
          author runs on CUDA alone, now given to the NPU;
        - in the same body, a CUDA value given (`accelerator_type = "cuda"`, `return "nccl"`,
          `return "cuda", torch.float16`): the test was ported, its arm was not; or a module of NVIDIA's stack
          imported (`from triton.backends.nvidia.driver import libcuda_dirs`);
        - a conditional whose arms are swapped: `"nccl" if device.type == "npu" else "hccl"`,
          `"hccl" if torch.cuda.is_available() else "nccl"`; or that gives the NPU when a name bound to a
          CUDA test says it found CUDA: `"npu" if on_gpu else "cpu"`, `torch.npu if on_gpu else torch.cpu`.
        - a lookup of a setting whose default is one device's name compared with the other's:
          `os.environ.get("DEVICE", "npu") == "cuda"`, `getattr(args, "backend", "hccl") != "nccl"`.
        An `and` chain with an NPU test holds on the NPU alone (`not busy and torch.npu.is_available()`).
        A name the module binds to one device's test alone (`_IS_CUDA = torch.npu.is_available()`,
        `is_cuda_available = torch.cuda.is_available()`) is that device's test where it is used. Also `torch.random.fork_rng(devices=["npu"])` without `device_type` (it defaults
        to "cuda": CUDA's generators are forked, which raises on an NPU host). An assignment to torch.cuda (a shim that points it at torch.npu) is no call and is not reported.

    Why:
        These are the marks of a decision ported in part: the test now picks the NPU, the code it guards
        still asks CUDA, which raises on an NPU host ("Torch not compiled with CUDA enabled"). The CUDA
        original stopped at its availability test there; the half port runs into the call.

    Example:
        if torch.npu.is_available() and torch.cuda.get_device_capability() >= (8, 0):   # error
        if device.type == "npu":
            torch.cuda.empty_cache()                                                      # error
        elif torch.npu.is_available():
            accelerator_type = "cuda"                                                     # error

    Fix safety:
        Report-only: port the whole condition and its branch (an NPU test of the same meaning, the NPU
        call), or keep the whole of it for CUDA.
    """

    ID = "half-ported-condition"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("cuda", "fork_rng", "ProfilerActivity", "autocast_gpu", "is_autocast_enabled")

    @classmethod
    def scout(cls, facts, options) -> bool:
        # An NPU test (torch.npu / torch_npu / is_npu* in the code, or an "npu" value) and a CUDA call or a
        # platform built, outside the modules of an NPU framework (vllm_ascend, mindspeed: NPU code already,
        # whose torch.cuda is patched on purpose).
        if not (facts.has_word("npu", "torch_npu", "is_npu") or facts.any_string(lambda s: s.split(":")[0] == "npu")):
            return False
        return (facts.search_code(_CUDA_CALL_OR_BUILD) or facts.search_code(_CUDA_PREDICATE)
                or facts.has_word("fork_rng", "nvidia", "ProfilerActivity")
                or facts.any_string(lambda s: s.split(":")[0] in _CUDA_VALUES or "CUDA" in s)) \
            and not npu_framework_file(facts.path, facts.code)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._npu_branches = 0  # depth of `if` bodies taken on the NPU
        self._npu_bodies: set[int] = set()  # ids of those bodies
        self._reported: set[int] = set()  # the chain's operands are met again as inner chains
        self._npu_names = _names_bound_to_tests(ctx.module, ctx.text, npu=True)  # `_IS_CUDA = torch.npu.is_available()`
        self._cuda_names = _names_bound_to_tests(ctx.module, ctx.text, npu=False)  # `on_gpu = torch.cuda.is_available()`
        self._amp = amp_state_calls(ctx.target)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if not isinstance(node.operator, cst.And):
            return
        tested = False
        for operand in _and_operands(node):
            text = code(operand)
            if tested:
                found = _CUDA_CALL.search(text)
                if found is not None:
                    self._report(operand, found.group(), "this condition tests for the NPU, then calls")
                    return
            tested = tested or self._tests_npu(text)

    def visit_If(self, node: cst.If) -> None:
        if self._npu_test(node.test):
            self._npu_bodies.add(id(node.body))  # the body only: `else` is the other device's
            built = _VENDOR_BUILD.search(code(node.body))
            if built is not None:
                self._report(node.test, built.group().rstrip("("),
                             "this branch is taken on the NPU (its `if` tests for it), and builds",
                             "another vendor's platform, so the NPU is run as that vendor's device")
            left = cuda_api_in(node.body)  # (convert's own question: code, not text in strings)
            if left is not None and left.group() == "torch.version.cuda":
                # `if torch.npu.is_available(): print(f"CUDA Runtime : {torch.version.cuda}")`: CUDA's probe,
                # None on the NPU (and `nvcc` with it): the test was ported, the report it guards was not.
                self._report(node.test, "torch.version.cuda", "this branch is taken on the NPU (its `if` tests for "
                             "it), and reads", "CUDA's version, which is None there")
            nvidia = next((m for m in _IMPORTED.findall(code(node.body)) if _NVIDIA_MODULE.search(m)), None)
            if nvidia is not None:
                # `from triton.backends.nvidia.driver import libcuda_dirs` under `if DEVICE_TYPE == "npu":`:
                # CUDA's driver set-up, now run on the NPU.
                self._report(node.test, nvidia, "this branch is taken on the NPU (its `if` tests for it), and "
                             "imports", "a module of NVIDIA's stack, which an NPU host does not have")

        elif self._cuda_taken(node.test):
            npu = _NPU_CALL.search(code(node.body))
            if npu is not None:
                # `if is_cuda_available(): states["cuda"] = torch.npu.get_rng_state_all()`: CUDA's arm ported while
                # its test was not (or a vendor-named predicate kept): the NPU never reaches it, CUDA breaks in it.
                self._report(node.test, npu.group().rstrip("("), "this branch is taken on CUDA (its `if` tests for "
                             "it), and calls", "an NPU API, which CUDA hosts lack and the NPU never reaches here")
        elif isinstance(node.test, cst.Comparison) and _gate_against(node.test, _NPU_VALUES) \
                and refuses_saying_cuda(node.body, node.orelse is not None):
            # `if device_type != "npu": print("FP8 training requires CUDA, ignoring --fp8") else: <FP8>`: the
            # gate of a feature its author runs on CUDA alone, renamed: the NPU now gets the feature.
            self.report(node.test, "this gate turns away every device but the NPU, and says CUDA is what the code it "
                                   "guards needs: the test was ported, the feature was not", severity="error",
                        hint='restore the CUDA test (the feature runs on CUDA alone), or port the feature and its message')

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._npu_branches += id(node) in self._npu_bodies

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        self._npu_branches -= id(original) in self._npu_bodies
        return updated

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._npu_branches += id(node) in self._npu_bodies

    def leave_SimpleStatementSuite(self, original: cst.SimpleStatementSuite,
                                   updated: cst.SimpleStatementSuite) -> cst.SimpleStatementSuite:
        self._npu_branches -= id(original) in self._npu_bodies
        return updated

    def _tests_npu(self, text: str) -> bool:
        return _NPU_TEST.search(text) is not None or any(re.search(rf"(?<![\w.]){re.escape(n)}\b", text)
                                                          for n in self._npu_names)

    def _npu_test(self, test: cst.BaseExpression) -> bool:
        """True where the test holds on the NPU alone: an NPU test, or an `and` chain with one (`not busy and
        torch.npu.is_available()`: the other operands narrow it, they do not make it hold on CUDA)."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and not test.lpar:
            operands = _and_operands(test)
            return any(self._npu_test(o) for o in operands) and not any(
                _CUDA_CALL.search(t) or _CUDA_TEST.search(t) or self._tests_cuda(t) for t in map(code, operands))
        text = code(test)
        return self._tests_npu(text) and _CUDA_CALL.search(text) is None and " or " not in text \
            and not text.lstrip().startswith("not ") and "!=" not in text and _CUDA_TEST.search(text) is None

    def _cuda_taken(self, test: cst.BaseExpression) -> bool:
        """A test that holds on CUDA alone: a CUDA test (`torch.cuda.is_available()`, `is_cuda_available()`,
        `device.type == "cuda"`, a name bound to one), not negated, naming no NPU."""
        text = code(test)
        return (self._tests_cuda(text) or _CUDA_PREDICATE.search(text) is not None) and not self._tests_npu(text) \
            and " or " not in text and not text.lstrip().startswith("not ") and "!=" not in text

    def _tests_cuda(self, text: str) -> bool:
        """A CUDA test, or a name the module binds to one (`is_cuda_available = torch.cuda.is_available()`)."""
        return _CUDA_TEST.search(text) is not None or any(re.search(rf"(?<![\w.]){re.escape(n)}\b", text)
                                                           for n in self._cuda_names)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._npu_branches:
            self._gives_cuda_value(node.value, node)

    def visit_Return(self, node: cst.Return) -> None:
        if self._npu_branches and node.value is not None:
            self._gives_cuda_value(node.value, node)

    def _gives_cuda_value(self, value: cst.BaseExpression, node: cst.CSTNode) -> None:
        found = _device_value(value, _CUDA_VALUES)
        if found is None and isinstance(value, cst.Tuple):  # `return "cuda", torch.float16`
            found = next((v for e in value.elements if (v := _device_value(e.value, _CUDA_VALUES))), None)
        if found is not None and id(node) not in self._reported:
            self._reported.add(id(node))
            self.report(node, f'this branch is taken on the NPU (its `if` tests for it), and gives "{found}": '
                              "the test was ported and its arm was not (or the other way round)", severity="error",
                        hint="give the NPU's value (\"npu\" / \"hccl\") in the NPU's arm, or restore the CUDA test")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        test = code(node.test)
        negated = test.lstrip().startswith("not ") or "!=" in test or " or " in test
        if negated:
            return
        on_npu = self._tests_npu(test) and not self._tests_cuda(test)
        on_cuda = self._tests_cuda(test) and not self._tests_npu(test)
        body, orelse = (_NPU_VALUES, _CUDA_VALUES) if on_cuda else (_CUDA_VALUES, _NPU_VALUES) if on_npu else ((), ())
        if not body:
            return
        given, other = _device_value(node.body, frozenset(body)), _device_value(node.orelse, frozenset(orelse))
        device = "CUDA" if on_cuda else "the NPU"
        if given is not None and other is not None:
            self.report(node, f'this conditional gives "{given}" when it finds {device}, and "{other}" otherwise: '
                              "its arms are swapped", severity="error",
                        hint="swap the two values, or restore the test the arms were written for")
        elif on_cuda and _CUDA_TEST.search(test) is None \
                and (given is not None or re.fullmatch(r"torch(?:_npu)?\.npu", code(node.body).strip())):
            # `"npu" if is_cuda_available else "cpu"` (the name bound to torch.cuda.is_available() elsewhere,
            # where convert leaves it): on an NPU host the test is false, the CPU is chosen. (With the test
            # written in place, the test itself is CUDA left over, and reported as such.)
            self.report(node, f'this conditional gives the NPU\'s `{code(node.body).strip()}` when it finds CUDA: the '
                              "value was ported and its test was not, so an NPU host gets the other arm",
                        severity="error", hint="test for the NPU (torch.npu.is_available()) where the NPU is given")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # `os.environ.get("DEVICE", "npu") == "cuda"`: a lookup whose default names one device, compared with
        # the other's name: the default was ported and the comparison was not (or the reverse).
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
            return
        for read, other in ((node.left, node.comparisons[0].comparator), (node.comparisons[0].comparator, node.left)):
            found = setting_read(read) if isinstance(read, cst.Call) else None
            default = _device_value(found[1], _CUDA_VALUES | _NPU_VALUES) if found and found[1] is not None else None
            compared = _device_value(other, _CUDA_VALUES | _NPU_VALUES)
            if default and compared and (default.split(":")[0] in _NPU_VALUES) != (compared.split(":")[0] in _NPU_VALUES):
                self.report(node, f'`{found[0]}` defaults to "{default}" here and is compared with "{compared}": '  # type: ignore[index]
                                  "where it is not set, the test answers as for the other device: a decision ported in part",
                            severity="error", hint="give the default and the compared value the same device's name")
                return

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `if torch.npu.is_available(): activities.append(ProfilerActivity.CUDA)`: the profiler is asked for
        # CUDA's activity on the NPU (torch_npu's enum has no CUDA member; torch's records nothing there).
        if self._npu_branches and node.attr.value == "CUDA" and isinstance(node.value, (cst.Name, cst.Attribute)) \
                and (dotted_name(node.value) or "").rsplit(".", 1)[-1] == "ProfilerActivity":
            self._report(node, "ProfilerActivity.CUDA", "this branch is taken on the NPU (its `if` tests for it), and "
                         "asks the profiler for", "CUDA's activity, which records nothing there (torch_npu's enum has "
                         "no such member)")

    def visit_Call(self, node: cst.Call) -> None:
        self._fork_rng(node)
        if not self._npu_branches or self.ctx.is_patched(node):
            return
        name = dotted_name(node.func) or ""
        cuda: Optional[str] = None
        what = "which raises on an NPU host"
        if re.match(r"torch\.(?:backends\.)?cuda\.", name) and (self.ctx.resolve(node.func) or name).startswith("torch."):
            cuda = name
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "cuda":
            cuda = ".cuda("
        elif (found := self._amp.get(self.ctx.resolve(node.func) or "")) is not None and len(node.args) == found[0]:
            cuda, what = name, "which asks CUDA's autocast state, not the NPU's"  # (amp-state's table)
        if cuda is not None:
            self._report(node, cuda, "this branch is taken on the NPU (its `if` tests for it), and calls", what)

    def _fork_rng(self, node: cst.Call) -> None:
        """`torch.random.fork_rng(devices=["npu"])` without device_type: torch forks CUDA's generators (its
        device_type defaults to "cuda"), and on an NPU host raises."""
        if self.ctx.resolve(node.func) not in _FORK_RNG:
            return
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        devices = keywords.get("devices", node.args[0].value if node.args and node.args[0].keyword is None else None)
        if "device_type" in keywords or devices is None or len([a for a in node.args if a.keyword is None]) > 3:
            return
        if re.search(r"""["']npu(?::\d+)?["']|\btorch\.npu\.""", code(devices)):
            self.report(node, "`fork_rng` is given NPU devices but no `device_type`: it defaults to \"cuda\" and forks "
                              "CUDA's generators, which raises on an NPU host: a call ported in part",
                        severity="error", hint='add device_type="npu"')

    def _report(self, node: cst.CSTNode, cuda: str, where: str, what: str = "which raises on an NPU host") -> None:
        if id(node) in self._reported:
            return
        self._reported.add(id(node))
        if cuda.endswith((".is_available", ".device_count", ".is_initialized")):
            what = "which answers no on an NPU host, so this never holds there"
        self.report(node, f"{where} `{cuda.rstrip('(')}`, {what}: a decision ported in part",
                    severity="error", hint="port the whole condition and branch to the NPU, or keep all of it "
                                           "for CUDA")


def _names_bound_to_tests(module: cst.Module, text: str, npu: bool) -> frozenset[str]:
    """Names an assignment of the module (at any depth) binds to one device's test alone: the NPU's
    (`_IS_CUDA = torch.npu.is_available()`, `on_npu = device.type == "npu"`) or CUDA's
    (`is_cuda_available = torch.cuda.is_available()`)."""
    found: set[str] = set()
    if "npu" not in text:
        return frozenset()
    this, other = (_NPU_TEST, _CUDA_TEST) if npu else (_CUDA_TEST, _NPU_TEST)
    for node in iter_scope_statements(module.body, nested=True):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            value = code(node.value)
            if this.search(value) and not other.search(value) and (not npu or not _CUDA_CALL.search(value)) \
                    and " or " not in value and not value.lstrip().startswith("not ") and "!=" not in value \
                    and " if " not in value:
                found.add(node.targets[0].target.value)
    return frozenset(found)

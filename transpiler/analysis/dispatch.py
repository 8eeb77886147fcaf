"""Code that picks a branch by device: where a hard CUDA->NPU rewrite would change which branch runs.

Real repositories are written for several devices at once. They compare device names to choose a path,
map one device name to another, guard NVIDIA-only code with `is_nvidia`, key registries by device and
keep whole modules for NVIDIA-only stacks (cupy, NIXL, TensorRT-LLM). A rewrite inside such code makes
the NPU take the CUDA branch as well as its own, or the CUDA branch call torch.npu on a GPU host. Each
function below recognises one shape and returns why the code is left as written (a `Guard`), or None.

The engine's walk (core/python_source) asks them about every node of the kinds they know, outermost
first, and every node inside a guard is left by all rules with the guard's reason as an info finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Optional, Union, cast

import libcst as cst

from npu_port.transpiler.analysis.imports import dotted_name, iter_scope_statements
from npu_port.transpiler.analysis.npu_patching import framework_project, patched_by
from npu_port.transpiler.analysis.positions import setting_lookup
from npu_port.transpiler.analysis.project_devices import VENDOR_TEST, kept_cuda_calls, project_function
from npu_port.transpiler.core.report import Severity


@dataclass(frozen=True)
class Guard:
    reason: str  # completes "left as is: ..."
    severity: Severity = "info"


NPU_BRANCH = Guard("this branch is the CUDA side of code that already handles the NPU")
NAME_MAPPING = Guard("this expression maps one run-time device name to another (the other arm already "
                     "yields the NPU's name where it runs)")
NVIDIA_ONLY = Guard("this code runs only on another vendor's GPUs (it sits behind an NVIDIA or AMD ROCm test "
                    "such as `is_nvidia`, `torch.version.cuda`, `torch.version.hip` or a HIP/ROCR variable)")
VENDOR_CLASS = Guard("this class describes another vendor's GPUs (its name says so: a CUDA or ROCm platform, "
                     "backend or kernel wrapper); its device, backend and calls are that vendor's")
DEVICE_MODULE_RESOLVER = Guard("this picks the device module by name at run time (`getattr(torch, name)`); its "
                               "torch.cuda is the fallback for a name torch lacks")
CUDA_FEATURE_GATE = Guard("this gate keeps a feature on CUDA alone (the code after it has nothing of CUDA's to port: "
                          "a feature written for CUDA); renamed, the NPU would get it. Accept \"npu\" here once the "
                          "feature runs there", "warning")
NPU_TWIN = Guard("an NPU-guarded twin of this call follows (`if <npu>: torch.npu....`): this line is the CUDA one")
DEVICE_COMPARISON = Guard("this compares a run-time device name in a module that also handles the NPU: "
                          "renamed, the NPU would take this branch too")
RESOLVER_COMPARISON = Guard("this compares what a device resolver answers (`get_device_name()`, `torch_device`): it "
                            "is the NPU's name on an NPU already, so renamed the NPU would take this branch too")
IMPORTED_DEVICE_VALUE = Guard("this compares a device value that another module of the project defines and that "
                              "already names the NPU there (a device constant or resolver): it is the NPU's name on "
                              "an NPU, so renamed the NPU would take this branch too")
DISPATCH_PARAMETER = Guard("the code picks a branch by this setting (it compares it with the NPU's name), so "
                           "its default is a dispatch key, not a device to move")
REGISTRY_KEY = Guard("a registration key, not a device: renamed, this entry would take the NPU's slot")
NEEDS_TORCH_NPU = Guard("the file picks the NPU at run time and would have to import torch_npu on every host for "
                        "this; port it inside the NPU branch")
VENDOR_CHAIN = Guard("this decision picks among accelerators (it tests {} too): CUDA's arm stays CUDA's, and the "
                     "NPU needs an arm of its own beside it; renamed, CUDA hosts would lose theirs", "warning")
THIRD_PARTY_CUDA_FLAG = Guard("the value of a third-party `cuda=`-style option: it means CUDA there; decide "
                              "by hand what it should be on the NPU", "warning")

# "npu" as a word of its own (torch.npu, is_npu_available, device == "npu", NPU) and the other names only
# NPU code uses (the HCCL backend, torch_npu, Ascend), not inside `inputs`.
NPU_WORD = re.compile(r"(?<![a-z])(?:npu|hccl|ascend)(?![a-z])", re.I)
# The NPU named by code rather than prose: torch.npu, torch_npu, is_*npu*_available(), an "npu"/"hccl" value.
_NPU_CODE = re.compile(r"""\btorch\.npu\b|\btorch_npu\b|\bis_\w*npu\w*|["'](?:npu|NPU|hccl|HCCL)(?::[^"'\n]*)?["']""")
# Vendor tests whose true side is NVIDIA-only code (ROCm reuses torch.cuda, so `torch.version.hip` counts).
_NVIDIA_TEST = VENDOR_TEST
_ROCM_VARIABLES = re.compile(r"\b(?:HIP|ROCR)_VISIBLE_DEVICES\b")
_ENV_NAME_LITERAL = re.compile(r"""["']([A-Z][A-Z0-9]*_[A-Z0-9_]+)["']""")  # "CUDA_VISIBLE_DEVICES", "LOCAL_RANK"
_TORCH_GETATTR = re.compile(r"\bgetattr\(\s*torch\s*,\s*[A-Za-z_]")
# A test that picks the CUDA side: a comparison with the device name, or a CUDA availability check.
_CUDA_TEST = re.compile(r"""(?:==|!=|\bin\b)\s*["']cuda["']|["']cuda["']\s*(?:==|!=)|is_(?:torch_)?cuda_available|"""
                        r"""torch\.cuda\.is_available|\bis_nvidia\b|\bis_cuda\b""")
# Another accelerator's test (not CUDA's, not the NPU's): its availability, or a device name compared (a
# device name merely used, `torch.xpu.get_device_properties("xpu")`, is no test). Code that tests two or more
# of them picks among accelerators at run time (accelerate, transformers), and its CUDA parts are CUDA's.
_OTHER_ACCELERATOR = re.compile(
    r"\bis_(?:torch_)?(xpu|mlu|hpu|mps|musa|sdaa|neuron|tpu|xla|gaudi)\w*_available\b"
    r"|\btorch\.(xpu|mlu|hpu|musa|sdaa)\.is_available\b|\btorch\.backends\.(mps)\.is_available\b"
    r"""|(?:==|!=)\s*["'](xpu|mps|hpu|mlu|musa|sdaa)(?::\d+)?["']""")
# Accelerators a decision names beside CUDA that make it a choice among vendors (not Apple's MPS, the laptop
# fallback of single-GPU scripts: `"cuda" if ... else "mps" if ... else "cpu"` is ported as one device).
VENDOR_ARM = re.compile(
    r"\bis_(?:torch_)?(xpu|mlu|hpu|musa|sdaa|neuron|tpu|xla|gaudi)\w*_available\b"
    r"|\btorch\.(xpu|mlu|hpu|musa|sdaa)\.is_available\b"
    r"""|(?:==|!=)\s*["'](xpu|hpu|mlu|musa|sdaa)(?::\d+)?["']""")
VENDOR_WORDS = ("xpu", "mlu", "hpu", "mps", "musa", "sdaa", "neuron", "tpu", "xla", "gaudi")
# Device names a mapping expression translates between.
_DEVICE_NAME = re.compile(r"^(?:cuda|cpu|gpu|npu|hip|xpu|mps|rocm|musa|mlu)$")
_REGISTER = re.compile(r"regist", re.I)
# A test's mock of a torch.cuda function: `torch.cuda, "name"` (object and attribute) or `"...torch.cuda.name"`.
MOCKED_CUDA_NAME = re.compile(r"""torch\.cuda\s*,\s*["'](\w+)["']|torch\.cuda\.(\w+)["']""")
_DEVICE_KEYWORDS = frozenset({"device", "devices", "device_name", "device_type"})
# Keywords of other libraries' options that mean CUDA itself (mergekit's MergeOptions(cuda=...)).
_CUDA_FLAGS = frozenset({"cuda", "use_cuda", "gpu", "use_gpu", "on_gpu"})

# Modules that exist only for NVIDIA's stack: a whole weight-transfer engine on cupy or NIXL, TensorRT-LLM.
_NVIDIA_STACK_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+(cupy|nixl\w*|tensorrt_llm)\b", re.M)
# Modules of an NPU framework (vllm-ascend, MindSpeed): their CUDA references are deliberate (vLLM's
# torch.cuda names patched onto torch.npu, tests of the non-HCCL path, configs that say "cuda" on purpose).
# Only an unconditional (module-level) import counts: `if is_vllm_ascend_available(): from vllm_ascend ...`
# is a file that picks the NPU at run time.
# A package named for the NPU (vllm_ascend, verl_npu: a plugin loaded on NPU hosts) is NPU code by its path.
# A module that runs after torch.cuda was patched onto the NPU (transfer_to_npu, MindSpeed's megatron_adaptor,
# imported by it or by a module that importing it runs: MindSpeed-RL) is NPU code: analysis/npu_patching.
# vllm-ascend imported anywhere, also under `if is_vllm_ascend_available():` (the module picks vLLM's Ascend
# plugin at run time: its vLLM names are deliberate); MindSpeed at the top (a `try:` import of its adaptor is
# an optional patch of a module that is still converted).
_NPU_FRAMEWORK_IMPORT = re.compile(r"^(?:[ \t]*(?:import|from)[ \t]+(vllm_ascend)|(?:import|from)[ \t]+(mindspeed\w*))\b", re.M)
_NPU_FRAMEWORK_PATH = re.compile(r"(?:^|/)(\w+_(?:ascend|npu))/")


def npu_framework_reason(path: str, text: str) -> str:
    """Why the module at `path` (its `text`) is NPU code already, whose CUDA names are deliberate, or "".
    The one decision convert and check read (FileDispatch.npu_framework, the check rules' scouts)."""
    native = _NPU_FRAMEWORK_IMPORT.search(text) if ("vllm_ascend" in text or "mindspeed" in text) else None
    if native:
        return f"it imports {native.group(1) or native.group(2)}"
    package = _NPU_FRAMEWORK_PATH.search(path.replace("\\", "/"))
    if package:
        return f"it is part of {package.group(1)}"
    framework = framework_project(path, text)
    if framework:
        return f"a module of {framework}'s project that names it"
    return patched_by(path, text)


def npu_framework_file(path: str, code: str) -> bool:
    """A module of an NPU framework (vllm_ascend, mindspeed*, one run under transfer_to_npu): NPU code already."""
    return bool(npu_framework_reason(path, code))


_NVIDIA_STACK_PATH = re.compile(r"(?:^|[/_.-])(nccl|nixl|trtllm|tensorrt)(?:[/_.-]|$)", re.I)
# Adapters written for one vLLM release, named for it (VERL before 0.3: verl/third_party/vllm/vllm_v_0_6_3/):
# vLLM runs on Ascend through vllm-ascend, whose first release plugs into vLLM 0.7.1 (the vllm row of
# codemods/data/ascend/cuda_only_packages.yaml, which reports such a pin; a test keeps the two equal). Code for
# an older vLLM drives that vLLM's CUDA worker and has no NPU counterpart to be ported to.
_VLLM_RELEASE_PATH = re.compile(r"(?:^|/)vllm_v_?(\d+)_(\d+)(?:_(\d+))?/")
FIRST_ASCEND_VLLM = (0, 7, 1)


@dataclass(frozen=True)
class FileDispatch:
    """What one cheap look at a file's text says about which shapes can occur in it."""

    npu: bool  # it names the NPU somewhere (even in a comment): NPU branches can occur
    npu_code: bool  # it names the NPU in code: its comparisons with "cuda" and dispatch parameters pick branches
    nvidia_tests: bool
    registry: bool
    cuda_flags: bool
    nvidia_stack: str  # why the whole module is NVIDIA-only, or ""
    selects_npu: bool  # it picks the NPU at run time (an NPU predicate, an imported device resolver)
    module_by_name: bool  # it looks up torch's device module by a run-time name: getattr(torch, name)
    rocm_variables: bool  # it names HIP_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES
    cuda_mocks: bool  # it mocks a torch.cuda function (a test)
    text: str = field(repr=False, compare=False)  # for compared_with_npu, computed when first asked
    # Names the file imports from its own project that already answer the NPU's name on an NPU (a device
    # constant or resolver defined in another module: analysis/project_devices): comparing them is dispatch.
    resolvers: frozenset[str] = frozenset()
    path: str = field(default="", repr=False, compare=False)
    cuda_gates: bool = False  # it compares something `!= "cuda"` (a feature gate may step out there)
    # The other accelerators (xpu, mlu, hpu, mps, ...) its code tests, and whether it asks a vendor's availability
    # predicate (`is_xpu_available()`): two of these, and it picks among accelerators at run time (multi_vendor).
    vendors: frozenset[str] = frozenset()
    vendor_predicates: bool = False

    @property
    def multi_vendor(self) -> bool:
        """It picks among several accelerators at run time (accelerate's checkpointing, state, launchers): its
        CUDA parts are CUDA's arms of that choice, left whole (core/rules, left_as_is)."""
        return len(self.vendors) + self.vendor_predicates >= 2

    @property
    def vendor_names(self) -> str:
        """The other accelerators it tests, for a message: "HPU, MLU, XPU"."""
        return ", ".join(sorted(v.upper() for v in self.vendors))

    @cached_property
    def npu_framework(self) -> str:
        """Why the whole module is NPU code already, or "": asked only where a rule would change or report
        something (the project-wide part reads other files)."""
        return npu_framework_reason(self.path, self.text)

    @cached_property
    def kept_cuda_calls(self) -> dict[str, frozenset[str]]:
        """Names this test imports from its project, each with the torch.cuda functions its module calls while
        picking the device itself (analysis/project_devices): asked only of a file that mocks one."""
        return kept_cuda_calls(self.path, self.text) if self.cuda_mocks else {}

    @classmethod
    def of(cls, path: str, text: str, resolvers: frozenset[str] = frozenset()) -> FileDispatch:
        # Each question is its regular expression's search of the text, asked where the literal its
        # matches begin with occurs (_found_at): see _found_at for why.
        npu = _names_npu_word(text)
        stack = ""
        found = _NVIDIA_STACK_IMPORT.search(text) if any(n in text for n in ("cupy", "nixl", "tensorrt_llm")) else None
        if found:
            stack = f"it imports {found.group(1)}"
        elif not npu:
            name = _NVIDIA_STACK_PATH.search(path.replace("\\", "/").rsplit("/", 1)[-1])
            if name:
                stack = f"its name says {name.group(1)}"
        if not stack and "vllm_v" in path:
            release = _VLLM_RELEASE_PATH.search(path.replace("\\", "/"))
            version = tuple(int(v or 0) for v in release.groups()) if release else None
            if version is not None and version < FIRST_ASCEND_VLLM:
                stack = (f"it is written for vLLM {'.'.join(map(str, version))}, as its folder says, which no "
                         "vllm-ascend release supports")
        matches = list(_OTHER_ACCELERATOR.finditer(text)) if any(v in text for v in VENDOR_WORDS) else []
        vendors = frozenset(next(g for g in m.groups() if g) for m in matches)
        # A vendor's availability predicate (`is_xpu_available()`, a project's or a library's registry of
        # accelerators, not torch's own `torch.xpu.is_available()`) marks device-aware code on its own.
        predicates = any(m.group(1) for m in matches)
        multi_vendor = len(vendors) + predicates >= 2  # (as the property: its CUDA parts are CUDA's)
        return cls(module_by_name=_found_at(_TORCH_GETATTR, text, ("getattr(",)), path=path, vendors=vendors,
                   vendor_predicates=predicates,
                   selects_npu=bool(resolvers) or multi_vendor or selects_npu_at_run_time(text), npu=npu,
                   resolvers=resolvers, npu_code=npu and _found_at(_NPU_CODE, text, _NPU_CODE_STARTS),
                   nvidia_tests=_found_at(_NVIDIA_TEST, text, _NVIDIA_TEST_STARTS),
                   registry=_REGISTER.search(text) is not None,
                   cuda_flags=_found_at(_CUDA_FLAG, text, ("cuda", "gpu", "use_cuda", "use_gpu")),
                   nvidia_stack=stack, rocm_variables=_found_at(_ROCM_VARIABLES, text, _ROCM_STARTS), text=text,
                   cuda_mocks="torch.cuda" in text and MOCKED_CUDA_NAME.search(text) is not None,
                   cuda_gates="!=" in text and _GATE_TEST.search(text) is not None)

    @cached_property
    def compared_with_npu(self) -> frozenset[str]:
        r"""The words the text compares with the NPU's name, `W == "npu"`, `"npu" != W` (W a whole word;
        the quote may open a longer string), read at each quoted npu. The dispatch tests on parameter and
        lookup defaults search the text, or a function body rendered from it, for such a comparison of
        one name; a rendering differs from the text only in the length of its indentation runs, which
        their `\s*` and `\b` do not tell apart, so a name outside this set is found by neither."""
        text = self.text
        found: set[str] = set()
        for quote in _NPU_QUOTED:
            i = text.find(quote)
            while i != -1:
                after = _COMPARED_AFTER_NPU.match(text, i)
                if after:
                    found.add(after.group(1))
                before = _word_compared_before(text, i)
                if before:
                    found.add(before)
                i = text.find(quote, i + 1)
        return frozenset(found)

    def may_compare_with_npu(self, name: str) -> bool:
        """False only where no `name == "npu"`-style comparison can occur in the file (see
        compared_with_npu; a name that is not one word is not ruled out)."""
        return name in self.compared_with_npu or _WORD.fullmatch(name) is None


_NPU_QUOTED = ('"npu', "'npu", '"NPU', "'NPU")
_COMPARED_AFTER_NPU = re.compile(r"""["'](?:npu|NPU)["']\s*(?:==|!=)\s*(\w+)\b""")
_WORD = re.compile(r"\w+")


def _word_compared_before(text: str, quote: int) -> Optional[str]:
    r"""W where `\bW\s*(?:==|!=)\s*` ends at `quote`, else None: read backwards, with the regular
    expressions' own classes (`\s` is str.isspace, `\w` str.isalnum or "_"). The operator ends the
    blank run before the quote, and W is the whole word before the blank run before the operator."""
    j = quote
    while j and text[j - 1].isspace():
        j -= 1
    if text[j - 2:j] not in ("==", "!=") or j < 2:
        return None
    j -= 2
    while j and text[j - 1].isspace():
        j -= 1
    k = j
    while k and (text[k - 1].isalnum() or text[k - 1] == "_"):
        k -= 1
    return text[k:j] if k < j else None


def _found_at(pattern: re.Pattern, text: str, starts: Sequence[str], haystack: Optional[str] = None) -> bool:
    r"""`pattern.search(text) is not None`, for a pattern each of whose matches begins with one of
    `starts` (after zero-width assertions, which `match` at a position still reads around): the
    pattern is tried only where they occur (in `haystack`, a same-length spelling of the text, if
    given). A pattern that opens with `\b` or a lookbehind has no literal prefix for the engine's
    fast scan, and searching a large file for one that fails cost milliseconds; str.find does not."""
    where = text if haystack is None else haystack
    for start in starts:
        i = where.find(start)
        while i != -1:
            if pattern.match(text, i):
                return True
            i = where.find(start, i + 1)
    return False


def _names_npu_word(text: str) -> bool:
    """NPU_WORD.search(text) is not None. NPU_WORD ignores case: in ASCII text its matches begin where
    the lower-cased text (the same length) holds a lower-case word; elsewhere case folding can map
    other letters (the long s) onto these, and the text is searched."""
    if not text.isascii():
        return NPU_WORD.search(text) is not None
    return _found_at(NPU_WORD, text, ("npu", "hccl", "ascend"), text.lower())


# Where the matches of the patterns above can begin (each alternative's literal start).
_NPU_CODE_STARTS = ("torch.npu", "torch_npu", "is_", *(q + w for q in "\"'" for w in ("npu", "NPU", "hccl", "HCCL")))
_NVIDIA_TEST_STARTS = ("is_", "torch.version.", "hip_", "rocr_", "rocm_", "HIP_", "ROCR_")
_ROCM_STARTS = ("HIP_", "ROCR_")
_CUDA_FLAG = re.compile(r"\b(?:use_)?(?:cuda|gpu)\s*=")


# Availability checks for the NPU, and device resolvers a file imports from its framework (verl's
# get_device_name, transformers.testing_utils.torch_device): such a file runs on GPU and CPU hosts too.
_NPU_PREDICATE = re.compile(r"\bis_\w*npu\w*_available\b")
_IMPORT_FROM = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_RESOLVER_NAMES = ("get_device_name", "get_torch_device", "get_available_device", "torch_device", "get_device_type",
                   "get_nccl_backend")
_RESOLVERS = re.compile(rf"\b(?:{'|'.join(_RESOLVER_NAMES)})\b")


def selects_npu_at_run_time(text: str) -> bool:
    if "npu" in text and _found_at(_NPU_PREDICATE, text, ("is_",)):
        return True
    if "import" not in text or not _found_at(_RESOLVERS, text, _RESOLVER_NAMES):
        return False
    return any(_RESOLVERS.search(m.group(1)) for m in _IMPORT_FROM.finditer(text))


def npu_framework_guard(why: str) -> Guard:
    return Guard(f"NPU code already ({why}): its CUDA names are deliberate, nothing in it is converted")


def nvidia_stack_guard(why: str) -> Guard:
    return Guard(f"an NVIDIA-only module ({why}): nothing in it is converted; port it by hand or use its "
                 "HCCL / NPU counterpart", "warning")


# The dispatch tests render the same nodes again and again (a test for each branch and call below it:
# 5,330 renderings of 2,863 nodes on vllm-ascend, a tenth of its CPU). Nodes are immutable and hash by
# identity, and the cache holds the few hundred it keeps alive, so an answer is never another node's.
@lru_cache(maxsize=512)
def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _mentions_npu(node: cst.CSTNode) -> bool:
    return NPU_WORD.search(code(node)) is not None


def chain_tests(node: cst.If) -> Iterator[cst.BaseExpression]:
    current: object = node
    while isinstance(current, cst.If):
        yield current.test
        current = current.orelse


def _names_npu_value(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleString) and NPU_WORD.search(node.value) is not None


# NPU code in the last `else` of a chain whose tests ask CUDA: `if torch.cuda.is_available(): ...
# else: import torch_npu; return NpuPlatform()` (ROLL's platform detection).
_NPU_HANDLING = re.compile(r"\bimport\s+torch_npu\b|\btorch_npu\.|\btorch\.npu\.|\bNpu[A-Z]\w*|\bNPU[A-Z][a-z]\w*")


def _npu_else(node: cst.If) -> bool:
    """Whether the chain's final `else` handles the NPU (its tests ask CUDA alone): then the chain
    already dispatches between the devices and its CUDA arm stays, so the NPU still reaches the `else`."""
    current: object = node
    while isinstance(current, cst.If):
        current = current.orelse
    return isinstance(current, cst.Else) and _NPU_HANDLING.search(code(current.body)) is not None


def npu_guard(node: cst.CSTNode) -> Optional[Guard]:
    """The root of code that already handles both devices, whose CUDA side stays as written:
    - an if/elif chain whose tests mention the NPU, or whose final `else` handles it;
    - a conditional expression that mentions it in its test or either arm (`"nccl" if ... else "hccl"`
      must not become `"hccl" if ... else "hccl"`);
    - a list, tuple or set that names the NPU beside CUDA (`device=["cuda", "npu"]`, a registration
      for both devices, must not become `["npu", "npu"]`)."""
    if isinstance(node, cst.If):
        return NPU_BRANCH if any(_mentions_npu(t) for t in chain_tests(node)) or _npu_else(node) else None
    if isinstance(node, cst.IfExp):
        return NPU_BRANCH if _mentions_npu(node) else None
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return NPU_BRANCH if any(_names_npu_value(e.value) for e in node.elements) else None
    return None


def _is_device_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.SimpleString) and _DEVICE_NAME.match(node.raw_value.split(":")[0]) is not None


def _is_cuda_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.SimpleString) and node.raw_value.split(":")[0] == "cuda"


def mapping_guard(node: cst.IfExp) -> Optional[Guard]:
    """`"cuda" if name == "gpu" else name`, `dev if dev != "hip" else "cuda"`: a translation between
    device names, where one arm is the very value the test compares with a device name. That value is
    already the NPU's name where the code runs on one; only the other spelling is mapped."""
    test = node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    if not isinstance(test.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
        return None
    left, right = test.left, test.comparisons[0].comparator
    subject = left if _is_device_literal(right) else right if _is_device_literal(left) else None
    if subject is None:
        return None
    arms = (code(node.body), code(node.orelse))
    return NAME_MAPPING if code(subject) in arms else None


# A class named for another vendor: CudaPlatform, ROCmPlatform, CUDAGraphWrapper, NvidiaBackend (not "Hip"
# inside a word: Relationship).
_VENDOR_CLASS_NAME = re.compile(r"(?<![a-z])(?:Cuda|CUDA|Nvidia|NVIDIA|Rocm|ROCm|ROCM|Hip|HIP)(?=[A-Z0-9_]|$)")


def vendor_class_guard(node: cst.ClassDef) -> Optional[Guard]:
    """A class whose name says it is another vendor's (ROLL's CudaPlatform: `device_type = "cuda"`,
    `communication_backend = "nccl"` beside its NpuPlatform): its body describes that vendor, whole."""
    return VENDOR_CLASS if _VENDOR_CLASS_NAME.search(node.name.value) else None


def nvidia_guard(node: cst.CSTNode) -> Optional[Guard]:
    """`is_nvidia and torch.cuda.get_device_capability()[0] >= 9`, `if torch.version.cuda: ...`: code
    that asks NVIDIA-only questions behind a vendor test, or an `and` chain with one."""
    if isinstance(node, cst.If):
        return NVIDIA_ONLY if any(_NVIDIA_TEST.search(code(t)) for t in chain_tests(node)) else None
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
        # The whole chain: `torch.cuda.is_available() and torch.version.hip is not None` asks for a ROCm GPU,
        # availability included; renamed in part it would ask for an NPU that is a ROCm GPU.
        return NVIDIA_ONLY if _NVIDIA_TEST.search(code(node)) else None
    if isinstance(node, cst.IfExp):
        return NVIDIA_ONLY if _NVIDIA_TEST.search(code(node.test)) else None
    return None


_NEGATED_TEST = re.compile(r"^\s*\(*\s*not\b|!=|\bnot\s+in\b")


def comparison_guard(node: cst.Comparison, npu_module: bool, resolvers: frozenset[str] = frozenset()) -> Optional[Guard]:
    """`device_name == "cuda"`, `self.device != "cuda"` in a module that also handles the NPU, or
    `torch_device == "cuda"` / `get_device_name() == "cuda"` on a device resolver anywhere: a branch choice,
    since the value is the NPU's name where the code runs on one. (In a single-device module a plain
    comparison is converted: there is no NPU branch.)"""
    operands = [node.left, *(c.comparator for c in node.comparisons)]
    if not any(_is_cuda_literal(o) for o in operands):
        return None
    others = [o for o in operands if not isinstance(o, (cst.SimpleString, cst.FormattedString))]
    if npu_module:
        return DEVICE_COMPARISON if others else None
    if any(_names_one_of(code(o), resolvers) for o in others):
        return IMPORTED_DEVICE_VALUE
    return RESOLVER_COMPARISON if any(_RESOLVERS.search(code(o)) for o in others) else None


def _names_one_of(text: str, names: frozenset[str]) -> bool:
    """Whether `text` starts with one of `names` as a whole word or dotted name (`DEVICE`, `dev.DEVICE_TYPE`,
    `get_device()`, `get_device().type`)."""
    head = re.match(r"[A-Za-z_][\w.]*", text)
    if not names or head is None:
        return False
    dotted = head.group().rstrip(".")
    return any(dotted == n or dotted.startswith(n + ".") for n in names)


def _looks_up_device_module(node: cst.Call) -> bool:
    """`getattr(torch, name, torch.cuda)`: torch.cuda is the fallback for a name torch lacks."""
    return isinstance(node.func, cst.Name) and node.func.value == "getattr" and len(node.args) >= 2 \
        and dotted_name(node.args[0].value) == "torch" and not isinstance(node.args[1].value, cst.SimpleString)


def _registration_keys(node: cst.Call) -> list[cst.CSTNode]:
    """The device keywords of `register(..., device="cuda")`, `Registry.register_engine(device=[...])`,
    `@EngineRegistry.register(...)`: keys of a table, not devices."""
    if not _REGISTER.search((dotted_name(node.func) or "").rsplit(".", 1)[-1]):
        return []
    return [a.value for a in node.args if a.keyword is not None and a.keyword.value in _DEVICE_KEYWORDS]


def _dispatch_parameter_defaults(node: cst.FunctionDef, shapes: FileDispatch) -> list[tuple[cst.CSTNode, Guard]]:
    """Defaults of parameters that the function dispatches on instead of using as a device: in a
    `register*` function any device-named default (a registry key), elsewhere one the body compares with
    the NPU's name (`if device_name == "npu"`)."""
    params = [p for p in (*node.params.params, *node.params.kwonly_params) if p.default is not None]
    if not params:
        return []
    if _REGISTER.search(node.name.value):
        return [(p.default, REGISTRY_KEY) for p in params  # type: ignore[misc]
                if p.name.value in _DEVICE_KEYWORDS or p.name.value.endswith("device")]
    if not shapes.npu_code:
        return []
    out: list[tuple[cst.CSTNode, Guard]] = []
    for p in params:
        if not shapes.may_compare_with_npu(p.name.value):
            continue  # the body is rendered only for a name the file compares with the NPU's
        name = re.escape(p.name.value)
        if re.search(rf"""\b{name}\s*(?:==|!=)\s*["'](?:npu|NPU)|["'](?:npu|NPU)["']\s*(?:==|!=)\s*{name}\b""",
                     code(node.body)):
            out.append((p.default, DISPATCH_PARAMETER))  # type: ignore[arg-type]
    return out


def _dispatched_lookup_default(node: cst.Call, shapes: FileDispatch) -> list[tuple[cst.CSTNode, Guard]]:
    """`kwargs.get("device_name", "cuda")`, `getattr(cfg, "device", "cuda")` in a module that compares that
    setting with the NPU's name (`if self.device_name == "npu"`): the default picks the branch."""
    found = setting_lookup(node)
    if found is None:
        return []
    name, default = found
    if shapes.may_compare_with_npu(name) and \
            re.search(rf"""\b{re.escape(name)}\s*(?:==|!=)\s*["'](?:npu|NPU)["']""", shapes.text):
        return [(default, DISPATCH_PARAMETER)]
    return []


def _cuda_flag_values(node: cst.Call, resolve, shapes: FileDispatch) -> list[cst.CSTNode]:
    """Values of `cuda=`-style keywords of a call outside torch and outside the project
    (`MergeOptions(cuda=torch.cuda.is_available())`): the callee's option means CUDA; on the NPU host the
    converted value would turn it on. The project's own function (`self.get_init_hidden(bsz,
    use_cuda=x.is_cuda)` with the def in the file, or one imported from the project) is ported with the
    file: its flag is ported with it."""
    flagged: list[cst.CSTNode] = [a.value for a in node.args if a.keyword is not None and a.keyword.value in _CUDA_FLAGS]
    if not flagged:
        return []
    name = resolve(node.func) or dotted_name(node.func) or ""
    if name.startswith(("torch.", "torch_npu.")) or _project_function(node.func, shapes):
        return []
    return flagged


def _project_function(func: cst.BaseExpression, shapes: FileDispatch) -> bool:
    """Whether the callee is the project's own: a def of the file called by name or through self/cls, or
    a function the file imports from its project."""
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
        name = func.attr.value
    elif isinstance(func, cst.Name):
        name = func.value
        if project_function(shapes.path, shapes.text, name) is not None:
            return True
    else:
        return False
    return re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}\b", shapes.text, re.M) is not None


# -- where the engine's walk asks ---------------------------------------------------------------------------
_NPU_GUARD_TYPES = frozenset({cst.If, cst.IfExp, cst.List, cst.Tuple, cst.Set})
_NVIDIA_GUARD_TYPES = frozenset({cst.If, cst.IfExp, cst.BooleanOperation})
_BLOCK_TYPES = frozenset({cst.Module, cst.IndentedBlock})
GUARD_TYPES = _NPU_GUARD_TYPES | _NVIDIA_GUARD_TYPES | {cst.Comparison, cst.ClassDef}  # can start dispatch code
MARKING_TYPES = _BLOCK_TYPES | {cst.Call, cst.FunctionDef}  # can show dispatch code below them


def dispatch_guard(node: cst.CSTNode, shapes: FileDispatch) -> Optional[Guard]:
    """Why `node` (one of GUARD_TYPES) starts code that picks a branch by device, or None."""
    kind = type(node)
    guard = None
    if shapes.npu and kind in _NPU_GUARD_TYPES:
        guard = npu_guard(node)
    if guard is None and kind is cst.Comparison and (shapes.npu_code or shapes.selects_npu):
        guard = comparison_guard(node, shapes.npu_code, shapes.resolvers)  # type: ignore[arg-type]
    if guard is None and kind is cst.IfExp:
        guard = mapping_guard(node)  # type: ignore[arg-type]
    if guard is None and shapes.nvidia_tests and kind in _NVIDIA_GUARD_TYPES:
        guard = nvidia_guard(node)
    if guard is None and (shapes.vendors or shapes.vendor_predicates) and kind in (cst.If, cst.IfExp):
        guard = vendor_chain_guard(node)  # type: ignore[arg-type]
    if kind is cst.ClassDef:
        guard = vendor_class_guard(node)  # type: ignore[arg-type]
    return guard


def vendor_chain_guard(node: Union[cst.If, cst.IfExp]) -> Optional[Guard]:
    """`if torch.cuda.is_available(): ... elif torch.xpu.is_available(): ...`: one decision with an arm per
    accelerator vendor (accelerate's bnb helpers, a test choosing its launcher): left whole, CUDA's arm with it.
    (A module with two such vendors is left whole already: FileDispatch.multi_vendor.)"""
    tests = list(chain_tests(node)) if isinstance(node, cst.If) else _ifexp_tests(node)
    named = {next(g for g in m.groups() if g) for t in tests for m in VENDOR_ARM.finditer(code(t))}
    if not named:
        return None
    return Guard(VENDOR_CHAIN.reason.format(", ".join(sorted(v.upper() for v in named))), VENDOR_CHAIN.severity)


def _ifexp_tests(node: cst.IfExp) -> list[cst.BaseExpression]:
    tests: list[cst.BaseExpression] = []
    current: cst.BaseExpression = node
    while isinstance(current, cst.IfExp):
        tests.append(current.test)
        current = current.orelse
    return tests


def guards_below(node: cst.CSTNode, shapes: FileDispatch, resolve) -> list[tuple[cst.CSTNode, Guard]]:
    """Nodes under `node` (one of MARKING_TYPES) that are dispatch code, known before the walk reaches them:
    the `if`s of a block that handle the NPU and their CUDA siblings and twins, registration keys, lookup
    and parameter defaults the code dispatches on, third-party cuda= flags, device-module lookups, ROCm
    normalisation."""
    kind = type(node)
    if kind in _BLOCK_TYPES:
        body = node.body  # type: ignore[attr-defined]
        found = _block_guards(body) if shapes.npu else []
        if shapes.npu_code or shapes.selects_npu:
            found += _compared_arms(body, shapes)
        if shapes.cuda_gates:
            found += _feature_gates(body)
        return found
    out: list[tuple[cst.CSTNode, Guard]] = []
    if kind is cst.Call:
        if shapes.module_by_name and _looks_up_device_module(node):  # type: ignore[arg-type]
            out.append((node, DEVICE_MODULE_RESOLVER))
        if shapes.npu_code:
            out += _dispatched_lookup_default(node, shapes)  # type: ignore[arg-type]
        if shapes.registry:
            out += [(v, REGISTRY_KEY) for v in _registration_keys(node)]  # type: ignore[arg-type]
        if shapes.cuda_flags:
            out += [(v, THIRD_PARTY_CUDA_FLAG) for v in _cuda_flag_values(node, resolve, shapes)]  # type: ignore[arg-type]
        return out
    fn: cst.FunctionDef = node  # type: ignore[assignment]
    if shapes.cuda_mocks and shapes.kept_cuda_calls:
        tested = _tested_dispatch(fn, shapes.kept_cuda_calls)
        if tested is not None:
            return [(fn, tested)]
    if not (shapes.module_by_name or shapes.nvidia_tests or shapes.npu_code or shapes.registry):
        return out
    # The body is rendered (once: `code` keeps it) only where the file's text holds what is searched for.
    if shapes.module_by_name and _TORCH_GETATTR.search(code(fn.body)):
        out.append((fn.body, DEVICE_MODULE_RESOLVER))
    if shapes.nvidia_tests and shapes.rocm_variables and _ROCM_VARIABLES.search(code(fn.body)):
        out += _rocm_code(fn.body)
    if shapes.npu_code or shapes.registry:
        out += _dispatch_parameter_defaults(fn, shapes)
    return out


def _tested_dispatch(fn: cst.FunctionDef, kept: dict[str, frozenset[str]]) -> Optional[Guard]:
    """A test that mocks a torch.cuda function and calls project code that keeps it (code that picks the
    device itself): the mock drives the CUDA path, which the port keeps, so the mock and what the test
    expects of that path (`device.type == "cuda"`, `"nccl"`) are one decision with it and stay."""
    text = code(fn)
    mocked = {a or d for a, d in MOCKED_CUDA_NAME.findall(text)}
    for local in sorted(kept):
        both = sorted(mocked & kept[local])
        if both and re.search(rf"(?<![\w.]){re.escape(local)}\b", text):
            return Guard(f"this test mocks `torch.cuda.{both[0]}` to drive `{local}`, project code that keeps that "
                         "call (it handles the NPU apart, or asks CUDA behind a vendor test): the mock and what the "
                         "test expects of the CUDA path stay with it")
    return None


def _rocm_code(block: cst.BaseSuite) -> list[tuple[cst.CSTNode, Guard]]:
    """The code of a function that reconciles AMD's HIP_/ROCR_VISIBLE_DEVICES with CUDA_VISIBLE_DEVICES:
    ROCm's, left whole. That is the branch that does it, not its test and not the function around it:
    `if "AMD" in torch.cuda.get_device_name(): os.environ[...] = os.getenv("ROCR_VISIBLE_DEVICES")` runs its
    test on every device (the NPU too, where torch.cuda.get_device_name() raises), and the rest of the
    function is the worker's set-up on any device. A statement outside any `if` that names the variables
    is ROCm's alone, and so is the branch of an `if` (or `elif`/`else`) that names them; an `if` whose
    test names them is ROCm's whole."""
    out: list[tuple[cst.CSTNode, Guard]] = []
    statements = block.body if isinstance(block, cst.IndentedBlock) else [block]
    rest = []
    for statement in statements:
        if not _ROCM_VARIABLES.search(code(statement)):
            rest.append(statement)
        elif isinstance(statement, cst.If) and not _ROCM_VARIABLES.search(code(statement.test)):
            branches = [statement.body] + ([statement.orelse] if statement.orelse is not None else [])
            out += [(branch, NVIDIA_ONLY) for branch in branches if _ROCM_VARIABLES.search(code(branch))]
        else:
            out.append((statement, NVIDIA_ONLY))
    # The variables that code sets are one set with their reads beside it (`return os.environ.get(
    # "CUDA_VISIBLE_DEVICES")` after the branches that set it from ROCR_VISIBLE_DEVICES): those stay too.
    names = {n for node, _ in out for n in _ENV_NAME_LITERAL.findall(code(node))}
    out += [(statement, NVIDIA_ONLY) for statement in rest
            if names & set(_ENV_NAME_LITERAL.findall(code(statement)))]
    return out


def _compared_arms(body: Sequence[cst.CSTNode], shapes: FileDispatch) -> list[tuple[cst.CSTNode, Guard]]:
    """The arm an `if` takes when a run-time device name is CUDA's (`if get_device_name() == "cuda": torch.cuda.
    empty_cache()`; the `else` of `!= "cuda"`): the comparison stays (comparison_guard), so the arm it picks is
    the CUDA side and stays with it. Ported alone, its body would be NPU code that the NPU never reaches."""
    out: list[tuple[cst.CSTNode, Guard]] = []
    for statement in body:
        if not isinstance(statement, cst.If):
            continue
        test = statement.test
        operands = _and_operands(test)
        for operand in operands:
            if not isinstance(operand, cst.Comparison) or len(operand.comparisons) != 1:
                continue
            guard = comparison_guard(operand, shapes.npu_code, shapes.resolvers)
            if guard is None:
                continue
            operator = operand.comparisons[0].operator
            if isinstance(operator, cst.Equal):
                out.append((statement.body, guard))
            elif isinstance(operator, cst.NotEqual) and len(operands) == 1 and isinstance(statement.orelse, cst.Else):
                out.append((statement.orelse, guard))
            break
    return out


def _and_operands(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an `and` chain (the test itself where it is none): each must hold for the arm to run."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _and_operands(test.left) + _and_operands(test.right)
    return [test]


def _feature_gates(body: Sequence[cst.CSTNode]) -> list[tuple[cst.CSTNode, Guard]]:
    """`if device_type != "cuda": return` (no `else`) followed by code with nothing of CUDA's in it to port (no
    torch.cuda, no "cuda" value, no use of the device compared: torchtitan's NUMA binding): the gate of a
    feature its author runs on CUDA alone. Renamed, the NPU would get the feature; left, it keeps stepping out."""
    out: list[tuple[cst.CSTNode, Guard]] = []
    for i, statement in enumerate(body):
        if not (isinstance(statement, cst.If) and statement.orelse is None and isinstance(statement.test, cst.Comparison)
                and _GATE_TEST.fullmatch(code(statement.test).strip()) and _exits(statement.body)):
            continue
        rest = body[i + 1:]
        # The device compared is not used after the gate either (`torch.zeros(1, device=device)` is device-generic
        # code the NPU runs as well): only the gated feature's own code follows.
        compared = re.compile(rf"\b{re.escape(code(statement.test.left).strip())}\b")
        if rest and not any(cuda_api_in(s) is not None or _CUDA_VALUE.search(code(s)) or compared.search(code(s))
                            for s in rest):
            out.append((statement, CUDA_FEATURE_GATE))
    return out


_GATE_TEST = re.compile(r"""[\w.()]+\s*!=\s*["']cuda["']""")
_CUDA_VALUE = re.compile(r"""["']cuda(?::\d+)?["']""")


def _exits(block: cst.BaseSuite) -> bool:
    """Whether a block always leaves the code that follows it (its last statement returns or raises)."""
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return False
    last = block.body[-1]
    return isinstance(last, cst.SimpleStatementLine) and bool(last.body) \
        and isinstance(last.body[-1], (cst.Return, cst.Raise))


def _block_guards(body: Sequence[cst.CSTNode]) -> list[tuple[cst.CSTNode, Guard]]:
    """In one block, each `if` rendered once:
    - the `if`s that handle the NPU;
    - the `if`s that dispatch on the device beside them (`if name == "cuda": opts["num_gpus"] = n` next to
      `if name == "npu": opts["resources"] = ...`: renamed, both would run on the NPU);
    - statements calling `torch.cuda.X` when an NPU `if` of the block calls `torch.npu.X` (the CUDA twin of
      `torch.cuda.manual_seed(s)` ... `if is_npu_available: torch.npu.manual_seed(s)`)."""
    ifs = [(s, npu_guard(s)) for s in body if isinstance(s, cst.If)]
    npu_ifs = [i for i, guard in ifs if guard is not None]
    # An NPU `if` inside a `try:` of the block (`try: import torch_npu; if torch.npu.is_available(): return
    # NpuPlatform()  except ImportError: pass`, ROLL's mcore_adapter): the block dispatches all the same.
    tried = [i for t in body if isinstance(t, cst.Try) and isinstance(t.body, cst.IndentedBlock)
             for i in t.body.body if isinstance(i, cst.If) and npu_guard(i) is not None]
    if not npu_ifs and not tried:
        return []
    out: list[tuple[cst.CSTNode, Guard]] = [(i, NPU_BRANCH) for i in npu_ifs]
    # `if is_npu_available(): return "npu"` and then `return "cuda"`: what follows an NPU `if` that always
    # returns is its `else`, the other devices' side (not after a negated test: that falls through on the NPU).
    for i in npu_ifs:
        if i.orelse is None and _exits(i.body) and not _NEGATED_TEST.search(code(i.test)):
            out += [(s, NPU_BRANCH) for s in body[body.index(i) + 1:]]
    out += [(i, NPU_BRANCH) for i, guard in ifs
            if guard is None and any(_CUDA_TEST.search(code(t)) for t in chain_tests(i))]
    npu_names = set(re.findall(r"\btorch\.npu\.(\w+)", " ".join(code(i) for i in npu_ifs)))
    if tried and not npu_ifs:
        return out
    if not npu_names:
        return out  # a twin calls only names the NPU `if`s call on torch.npu: with none, none is rendered
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            names = set(re.findall(r"\btorch\.cuda\.(\w+)", code(statement)))
            if names and names <= npu_names:
                out.append((statement, NPU_TWIN))
    return out


_SAYS_CUDA = re.compile(r"\bCUDA\b|\b(?:on|a|the) cuda\b|\bcuda (?:device|tensor|gpu)s?\b")
SAYS_NPU = re.compile(r"(?i)\b(?:npu|ascend)\b")


def refuses_saying_cuda(body: cst.BaseSuite, has_else: bool) -> bool:
    """Whether `body` turns away what is not CUDA and says so: it raises an error whose message demands
    CUDA, or it does nothing but say so (`print("FP8 training requires CUDA, ignoring --fp8")`, a warning)
    and step out (`return`, `continue`) or leave the feature to its `else`: the gate of a feature its author
    runs on CUDA alone. (A message alone, with nothing gated, is only a remark.)"""
    statements: Sequence[cst.CSTNode] = body.body if isinstance(body, cst.IndentedBlock) else \
        [cst.SimpleStatementLine(body=cast(cst.SimpleStatementSuite, body).body)]
    small = list(iter_scope_statements(statements))
    if any(isinstance(s, cst.Raise) and s.exc is not None and says_cuda(code(s.exc)) for s in small):
        return True
    return all(isinstance(s, _STEPS_OUT) or (isinstance(s, cst.Expr) and isinstance(s.value, cst.Call))
               for s in small) and any(isinstance(s, cst.Expr) and says_cuda(code(s)) for s in small) \
        and (has_else or any(isinstance(s, _STEPS_OUT) and not isinstance(s, cst.Pass) for s in small))


# What a gate's refusing arm may do besides saying why: step out of the code it guards.
_STEPS_OUT = (cst.Return, cst.Continue, cst.Break, cst.Pass, cst.Raise)


# A CUDA API still called in a decision: a torch.cuda / torch.backends.cuda name, `.cuda(`, `.is_cuda`.
# CUDA left in code after the rules ran: torch.cuda's API, `.cuda(`, `.is_cuda`, the CUDA version probe (None on
# the NPU: a branch that prints or parses it is CUDA's), and the profiler's CUDA activity (kept where the file's
# profiler stays on torch.profiler, profiler-npu).
_CUDA_API = re.compile(r"\btorch\.(?:backends\.)?cuda\.[A-Za-z_][A-Za-z_0-9.]*|\.cuda\(|\.is_cuda\b"
                       r"|\btorch\.version\.cuda\b|\bProfilerActivity\.CUDA\b")
# torch's AMP state asked without a device: CUDA's (amp-state ports it with the test around it; check's
# half-ported-condition finds it in a branch taken on the NPU). Not in _CUDA_API: amp-state's --keep-cuda form
# keeps the call as the CUDA arm of a choice, which is no CUDA left over.
AMP_STATE_CUDA = r"\btorch\.(?:get|set)_autocast_gpu_dtype\b|\btorch\.is_autocast_enabled\(\s*\)"
_QUOTED = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'")
# NVIDIA's command-line tools run from code (`subprocess.run(["nvidia-smi", ...])`, `os.popen("nvcc --version")`):
# a string, but a CUDA call all the same; an NPU host has neither.
_CUDA_TOOL = re.compile(r"""(?<=["'])(?:nvidia-smi|nvcc)(?=(?:\s+-[^"'\n]*)?["'])""")


def cuda_api_in(node: cst.CSTNode) -> Optional[re.Match[str]]:
    """The first CUDA API the code of `node` calls: not one in a comment or a string (`# torch.cuda.x is
    not needed here`, a log message), which the code text holds too; but one in an f-string's replacement
    field, and NVIDIA's tools run by name (`["nvidia-smi", ...]`)."""
    text = code(node)
    for found in _CUDA_API.finditer(text):
        before = _QUOTED.sub("", text[text.rfind("\n", 0, found.start()) + 1:found.start()])
        if "#" in before:
            continue
        if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
            return found
        # Inside a string: code still where it is a replacement field of an f-string (`f"{torch.version.cuda}"`).
        quote = max(before.rfind('"'), before.rfind("'"))
        field = before[quote + 1:]
        if quote > 0 and before[quote - 1] in "fF" and field.count("{") > field.count("}"):
            return found
    for found in _CUDA_TOOL.finditer(text) if "npu-smi" not in text else ():  # (beside npu-smi: a choice of tool)
        if "#" not in _QUOTED.sub("", text[text.rfind("\n", 0, found.start()) + 1:found.start()]):
            return found
    return None


def says_cuda(text: str) -> bool:
    """Whether a message demands CUDA ("requires CUDA", "must be on a cuda device") and names no NPU."""
    return _SAYS_CUDA.search(text) is not None and SAYS_NPU.search(text) is None

"""`vllm-gpu-worker`: a subclass of vLLM's GPU worker, or its path given as the worker class."""

from __future__ import annotations

import re

import libcst as cst

from npu_port.transpiler.analysis.literals import string_value
from npu_port.transpiler.core.rules import PythonRule

# vLLM's CUDA workers: the V1 engine's (vllm/v1/worker/gpu_worker.py) and the V0 engine's (vllm/worker/worker.py).
_GPU_WORKERS = frozenset({"vllm.v1.worker.gpu_worker.Worker", "vllm.worker.worker.Worker"})
_WORKER_MODULE = re.compile(r"\bvllm\.(?:v1\.)?worker\.(?:gpu_)?worker\b")
# Where vllm-ascend's platform points vLLM instead (vllm_ascend/platform.py, vllm-ascend 182b75e).
_NPU_WORKER = "vllm_ascend.worker.worker.NPUWorker"


class VllmGpuWorker(PythonRule):
    """Reports code built on vLLM's GPU worker, which vllm-ascend never runs.

    What it does:
        Reports (warning) a class that subclasses vLLM's CUDA worker (`vllm.worker.worker.Worker`,
        `vllm.v1.worker.gpu_worker.Worker`, under any import spelling) and a string that names one as the
        worker class (`worker_cls="vllm.worker.worker.Worker"`). Nothing is rewritten.

    Why:
        On Ascend, vllm-ascend's platform sets the worker class to its own `NPUWorker`
        (vllm_ascend.worker.worker). A subclass of the GPU worker (a weight-sync or offload wrapper, as RL
        frameworks add) is either bypassed, so its methods are missing when called, or, named as
        `worker_cls`, builds a CUDA worker on the NPU host.

    Example:
        class WorkerWrap(vllm.worker.worker.Worker): ...      # warning: subclass vllm-ascend's NPUWorker
        worker_cls="vllm.worker.worker.Worker"                 # warning

    Fix safety:
        Report-only: the wrapper's methods must be checked against NPUWorker's (its model runner and cache
        engine differ), then its base or the `worker_cls` path changed by hand.
    """

    ID = "vllm-gpu-worker"
    SAFETY = "report-only"
    NEEDS_TORCH_NPU = False
    TRIGGERS = ("worker.worker", "gpu_worker")

    @classmethod
    def scout(cls, facts, options) -> bool:
        # The worker imported from (or named in) vLLM's worker modules, not any `worker.worker` text.
        return facts.search(_WORKER_MODULE) or facts.any_string(lambda s: s in _GPU_WORKERS)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            resolved = self.ctx.resolve(base.value)
            if resolved in _GPU_WORKERS:
                self.report(base, f"`{node.name.value}` subclasses vLLM's GPU worker ({resolved}); vllm-ascend runs "
                                  f"its own {_NPU_WORKER}, so this class is bypassed or builds a CUDA worker",
                            hint=f"subclass {_NPU_WORKER} (check the methods it overrides against it)")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value in _GPU_WORKERS:
            self.report(node, f"the worker class named here ({value}) is vLLM's GPU worker; vllm-ascend's is "
                              f"{_NPU_WORKER}", hint=f'name {_NPU_WORKER} (or "auto", which the platform resolves)')

"""`half-renamed-env-set`: a set of environment-variable names that lacks the NPU name the file uses."""

from __future__ import annotations

import libcst as cst

from npu_port.codemods._env_name_sets import EnvNameWalk, NameSet, file_name_sets
from npu_port.codemods._env_table import EnvVarTable, env_triggers
from npu_port.transpiler.analysis.env_positions import EnvName, EnvPositions
from npu_port.transpiler.core.rules import PythonRule


class HalfRenamedEnvSet(EnvNameWalk, PythonRule):
    """Reports a set of environment-variable names that holds the CUDA name while the file uses the NPU one.

    What it does:
        A set, list or tuple of variable names that the file uses as a set of environment names (the names
        stripped from or copied out of the environment, exported in a loop: env-var-names' reading of
        such sets, codemods/_env_name_sets.py) and that holds a CUDA name (`CUDA_VISIBLE_DEVICES`) without
        the name the target reads for it (`ASCEND_RT_VISIBLE_DEVICES`), in a file that reads or sets that
        NPU name in an environment position (`os.environ.get("ASCEND_RT_VISIBLE_DEVICES")`), is reported
        (error) at the set. A set that holds both names, and a file that never names the NPU variable, are
        not reported (the second is what convert would still change, not a broken port).

    Why:
        A port that renames the reads of a variable and not the set of names the same process strips,
        copies or exports leaves the set describing the CUDA process: a worker keeps the device mask it
        was meant to drop, or exports the value it read from `ASCEND_RT_VISIBLE_DEVICES` under
        `CUDA_VISIBLE_DEVICES`, which the NPU never reads.

    Example:
        class WorkerMeta:
            keys = ["RANK", "CUDA_VISIBLE_DEVICES"]                              # error
        ...
            for key in WorkerMeta.keys:
                os.environ[key] = str(self.__dict__[f"_{key.lower()}"])
        def get_visible_devices(self):
            return os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "not set")
        should read: the set, the keys made from it and the reads ported together (or none of them).

    Fix safety:
        Report-only: add the NPU name where the set is used as names, or port the keys derived from it.
    """

    ID = "half-renamed-env-set"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = env_triggers()

    @classmethod
    def scout(cls, facts, options) -> bool:
        npu = tuple({row.npu for row in EnvVarTable.for_options(options).rows if row.status == "rename" and row.npu})
        return facts.any_code_string(lambda s: s in npu) and facts.any_code_string(
            lambda s: EnvVarTable.for_options(options).lookup(s) is not None)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.table = EnvVarTable.for_options(ctx.options)
        self.positions = EnvPositions(ctx.imports)
        self._sets: list[NameSet] = []
        self._used: dict[str, EnvName] = {}  # NPU names the file reads or sets, first use

    def visit_Module(self, node: cst.Module) -> None:
        complete, left = file_name_sets(self.ctx, self.table)
        self._sets = complete + left

    def _take(self, found: list[EnvName]) -> None:
        for env in found:
            self._used.setdefault(env.name, env)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        for names in self._sets:
            for _, old, new in names.additions:
                use = self._used.get(new)
                if use is None:
                    continue
                line = self.ctx.position(use.node).start.line
                self.report(names.node, f"this set of environment-variable names holds {old} but not {new}, which "
                                        f"the file reads or sets (line {line}): the reads were renamed and the set "
                                        "was not", severity="error",
                            hint=f"add {new} beside {old} where the names are stripped or copied, or port the keys "
                                 "made from them with the reads")
        return updated

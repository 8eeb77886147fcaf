"""scheduler-gpus: Slurm GPU requests a Python program builds for the jobs it submits."""

from __future__ import annotations

import re
from typing import Optional, Union

import libcst as cst

from npu_port.codemods._scheduler_gpus import DIRECTIVE, GPU_OPTION, HINT, SCHEDULER_COMMANDS, SLURM_GPU_OPTION
from npu_port.transpiler.core.rules import PythonRule

# Calls whose string arguments are text for a person, not a request: print, warnings and logger methods.
_MESSAGE_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


class SchedulerGpus(PythonRule):
    """Reports the Slurm GPU requests a Python program writes into the jobs it submits.

    What it does:
        Reports each string literal or f-string that is a scheduler argument asking for GPUs, one that
        no other program spells the same (`f"--gres=gpu:{n}"`, `"--gpus-per-node=8"`, `--gpu-bind`,
        `--mem-per-gpu`, `--cpus-per-gpu`), a scheduler command line that asks for them
        (`"sbatch --gpus=8 job.slurm"`), or a job script written from Python whose `#SBATCH` / `#PBS`
        / `#BSUB` lines ask for them. Other text that mentions such an option (a help string), strings
        that are only shown (`print`, `warnings.warn`, a logger's methods) and docstrings are left
        out; `--gpus=all` alone is docker's too. The shell side of the same
        requests is shell-scheduler-gpus.

    Why:
        A launcher that submits its evaluation or generation jobs with `sbatch --gres=gpu:8` asks an
        Ascend cluster for a resource it does not have under that name: the job waits in the queue for
        ever or is refused. The resource name is the site's, so it is reported, not rewritten.

    Example:
        cmd_args = [f"--gres=gpu:{num_gpus}", "slurm/evaluate.slurm"]   ->  unchanged; warning

    Fix safety:
        Report-only: the NPU resource name (`--gres=npu:N` is common on Slurm) is the cluster's.
    """

    ID = "scheduler-gpus"
    SAFETY = "report-only"
    TRIGGERS = ("--gres", "--gpus-per-", "--gpu-bind", "-per-gpu", "#SBATCH", "#PBS", "#BSUB", "sbatch", "srun",
                "salloc", "qsub", "bsub")

    def __init__(self, ctx):
        super().__init__(ctx)
        self._shown = 0  # depth of message calls (print, logger.info, ...) being walked
        self._docstrings: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if _is_message(node.func, self.ctx.resolve(node.func)):
            self._shown += 1

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if _is_message(original.func, self.ctx.resolve(original.func)):
            self._shown -= 1
        return updated

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        # A docstring (a statement that is a string alone) is text for a person: its strings are skipped.
        body = node.body
        if len(body) == 1 and isinstance(body[0], cst.Expr) and isinstance(body[0].value, _STRINGS):
            self._docstrings.update(id(n) for n in _strings(body[0].value))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = node.evaluated_value
        if isinstance(value, str):
            self._check(node, value)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        # The literal text, each replacement field as `{}`: `--gres=gpu:{}`.
        self._check(node, "".join(p.value if isinstance(p, cst.FormattedStringText) else "{}" for p in node.parts))

    def _check(self, node: Union[cst.SimpleString, cst.FormattedString], text: str) -> None:
        if self._shown or id(node) in self._docstrings:
            return
        found = _request(text)
        if found is not None:
            self.report(node, f"a GPU request to the batch scheduler, built in Python (`{found.group().strip()}`); an Ascend "
                              "cluster has none under that name", hint=HINT)


def _request(text: str) -> Optional[re.Match[str]]:
    """The GPU request in a string that is a scheduler argument (`--gres=gpu:8`), a scheduler command line
    (`sbatch --gpus-per-node=8 job.slurm`) or a job script with directive lines; None in other text (a
    help string, a message that mentions the option)."""
    stripped = text.lstrip()
    found = SLURM_GPU_OPTION.match(stripped)
    if found is not None:
        return found
    command = stripped.split(None, 1)
    if command and command[0].rsplit("/", 1)[-1] in SCHEDULER_COMMANDS:
        return GPU_OPTION.search(stripped)
    for line in DIRECTIVE.finditer(text):
        found = GPU_OPTION.search(line.group())
        if found is not None:
            return found
    return None


_STRINGS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def _strings(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The strings a string expression is made of (the parts of an implicit concatenation)."""
    if isinstance(node, cst.ConcatenatedString):
        return [*_strings(node.left), *_strings(node.right)]
    return [node]


def _is_message(func: cst.BaseExpression, name: Optional[str]) -> bool:
    if name in ("print", "warnings.warn") or (isinstance(func, cst.Name) and func.value == "print"):
        return True
    return isinstance(func, cst.Attribute) and func.attr.value in _MESSAGE_METHODS

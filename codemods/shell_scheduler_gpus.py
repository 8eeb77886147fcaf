"""shell-scheduler-gpus: GPU requests of batch schedulers (Slurm, PBS, LSF) in job scripts."""

from __future__ import annotations

from npu_port.codemods._scheduler_gpus import DIRECTIVE as _DIRECTIVE
from npu_port.codemods._scheduler_gpus import GPU_OPTION as _GPU_OPTION
from npu_port.codemods._scheduler_gpus import HINT
from npu_port.codemods._scheduler_gpus import SCHEDULER_COMMANDS as _SCHEDULER_COMMANDS
from npu_port.transpiler.text.shell import Script, ShellRule, basename


class ShellSchedulerGpus(ShellRule):
    """Reports the GPU requests a job script makes of its batch scheduler.

    What it does:
        In shell scripts (`.sh`, `.slurm`, `.sbatch`, `.pbs`, and files of any other name that start
        with a shell `#!`), reports each scheduler directive (`#SBATCH --gres=gpu:8`,
        `#SBATCH --gpus-per-node=8`, `#PBS -l select=1:ngpus=8`, `#BSUB -gpu "num=8"`) and each
        `sbatch` / `srun` / `salloc` / `qsub` / `bsub` command option that asks for GPUs.

    Why:
        An Ascend cluster's scheduler knows its NPUs under the name its administrators gave them (a GRES
        such as `npu:8` on Slurm, a custom resource on PBS): a job that asks for `gpu` waits in the queue
        for ever or is refused. The name is the site's, so it is reported, not rewritten.

    Example:
        #SBATCH --gres=gpu:8                ->  unchanged; warning: ask for the cluster's NPU resource
        srun --gpus-per-node=8 python t.py  ->  unchanged; warning

    Fix safety:
        Report-only: the NPU resource name (`--gres=npu:8` is common on Slurm) is the cluster's.
    """

    ID = "shell-scheduler-gpus"
    SAFETY = "report-only"
    TRIGGERS = ("gpu",)

    def check(self, script: Script) -> None:
        text = self.parsed.text
        hint = HINT
        for line in _DIRECTIVE.finditer(text):
            for option in _GPU_OPTION.finditer(line.group()):
                self.report(line.start() + option.start(), f"the job asks its scheduler for GPUs "
                            f"(`{option.group().strip()}`); an Ascend cluster has none under that name", hint=hint)
        for cmd in script.commands:
            # The scheduler command, also where it wraps the command it runs (`srun --gpus-per-node=8 python
            # t.py`: its options end at the program).
            program, _ = cmd.argv()
            words = cmd.words
            head = next((k for k in range(min(program + 1, len(words)))
                         if basename(words[k].value or "") in _SCHEDULER_COMMANDS), None)
            if head is None:
                continue
            name = basename(words[head].value or "")
            for word in words[head + 1:program if head < program else len(words)]:
                found = _GPU_OPTION.search(word.text)
                if found is not None:
                    self.report(word.start, f"`{name}` asks for GPUs (`{found.group().strip()}`); an "
                                            "Ascend cluster has none under that name", hint=hint)

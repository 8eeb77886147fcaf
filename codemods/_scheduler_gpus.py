"""What a batch scheduler's GPU request looks like (Slurm, PBS, LSF), shared by the shell rule that reads job
scripts (shell-scheduler-gpus) and the Python rule that reads the requests a program builds (scheduler-gpus)."""

from __future__ import annotations

import re

# A directive line's or a scheduler command's options that ask for GPUs: Slurm's --gres=gpu[:type]:N,
# --gpus[-per-node|-per-task|-per-socket]=N, -G N, --gpu-bind, --mem-per-gpu, --cpus-per-gpu; PBS's ngpus= /
# gpus= / :gpus=; LSF's -gpu.
GPU_OPTION = re.compile(
    r"--gres[= ]\S*\bgpu\b\S*|--gpus(?:-per-(?:node|task|socket))?[= ]\S+|(?<![\w-])-G\s*\d+|--gpu-bind\S*"
    r"|--(?:mem|cpus)-per-gpu\S*|\bn?gpus=\d+|(?<![\w-])-gpu\s+\S+")
# The same requests where no scheduler command is in sight (an argument a Python program builds): only the
# options no other program spells the same (`--gpus=all` is also docker's, `-G 2` anyone's).
SLURM_GPU_OPTION = re.compile(
    r"--gres[= ]\S*\bgpu\b\S*|--gpus-per-(?:node|task|socket)[= ]\S+|--gpu-bind\S*|--(?:mem|cpus)-per-gpu\S*")
# A scheduler directive line of a job script (`#SBATCH --gres=gpu:8`, `#PBS -l ngpus=8`, `#BSUB -gpu ...`).
DIRECTIVE = re.compile(r"^[ \t]*#(?:SBATCH|PBS|BSUB)\b[^\n]*", re.M)
SCHEDULER_COMMANDS = frozenset({"sbatch", "srun", "salloc", "qsub", "bsub"})
HINT = ("ask for the cluster's NPU resource instead (on Slurm usually --gres=npu:N); the name is the site's: see "
        "`scontrol show node` / `sinfo -o %G`")

"""shell-docker-gpus: `docker run --gpus ...` is reported with the Ascend device options."""

from __future__ import annotations

from npu_port.codemods._containers import CDI_PREFIX, devices_hint
from npu_port.transpiler.text.shell import CONTAINER_VALUE_OPTS, Script, ShellRule, basename, option_values

_ENGINES = ("docker", "podman", "nerdctl")
_HPC_ENGINES = ("apptainer", "singularity")
_HPC_RUNS = ("exec", "run", "shell", "instance")


class ShellDockerGpus(ShellRule):
    """Reports `docker run --gpus`, `--runtime=nvidia` and Apptainer's `--nv`, with what an Ascend container needs.

    What it does:
        For `docker run` / `docker create` (and podman, nerdctl), each `--gpus all`, `--gpus=...`,
        `--runtime nvidia` and CDI device (`--device nvidia.com/gpu=all`) is reported with a hint listing the Ascend `--device` options and the
        driver mounts (codemods/data/<target>/containers.yaml, the table the compose rules use).
        `apptainer exec --nv` / `singularity exec --nv` (also run, shell, instance start) is reported
        too: it binds NVIDIA's driver libraries into the container; an Ascend one needs the driver bound
        (`--bind /usr/local/Ascend/driver`) and the devices visible instead.
        Nothing is rewritten; `npu-port convert --extras` rewrites them (`shell-docker-devices`), and
        what that rule rewrites is then no longer reported.

    Why:
        `--gpus` goes through the NVIDIA container toolkit; an Ascend container gets
        `/dev/davinciN` per NPU plus `/dev/davinci_manager`, `/dev/devmm_svm`, `/dev/hisi_hdc` and
        mounts of the driver and npu-smi (vllm-ascend quick start). Which NPUs to pass is a
        deployment choice, so the rule does not guess.

    Example:
        docker run --gpus all -it image bash   ->  (reported, with the --device hint)

    Fix safety:
        Report only.
    """

    ID = "shell-docker-gpus"
    SAFETY = "report-only"
    TRIGGERS = ("--gpus", "nvidia", "--nv")  # `nvidia` also covers --runtime=nvidia and CDI's nvidia.com/gpu=...

    def check(self, script: Script) -> None:
        hint = devices_hint(self.ctx.target, "docker")
        for cmd in script.commands:
            args = cmd.args()
            self._apptainer_nv(cmd)
            if cmd.program() not in _ENGINES or not args or args[0].value not in ("run", "create"):
                continue
            for opt, _, vstart, vend in option_values(args, ["--gpus"]):
                self.report(opt.start, f"docker {args[0].value} --gpus {script.text[vstart:vend]}: "
                            "Ascend containers need --device options instead", hint=hint)
            for opt, _, vstart, vend in option_values(args, ["--device"]):
                if script.text[vstart:vend].strip("'\"").startswith(CDI_PREFIX):
                    self.report(opt.start, f"--device {script.text[vstart:vend]}: an NVIDIA CDI device; Ascend "
                                "containers need the /dev/davinci* devices instead", hint=hint)
            for opt, _, vstart, vend in option_values(args, ["--runtime"]):
                if script.text[vstart:vend].strip("'\"") == "nvidia":
                    self.report(opt.start, "--runtime nvidia: Ascend containers need --device options instead",
                                hint=hint)

    def _apptainer_nv(self, cmd) -> None:
        """`apptainer exec --nv IMAGE ...` (the engine is also a wrapper of the command it runs, so it is read
        from the words themselves, wherever it stands among other wrappers such as srun)."""
        words = cmd.words
        for i, word in enumerate(words[:-1]):
            if basename(word.value or "") not in _HPC_ENGINES or words[i + 1].value not in _HPC_RUNS:
                continue
            skip = False
            for option in words[i + 2:]:
                if skip:
                    skip = False
                elif option.value in CONTAINER_VALUE_OPTS:
                    skip = True  # its value is the next word
                elif option.value == "--nv":
                    self.report(option.start, f"{word.value} {words[i + 1].value} --nv binds NVIDIA's driver into the "
                                "container; on Ascend, bind the Ascend driver and make the NPUs visible instead",
                                hint="--bind /usr/local/Ascend/driver (and the CANN toolkit if the image lacks it); "
                                     "ASCEND_RT_VISIBLE_DEVICES selects the NPUs")
                elif not (option.value or "").startswith("-"):
                    break  # the image (or an option's value): what follows runs inside it
            return

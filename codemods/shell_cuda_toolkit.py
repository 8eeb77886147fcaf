"""shell-cuda-toolkit: nvcc and the CUDA toolkit's paths in shell scripts, which an Ascend host lacks."""

from __future__ import annotations

import re

from npu_port.codemods.cuda_version_probes import probes
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import TEXT_COMMANDS, Command, Script, ShellRule, Word

_MODULE_LOADS = frozenset({"load", "add", "try-load", "try-add"})


def _loaded_modules(cmd: Command) -> list[Word]:
    """The module names an environment-modules command loads: `module load cuda/12.4 gcc`, Lmod's
    `ml cuda/12.4` and `ml load cuda` (not `ml -cuda`, which unloads, nor `ml purge` and the other verbs)."""
    program, args = cmd.program(), [w for w in cmd.args() if w.value is not None]
    if program == "module":
        verbs = [k for k, w in enumerate(args) if not (w.value or "").startswith("-")]
        if not verbs or args[verbs[0]].value not in _MODULE_LOADS:
            return []
        return [w for w in args[verbs[0] + 1:] if not (w.value or "").startswith("-")]
    if program == "ml":
        names = [w for w in args if not (w.value or "").startswith("-")]
        if names and names[0].value in _MODULE_LOADS:
            return names[1:]
        return names if names and names[0].value not in _ML_VERBS else []
    return []


# Lmod's `ml` verbs other than load (`ml NAME` with none of them loads NAME).
_ML_VERBS = frozenset({"unload", "rm", "del", "purge", "list", "avail", "av", "spider", "show", "display", "help",
                       "whatis", "keyword", "save", "restore", "savelist", "swap", "sw", "switch", "reset", "refresh",
                       "update", "use", "unuse", "describe", "mt", "overview", "ov", "is-loaded", "is-avail",
                       "--help"})


class ShellCudaToolkit(ShellRule):
    """Reports CUDA toolkit programs, `$CUDA_HOME` expansions and `/usr/local/cuda` paths in shell.

    What it does:
        In shell scripts (and the `bash -c` / `ssh host "..."` bodies the shell lexer reads), reports
        each run of a CUDA toolkit program (`nvcc --version`, `nsys profile ...`, `ncu`), each
        expansion of a CUDA toolkit variable (`$CUDA_HOME`, `${CUDA_PATH}`) and each word that
        spells a CUDA install path (`/usr/local/cuda/bin`) or a path into NVIDIA's CUDA wheels
        (`LD_LIBRARY_PATH=.venv/lib/python3.11/site-packages/nvidia/nvjitlink/lib`), and each
        environment module of the CUDA stack a job script loads (`module load cuda/12.4`, Lmod's
        `ml cudnn`; codemods/data/<target>/cuda_probes.yaml). Text that is only printed (`echo`,
        `printf`) is left out, as are message heredocs.

    Why:
        An Ascend host has the CANN toolkit, not the CUDA one: `nvcc --version` fails (or, on a host
        that has both, answers a question that no longer matters), paths built from `$CUDA_HOME`
        are empty, and a cluster of NPUs has no `cuda` module to load (the job fails at its start). Such probes usually gate a build or pick a code path, so each needs a person.

    Example:
        nvcc --version | grep release         ->  unchanged; warning: no CUDA toolkit on Ascend
        export PATH=$CUDA_HOME/bin:$PATH      ->  unchanged; warning: $CUDA_HOME
        module load cuda/12.4                 ->  unchanged; warning: load CANN's set_env.sh instead

    Fix safety:
        Report-only: the CANN equivalent (`$ASCEND_TOOLKIT_HOME`, `source set_env.sh`) depends on what
        the script does with the answer.
    """

    ID = "shell-cuda-toolkit"
    SAFETY = "report-only"
    TRIGGERS = ("nvcc", "cuobjdump", "nvdisasm", "ncu", "nsys", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT",
                "CUDA_TOOLKIT_ROOT_DIR", "/usr/local/cuda", "packages/nvidia/", "module")
    # Lmod's `ml NAME`, not the end of `html` or `yaml`.
    TRIGGER_PATTERNS = (r"ml(?<![A-Za-z0-9_.-]ml)(?![A-Za-z0-9_.-])",)

    def check(self, script: Script) -> None:
        table = probes(self.ctx.target)
        paths = tuple(load_table(self.ctx.target, "cuda_probes")["toolkit_paths"])
        printed = [(c.start, c.end) for c in script.commands if c.program() in TEXT_COMMANDS]

        def is_printed(offset: int) -> bool:
            return any(start <= offset < end for start, end in printed)

        probes_table = load_table(self.ctx.target, "cuda_probes")
        wheel_paths = tuple(probes_table["wheel_paths"])
        names = "|".join(map(re.escape, probes_table["toolkit_modules"]))
        module = re.compile(rf"(?:{names})(?:[-_.]?\d[\w.+-]*)?")
        for cmd in script.commands:
            for word in _loaded_modules(cmd):
                name = (word.value or "").split("/", 1)[0].lower()
                if module.fullmatch(name):
                    self.report(word.start, f"`{cmd.program()} {'load ' if cmd.program() == 'module' else ''}"
                                            f"{word.value}` loads the CUDA stack; an Ascend host has none",
                                hint=probes_table["toolkit_module_hint"])
            i, _ = cmd.argv()
            if i < len(cmd.words) and cmd.program() in table.programs:
                self.report(cmd.words[i].start, f"`{cmd.program()}` is a CUDA toolkit program; an Ascend host "
                                                f"does not have it", hint=table.program_hint)
            if cmd.program() in TEXT_COMMANDS:
                continue
            for word in (*cmd.assignments, *cmd.words):
                path = next((p for p in paths if p in word.text), None)
                if path is not None:
                    self.report(word.start, f"a CUDA install path (`{path}`); an Ascend host has none",
                                hint=table.env_text[1])
                    continue
                path = next((p for p in wheel_paths if p in word.text), None)
                if path is not None:
                    self.report(word.start, f"a path into NVIDIA's CUDA wheels (`{path}`); an Ascend host has none",
                                hint=probes_table["wheel_path_hint"])
        for param in script.params:
            if param.name in table.env and not is_printed(param.start):
                self.report(param.start, f"${param.name}: {table.env_text[0]}", hint=table.env_text[1])

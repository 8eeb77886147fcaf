"""shell-cuda-toolkit: nvcc and the CUDA toolkit's paths in shell scripts, which an Ascend host lacks."""

from __future__ import annotations

from npu_port.codemods.cuda_version_probes import probes
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import TEXT_COMMANDS, Script, ShellRule


class ShellCudaToolkit(ShellRule):
    """Reports CUDA toolkit programs, `$CUDA_HOME` expansions and `/usr/local/cuda` paths in shell.

    What it does:
        In shell scripts (and the `bash -c` / `ssh host "..."` bodies the shell lexer reads), reports
        each run of a CUDA toolkit program (`nvcc --version`, `nsys profile ...`, `ncu`), each
        expansion of a CUDA toolkit variable (`$CUDA_HOME`, `${CUDA_PATH}`) and each word that
        spells a CUDA install path (`/usr/local/cuda/bin`). Text that is only printed (`echo`,
        `printf`) is left out, as are message heredocs.

    Why:
        An Ascend host has the CANN toolkit, not the CUDA one: `nvcc --version` fails (or, on a host
        that has both, answers a question that no longer matters), and paths built from `$CUDA_HOME`
        are empty. Such probes usually gate a build or pick a code path, so each needs a person.

    Example:
        nvcc --version | grep release         ->  unchanged; warning: no CUDA toolkit on Ascend
        export PATH=$CUDA_HOME/bin:$PATH      ->  unchanged; warning: $CUDA_HOME

    Fix safety:
        Report-only: the CANN equivalent (`$ASCEND_TOOLKIT_HOME`, `source set_env.sh`) depends on what
        the script does with the answer.
    """

    ID = "shell-cuda-toolkit"
    SAFETY = "report-only"
    TRIGGERS = ("nvcc", "cuobjdump", "nvdisasm", "ncu", "nsys", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT",
                "CUDA_TOOLKIT_ROOT_DIR", "/usr/local/cuda")

    def check(self, script: Script) -> None:
        table = probes(self.ctx.target)
        paths = tuple(load_table(self.ctx.target, "cuda_probes")["toolkit_paths"])
        printed = [(c.start, c.end) for c in script.commands if c.program() in TEXT_COMMANDS]

        def is_printed(offset: int) -> bool:
            return any(start <= offset < end for start, end in printed)

        for cmd in script.commands:
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
        for param in script.params:
            if param.name in table.env and not is_printed(param.start):
                self.report(param.start, f"${param.name}: {table.env_text[0]}", hint=table.env_text[1])

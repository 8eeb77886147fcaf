"""shell-verl-profiler: VERL launchers that profile with Nsight Systems (`global_profiler.tool=nsys`)."""

from __future__ import annotations

from npu_port.codemods import _verl_overrides
from npu_port.transpiler.tables import verl_keys
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import Script, ShellRule, python_launch, token_span

_NPU_HINT = ("on Ascend VERL's `npu` profiler (torch_npu's) reads each role's `profiler.tool_config.npu.*` "
             "(`discrete`, `contents`, `level`, `analysis`), as verl's *_prof_npu.sh launchers set them")


class ShellVerlProfiler(ShellRule):
    """Switches VERL's profiler from Nsight Systems to the NPU profiler in launchers.

    What it does:
        In a `python -m verl.trainer.main_ppo ...` command: `global_profiler.tool=nsys` becomes
        `global_profiler.tool=npu`; a role's `...profiler.tool_config.nsys.discrete=X` becomes
        `...profiler.tool_config.npu.discrete=X` where the targeted VERL release has that key
        (`verl-version`, the project's pin, else the newest snapshot); every other override of
        Nsight Systems' own options (`global_profiler.global_tool_config.nsys.*`, the
        `controller_nsight_options` / `worker_nsight_options` traces) is reported on its line with the
        NPU keys to set instead. The tools and sections are data (codemods/data/ascend/profilers.yaml,
        with their source).

    Why:
        Nsight Systems profiles CUDA and NVTX; there is no `nsys` on an Ascend host, so a launcher that
        asks VERL for it fails when the profiled step starts. VERL's `npu` profiler is the Ascend
        counterpart (verl v0.6.0 on), configured per role.

    Example:
        python3 -m verl.trainer.main_ppo global_profiler.tool=nsys global_profiler.steps=[1,2] \\
            actor_rollout_ref.actor.profiler.tool_config.nsys.discrete=True \\
            global_profiler.global_tool_config.nsys.discrete=True
        ->  python3 -m verl.trainer.main_ppo global_profiler.tool=npu global_profiler.steps=[1,2] \\
            actor_rollout_ref.actor.profiler.tool_config.npu.discrete=True \\
            global_profiler.global_tool_config.nsys.discrete=True   (warning: nsys option; the NPU keys to set)

    With --keep-cuda:
        The switch has no form that runs on both devices (`nsys` does not run on Ascend, `npu` not on a
        GPU): it is kept for CUDA, with a warning on its line.

    Fix safety:
        Review: the NPU profiler writes its own trace format (msprof, read with MindStudio Insight) into
        `global_profiler.save_path`, and what it collects is set by `contents` / `level`, not by nsys's
        `trace` list.
    """

    ID = "shell-verl-profiler"
    SAFETY = "review"
    TRIGGERS = ("nsys",)

    def check(self, script: Script) -> None:
        target = self.ctx.target
        entrypoints = load_table(target, "shell")["verl_entrypoints"]
        table = load_table(target, "profilers")
        release = verl_keys.release(_verl_overrides.target_verl(self.ctx.options))
        for cmd in script.commands:
            launch = python_launch(cmd)
            if not (launch and launch.is_module and launch.target in entrypoints):
                continue
            config = release.entry_config(launch.target) or "ppo_trainer"
            for word in launch.args:
                pair = _verl_overrides.override(word)
                if pair is None:
                    continue
                key, value = pair
                if key == "global_profiler.tool" and value.strip("'\"") in table["tools"]:
                    old = value.strip("'\"")
                    new = table["tools"][old]
                    span = token_span(script, word.start, word.end, old)
                    if span:
                        self.change(*span, new, f"global_profiler.tool={old} -> {new}: no {old} on Ascend",
                                    quote=cmd.quote, scope=(cmd.start, cmd.end))
                    continue
                if not any(f".{s}." in f".{key}." for s in table["cuda_sections"]):
                    continue
                if not self._twin(script, cmd, word, key, table, release, config):
                    self.report(word.start, f"`{key}` is an Nsight Systems option: nothing reads it on Ascend",
                                hint=_NPU_HINT)

    def _twin(self, script, cmd, word, key: str, table, release, config: str) -> bool:
        """Rename a role's `profiler.tool_config.nsys.<option>` to its NPU twin where the release has it;
        False where there is none."""
        prefix, _, option = key.rpartition(".")
        if option not in table["npu_twin_options"] or not prefix.endswith(".profiler.tool_config.nsys"):
            return False
        twin = prefix[: -len("nsys")] + "npu." + option
        if config not in release.configs or release.unknown_key(twin, config, invented_ok=False) is not None:
            return False
        at = script.text.find(".tool_config.nsys.", word.start, word.end)
        if at < 0:
            return False
        at += len(".tool_config.")
        span = (at, at + len("nsys"))
        self.change(*span, "npu", f"{key} -> {twin}", quote=cmd.quote, scope=(cmd.start, cmd.end))
        return True  # changed, or kept for CUDA with its own warning

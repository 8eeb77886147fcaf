"""yaml-verl-profiler: VERL configs that profile with Nsight Systems (`tool: nsys`)."""

from __future__ import annotations

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.tables.verl_keys import looks_like_verl_config
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule

_TRACE_HINT = ("Nsight Systems' `trace` list is read only with `tool: nsys`, which Ascend lacks; with `tool: npu` "
               "each role's `profiler.tool_config.npu` (`contents`, `level`, `analysis`) chooses what is collected")


class YamlVerlProfiler(YamlRule):
    """Switches VERL's profiler from Nsight Systems to the NPU profiler in VERL YAML configs.

    What it does:
        In a VERL config (a document with `global_profiler`, or two of VERL's top sections), a profiler section (`global_profiler`, or a role's `...profiler`) whose `tool`
        is `nsys` gets `tool: npu`; quotes and comments stay. The CUDA trace lists of Nsight Systems'
        options (`trace: "cuda,nvtx,..."` under `*_nsight_options`) are reported at info on their line:
        they are inert unless `tool: nsys`, and VERL's own configs keep them beside the `npu` section.
        The tools are data (codemods/data/ascend/profilers.yaml, with their source), shared with
        shell-verl-profiler.

    Why:
        There is no `nsys` on an Ascend host: a config that asks VERL for it fails when the profiled
        step starts. VERL's `npu` profiler (verl v0.6.0 on, the release that added `global_profiler`)
        is the Ascend counterpart.

    Example:
        global_profiler:                    global_profiler:
          tool: nsys              ->          tool: npu
          steps: [1, 2]                       steps: [1, 2]

    With --keep-cuda:
        The switch has no form that runs on both devices: it is kept for CUDA, with a warning on its line.

    Fix safety:
        Review: the NPU profiler writes msprof traces (MindStudio Insight) into `save_path`, and what it
        collects is set by `contents` / `level`, not by nsys's `trace` list.
    """

    ID = "yaml-verl-profiler"
    SAFETY = "review"
    TRIGGERS = ("nsys", "nsight_options")

    def check(self, doc: YamlDocument) -> None:
        if not any(hasattr(root, "keys") and ("global_profiler" in root or looks_like_verl_config(set(root)))
                   for root in doc.documents):
            return  # another framework's `profiler:` section is not VERL's
        tools = load_table(self.ctx.target, "profilers")["tools"]
        for path, mapping in doc.mappings():
            if path and (path[-1] == "profiler" or path[-1].endswith("_profiler")):
                tool = mapping.get("tool")
                if isinstance(tool, str) and tool in tools:
                    self.replace(doc.value_span(mapping, "tool"), tool, tools[tool],
                                 f"{'.'.join(path)}.tool: {tool} -> {tools[tool]}: no {tool} on Ascend")
            elif path and path[-1].endswith("nsight_options"):  # also legacy `trainer.controller_nsight_options`
                trace = mapping.get("trace")
                if isinstance(trace, str) and "cuda" in trace.split(","):
                    self.report(doc.value_span(mapping, "trace")[0],
                                f"`{'.'.join(path)}.trace` traces CUDA APIs (Nsight Systems)",
                                severity="info", hint=_TRACE_HINT)

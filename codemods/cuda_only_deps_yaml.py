"""`cuda-only-deps-yaml`: conda environment files and Ray runtime_env `pip:` lists that depend on
packages with no Ascend build."""

from __future__ import annotations

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from npu_port.codemods._cuda_packages import match_conda, match_requirement, message, switch_keys, switch_rows
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule


class CudaOnlyDepsYaml(YamlRule):
    """Reports dependencies with no Ascend build in conda environment files and `pip:` lists.

    What it does:
        In a conda environment file (a top-level `dependencies:` list beside `channels:` or `name:`,
        or a file named `environment*.yml` / `conda*.yml`), reports each conda package of the CUDA
        stack (`cudatoolkit`, `pytorch-cuda`, `cuda-*`, `cudnn`, `nccl`) and each package of
        codemods/data/<target>/cuda_only_packages.yaml. In every `pip:` list (conda's `- pip:`
        section, a Ray `runtime_env: {pip: [...]}` or its `{packages: [...]}` form) it reports each
        requirement with no Ascend build (`flash-attn`, `cupy-cuda12x`, `triton` -> `triton-ascend`).
        In any YAML, a config key set to true that switches such a package on (`use_liger_kernel`,
        LLaMA-Factory's `enable_liger_kernel` and `use_unsloth`, VERL's `use_liger`: the table's
        `switches`) is info, with the package's hint.

    Why:
        `conda env create` or a Ray worker's runtime_env installs these on the NPU host, where they
        fail to build or bring CUDA libraries nothing can load; the job fails at start-up, on every
        worker. They have to be dropped or swapped by hand.

    Example:
        dependencies:
          - pytorch-cuda=12.1           ->  unchanged; warning: install the CPU torch with torch-npu
          - pip:
            - flash-attn==2.6.3         ->  unchanged; warning: no Ascend build
        use_liger_kernel: true          ->  unchanged; info: Liger Kernel needs its Ascend build

    Fix safety:
        Report-only: which dependency replaces one (or whether it can simply go) is a decision.
    """

    ID = "cuda-only-deps-yaml"
    SAFETY = "report-only"
    # The two keys it reads: fewer YAML files parsed than with the package names (any YAML text names
    # CUDA somewhere), and every file it can report in has one of them.
    TRIGGERS = ("pip:", "\"pip\"", "'pip'", "dependencies:", *switch_keys())

    def check(self, doc: YamlDocument) -> None:
        name = self.ctx.path.replace("\\", "/").rsplit("/", 1)[-1].lower()
        conda_file = name.startswith(("environment", "conda"))
        for path, mapping in doc.mappings():
            if not path and isinstance(mapping.get("dependencies"), CommentedSeq) \
                    and (conda_file or "channels" in mapping or "name" in mapping):
                self._conda(doc, mapping["dependencies"])
            pip = mapping.get("pip")
            if isinstance(pip, CommentedMap):
                pip = pip.get("packages")
            if isinstance(pip, CommentedSeq):
                self._pip(doc, pip)
            self._switches(doc, mapping)

    def _switches(self, doc: YamlDocument, mapping: CommentedMap) -> None:
        """`use_liger_kernel: true`: a recipe that switches on a package of the table."""
        rows = switch_rows(self.ctx.target)
        for key, value in mapping.items():
            row = rows.get(key) if isinstance(key, str) else None
            if row is not None and (value is True or (isinstance(value, str) and value.lower() == "true")):
                self.report(doc.key_span(mapping, key)[0],
                            f"`{key}: true` switches on {row.what}: on the NPU host it needs a build for Ascend",
                            severity="info",
                            hint=f"{row.hint}; or set {key}: false")

    def _items(self, doc: YamlDocument, seq: CommentedSeq) -> list[tuple[int, str]]:
        out = []
        for i, item in enumerate(seq):
            if isinstance(item, str):
                out.append((doc.offset(*seq.lc.item(i)), item))
        return out

    def _conda(self, doc: YamlDocument, seq: CommentedSeq) -> None:
        for offset, spec in self._items(doc, seq):
            found = match_conda(self.ctx.target, spec)
            if found is not None:
                self.report(offset, message(found[1], spec), hint=found[1].hint)

    def _pip(self, doc: YamlDocument, seq: CommentedSeq) -> None:
        for offset, requirement in self._items(doc, seq):
            found = match_requirement(self.ctx.target, requirement)
            if found is not None:
                self.report(offset, message(found[1], requirement), hint=found[1].hint)

"""yaml-backend-setting: a config file's collective backend, ported with the project's default it overrides."""

from __future__ import annotations

from npu_port.transpiler.analysis.positions import PositionPolicy
from npu_port.transpiler.analysis.project_modules import project_folders
from npu_port.transpiler.analysis.project_settings import ported_default
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule


class YamlBackendSetting(YamlRule):
    """Writes `hccl` where a config file sets a backend setting to `nccl` that the project's code defaults.

    What it does:
        In any YAML file, a key named for a collective backend (`backend`, `dist_backend`, `*_backend`, with
        dashes or underscores: positions.yaml's backend settings) whose value is `nccl` becomes `hccl` where the
        project's own Python gives the same setting the default `"nccl"` in a module convert ports (a dataclass
        field, an assignment, a keyword or parameter default, a dict entry, argparse's `default=`;
        analysis/project_settings): the config overrides that default, and the default becomes `"hccl"`
        (nccl-backend). Where the code that reads it is left (an NPU framework's module, which runs with
        torch.cuda patched onto the NPU), or the project's code names no such default, the value stays, with an
        info finding (none for text converted without its place on disk).

    Why:
        gpt-neox's configs say `"distributed_backend": "nccl"`; its NeoXArgs default is ported to "hccl", but each
        config overrides it, so deepspeed.init_distributed is still asked for NCCL on the NPU. The config and the
        default are one setting. MindSpeed-RL's configs keep `distributed_backend: nccl` on purpose (MindSpeed
        maps it), and its code is left: so are they.

    Example:
        # configs/125M.yml of a project whose neox_args.py has `distributed_backend: str = "nccl"`
        "distributed_backend": "nccl",      ->   "distributed_backend": "hccl",

    With --keep-cuda:
        The value is kept for CUDA, with a warning: a config holds one backend (set it per host, or drop the key
        and let the code's device-agnostic default choose).

    Fix safety:
        Safe: the value the project's own default takes on the NPU.
    """

    ID = "yaml-backend-setting"
    SAFETY = "safe"
    TRIGGERS = ("nccl",)

    def check(self, doc: YamlDocument) -> None:
        backend = PositionPolicy.from_data(load_table(self.ctx.target, "positions")["backend"])
        for _, mapping in doc.mappings():
            for key in list(mapping):
                name = str(key).replace("-", "_")
                if mapping[key] != "nccl" or not backend.names_setting(name) or key not in mapping.lc.data:
                    continue  # (a key merged in from an anchor `<<: *d` is written, and ported, where it is defined)
                span = doc.value_span(mapping, key)
                where = ported_default(self.ctx.path, name, "nccl")
                if where is not None:
                    self.replace(span, "nccl", "hccl", f"{key}: nccl -> hccl (the default it overrides, {where}, is "
                                                       "ported)", portable=lambda: None)
                elif project_folders(self.ctx.path):
                    self.report(span[0], f"{key}: nccl left as is: the project's code that reads `{name}` is left "
                                         "(an NPU framework's) or names no default for it here", severity="info")

"""yaml-env-vars: environment variable names in Ray runtime_env `env_vars:` mappings."""

from __future__ import annotations

from npu_port.codemods._env_table import env_triggers
from npu_port.codemods.shell_env_vars import env_lookup
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule, entry_copy


class YamlEnvVars(YamlRule):
    """Renames CUDA/NCCL variables in the `env_vars:` of Ray runtime_env files and sections.

    What it does:
        In an `env_vars:` mapping at the top of a document (a runtime_env file, as MindSpeed-RL's
        configs/envs/runtime_env.yaml) or under a `runtime_env:` key (VERL's
        `ray_kwargs.ray_init.runtime_env`), keys are renamed by the target's env_vars table:
        CUDA_VISIBLE_DEVICES -> ASCEND_RT_VISIBLE_DEVICES, PYTORCH_CUDA_ALLOC_CONF ->
        PYTORCH_NPU_ALLOC_CONF, NCCL_SOCKET_IFNAME -> HCCL_SOCKET_IFNAME. Variables without an Ascend
        counterpart (NCCL_IB_*, ...) are reported; NCCL_DEBUG and CUDA_DEVICE_MAX_CONNECTIONS stay.
        A rename whose new name is already a key is reported instead of making a duplicate key.

    Why:
        Ray hands these variables to every worker; on Ascend the workers read the Ascend names.

    Example:
        env_vars:                                  env_vars:
          PYTORCH_CUDA_ALLOC_CONF: "expandable..."  ->  PYTORCH_NPU_ALLOC_CONF: "expandable..."

    With --keep-cuda:
        env_vars:                          env_vars:
          CUDA_VISIBLE_DEVICES: "0,1"  ->    CUDA_VISIBLE_DEVICES: "0,1"
                                             ASCEND_RT_VISIBLE_DEVICES: "0,1"
        env_vars: {CUDA_VISIBLE_DEVICES: "0"}  ->  env_vars: {CUDA_VISIBLE_DEVICES: "0", ASCEND_RT_VISIBLE_DEVICES: "0"}
        (both names, with the same value text; a mapping that has both already is left alone. A value
        that is not one scalar on the key's line is kept for CUDA, with a warning.)

    Fix safety:
        Safe: names only; values, quotes and comments stay.
    """

    ID = "yaml-env-vars"
    SAFETY = "safe"
    TRIGGERS = env_triggers(with_shell=True)

    def check(self, doc: YamlDocument) -> None:
        for path, mapping in doc.mappings():
            if not path or path[-1] != "env_vars" or not (len(path) == 1 or "runtime_env" in path):
                continue
            for key in list(mapping):
                name = str(key)
                value = mapping[key]
                row = env_lookup(self.ctx.options, name, None if value is None else str(value))
                if row is None or row.status == "keep":
                    continue
                span = doc.key_span(mapping, key)
                if row.status == "rename" and row.npu:
                    if row.npu in mapping:
                        if not self.ctx.options.keep_cuda:  # both names: the --keep-cuda form
                            self.report(span[0], f"{name} and {row.npu} are both set; remove {name}")
                        continue
                    copy = entry_copy(doc, mapping, key, row.npu) if self.ctx.options.keep_cuda else None
                    if copy is not None:
                        self.add_entry(copy, span[0], f"{name} -> {name} and {row.npu}")
                    else:
                        self.replace(span, name, row.npu, f"{name} -> {row.npu}")
                else:
                    self.report(span[0], row.left(name), hint=row.hint)

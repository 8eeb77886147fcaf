"""accelerate-config-npu: `distributed_type: MULTI_GPU` in accelerate config files."""

from __future__ import annotations

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule


class AccelerateConfigNpu(YamlRule):
    """Writes `distributed_type: MULTI_NPU` where an accelerate config file says `MULTI_GPU`.

    What it does:
        In an accelerate config file (a top-level mapping with `distributed_type` and one of the other
        keys `accelerate config` writes: `compute_environment`, `num_processes`, `machine_rank`,
        `mixed_precision`, ...; codemods/data/<target>/accelerate.yaml), `distributed_type: MULTI_GPU`
        becomes `MULTI_NPU`, quotes kept. `DEEPSPEED`, `FSDP`, `NO` and the rest stay: they name no
        device. A YAML file without those accelerate keys is left alone.

    Why:
        `MULTI_NPU` is what `accelerate config` writes on an Ascend host (DistributedType.MULTI_NPU, since
        accelerate 0.21). Both values start the same multi-process launcher and accelerate picks the
        backend (hccl on the NPU) from the host, so the port says what the file now runs on, as a
        maintainer's port of the config does, and nothing else changes.

    Example:
        compute_environment: LOCAL_MACHINE          compute_environment: LOCAL_MACHINE
        distributed_type: MULTI_GPU         ->      distributed_type: MULTI_NPU
        num_processes: 8                            num_processes: 8

    With --keep-cuda:
        Left as it is: accelerate chooses the device and backend from the host at run time, so
        `MULTI_GPU` already runs on either.

    Fix safety:
        Safe: accelerate 0.21 and later read both values the same way (the launcher, then the backend from
        the host); older accelerate, which has no NPU support, does not know MULTI_NPU.
    """

    ID = "accelerate-config-npu"
    SAFETY = "safe"
    TRIGGERS = ("MULTI_GPU",)

    def check(self, doc: YamlDocument) -> None:
        if self.ctx.options.keep_cuda:
            return
        table = load_table(self.ctx.target, "accelerate")
        keys, types = table["config_keys"], table["distributed_types"]
        for root in doc.documents:
            if not hasattr(root, "get") or not any(k in root for k in keys):
                continue
            value = root.get("distributed_type")
            if isinstance(value, str) and value in types:
                self.replace(doc.value_span(root, "distributed_type"), value, types[value],
                             f"distributed_type: {value} -> {types[value]}")

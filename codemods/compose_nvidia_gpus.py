"""compose-nvidia-gpus: the NVIDIA GPU requests and CUDA images of docker-compose files, reported."""

from __future__ import annotations

from ruamel.yaml.comments import CommentedMap

from npu_port.codemods._containers import compose_services, devices_hint, is_compose_file, own_keys, service_gpus
from npu_port.codemods._cuda_packages import match_image
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule


class ComposeNvidiaGpus(YamlRule):
    """Reports each NVIDIA GPU request of a docker-compose file, with the Ascend devices and mounts.

    What it does:
        In a docker-compose file (`docker-compose*.yml`, `compose*.yaml`, or a top-level `services:`
        whose services have an `image` or `build`), reports on its line each `runtime: nvidia`,
        `gpus:`, `deploy.resources.reservations.devices` entry with `driver: nvidia` or
        `capabilities: [gpu]`, each NVIDIA CDI device (`nvidia.com/gpu=all`), each `NVIDIA_*` variable of a service's `environment`, and each
        `image:` built on CUDA (`nvidia/cuda`, NGC images). The hint lists what an Ascend container
        gets instead: `/dev/davinciN` per NPU, `/dev/davinci_manager`, `/dev/devmm_svm`,
        `/dev/hisi_hdc` and the driver, DCMI and `npu-smi` mounts (codemods/data/<target>/containers.yaml).
        `npu-port convert --extras` rewrites the requests (`compose-npu-devices`); what that rule
        rewrites is then no longer reported, what it cannot is.

    Why:
        These go through the NVIDIA container toolkit, which an Ascend host does not have: the
        service would start without an NPU, or not at all. A line the tool does not port is never
        silent.

    Example:
        runtime: nvidia                      ->  unchanged; warning: Ascend containers need the NPU devices
        - NVIDIA_DRIVER_CAPABILITIES=all     ->  unchanged; warning: read by the NVIDIA runtime only

    Fix safety:
        Report only.
    """

    ID = "compose-nvidia-gpus"
    SAFETY = "report-only"
    TRIGGERS = ("nvidia", "NVIDIA_", "gpus", "nvcr.io")

    def check(self, doc: YamlDocument) -> None:
        if not is_compose_file(self.ctx.path, doc):
            return
        target = self.ctx.target
        hint = devices_hint(target, "compose") + "; `npu-port convert --extras` rewrites it (compose-npu-devices)"
        for name, svc in compose_services(doc):
            gpus = service_gpus(doc, name, svc, target)
            for offset, what in gpus.sites:
                self.report(offset, f"{what} ({gpus.label}): Ascend containers need the NPU devices and "
                            "driver mounts instead", hint=hint)
            for entry in gpus.env:
                self.report(entry.offset, f"{entry.name} ({gpus.label}) is read by the NVIDIA container runtime "
                            "only", hint=hint if entry.name == "NVIDIA_VISIBLE_DEVICES" else
                            "drop it, or find what the Ascend image needs instead")
            self._image(doc, svc)

    def _image(self, doc: YamlDocument, svc: CommentedMap) -> None:
        if "image" not in own_keys(svc) or not isinstance(svc["image"], str):
            return
        row = match_image(self.ctx.target, svc["image"])
        if row is not None:
            self.report(doc.value_span(svc, "image")[0], f"{row.what}: `image: {svc['image']}` has no CANN "
                        "(Ascend) runtime", hint=row.hint)

"""compose-npu-devices (extras): docker-compose GPU requests become the Ascend devices and driver mounts."""

from __future__ import annotations

from typing import Any, Optional

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from npu_port.codemods._containers import (
    ServiceGpus,
    block_style,
    compose_services,
    device_nodes,
    is_compose_file,
    item_block,
    key_block,
    line_start,
    mounts,
    own_keys,
    service_gpus,
    table,
    visible_indices,
)
from npu_port.transpiler.text.text_edits import Edit
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule


class ComposeNpuDevices(YamlRule):
    """Rewrites the NVIDIA GPU requests of docker-compose services into Ascend devices and mounts.

    What it does:
        In a docker-compose file (`docker-compose*.yml`, `compose*.yaml`, or a top-level `services:`
        whose services have an `image` or `build`), for each service (and each `x-*` block services
        merge) that asks for GPUs through `runtime: nvidia`, `gpus:`, a
        `deploy.resources.reservations.devices` entry with `driver: nvidia` or `capabilities: [gpu]`,
        an NVIDIA CDI device (`nvidia.com/gpu=1` under `devices:`, or as a `driver: cdi` device id),
        or `NVIDIA_VISIBLE_DEVICES`:
        - removes `runtime: nvidia`, `gpus:`, the CDI devices and the GPU device entries (with the
          `deploy:` levels they leave empty);
        - adds to the service's `devices:` one `/dev/davinciN` per NPU, taken from `count: N`,
          `device_ids`, the CDI index or `NVIDIA_VISIBLE_DEVICES=0,1`, then `/dev/davinci_manager`,
          `/dev/devmm_svm` and `/dev/hisi_hdc`, and to its `volumes:` the driver, DCMI and `npu-smi`
          mounts (codemods/data/<target>/containers.yaml), each one unless already there;
        - renames `NVIDIA_VISIBLE_DEVICES=0,1` to `ASCEND_VISIBLE_DEVICES` and drops
          `NVIDIA_DRIVER_CAPABILITIES` (and an `NVIDIA_VISIBLE_DEVICES` of `all`).
        Where the NPUs are not known (`count: all`, GPU UUIDs, `runtime: nvidia` alone) only the shared
        devices are added and the line is reported: list a `/dev/davinciN` per NPU by hand. A service
        written in flow style is left to `compose-nvidia-gpus`, which reports it.

    Why:
        The NVIDIA container toolkit hands GPUs to a container through its runtime and device
        reservations; an Ascend container gets the device nodes and the driver files themselves, as the
        vllm-ascend quick start's `docker run` and LLaMA-Factory's docker-npu compose file do. It is an
        extra because it adds devices and host mounts to the file.

    Example:
        services:                            services:
          trainer:                             trainer:
            image: verl:latest                   image: verl:latest
            deploy:                              devices:
              resources:                 ->        - /dev/davinci0
                reservations:                      - /dev/davinci_manager
                  devices:                         - /dev/devmm_svm
                    - driver: nvidia               - /dev/hisi_hdc
                      count: 1                   volumes:
                      capabilities: [gpu]          - /usr/local/dcmi:/usr/local/dcmi
                                                   - ...

    Fix safety:
        Review: the device list follows the GPU count, but which NPUs of the host a service should
        get, and whether the driver lives at the default path, are the host's.
    """

    ID = "compose-npu-devices"
    SAFETY = "review"
    GROUP = "extras"
    TRIGGERS = ("nvidia", "NVIDIA_", "gpus")

    def check(self, doc: YamlDocument) -> None:
        if not is_compose_file(self.ctx.path, doc):
            return
        for name, svc in compose_services(doc):
            gpus = service_gpus(doc, name, svc, self.ctx.target)
            if gpus.asks_for_gpus:
                self._service(doc, gpus)

    def _service(self, doc: YamlDocument, gpus: ServiceGpus) -> None:
        svc = gpus.mapping
        if not block_style(svc):
            return
        spots = [o for o, _ in gpus.sites] + [e.offset for e in gpus.env]
        if any(self.positions.is_silenced(self.ID, o) for o in spots):
            return
        plan = _Plan()
        if not (self._removals(doc, gpus, plan) and self._environment(doc, gpus, plan)
                and self._additions(doc, gpus, plan)):
            return  # something is not block style: nothing changes; compose-nvidia-gpus reports it
        # --keep-cuda: a service cannot ask for both (the NVIDIA runtime is missing on an Ascend host).
        if self.portable_text(gpus.sites[0][0] if gpus.sites else spots[0], "",
                              f"{gpus.label}: the NVIDIA GPU request -> the Ascend devices", None) is None:
            return
        self.edits.extend(plan.edits)
        for offset, message in plan.changes:
            line, col = self.positions.line_col(offset)
            self.ctx.add(self.ID, line, col, message, kind="change")
        for offset, what in gpus.unknown:
            self.report(offset, f"{what}: which NPUs {gpus.label} gets is not known; list a "
                        "/dev/davinciN device per NPU under its devices:",
                        hint="the NPUs of the host are /dev/davinci0, /dev/davinci1, ... (`ls /dev/davinci[0-9]*`)")

    # -- what goes -------------------------------------------------------------------------------------------
    def _removals(self, doc: YamlDocument, gpus: ServiceGpus, plan: _Plan) -> bool:
        svc = gpus.mapping
        for key, what in (("runtime", "runtime: nvidia"), ("gpus", "gpus:")):
            if (key == "runtime" and gpus.runtime) or (key == "gpus" and gpus.gpus):
                if not plan.remove(doc, svc, key, f"removed {what}: the NPUs are listed under devices", top=True):
                    return False
        if gpus.cdi:
            devices = svc["devices"]
            if len(gpus.cdi) == len(devices):
                if not plan.remove(doc, svc, "devices", "removed the NVIDIA CDI devices", top=True):
                    return False
                plan.emptied.add("devices")
            else:
                for i in gpus.cdi:
                    if not plan.remove_item(doc, devices, i, "removed the NVIDIA CDI device"):
                        return False
        seq = gpus.reservation_seq
        if gpus.reservations and seq is not None:
            if len(gpus.reservations) == len(seq):
                mapping, key = _emptied_ancestor(svc)
                if not plan.remove(doc, mapping, key, f"removed the NVIDIA device reservation ({key}:)",
                                   top=mapping is svc):
                    return False
            else:
                for i in gpus.reservations:
                    if not plan.remove_item(doc, seq, i, "removed the NVIDIA device reservation"):
                        return False
        return True

    def _environment(self, doc: YamlDocument, gpus: ServiceGpus, plan: _Plan) -> bool:
        env_table = table(self.ctx.target)["environment"]
        if not gpus.env:
            return True
        container = gpus.env[0].container
        names = {str(k) for k in container} if isinstance(container, CommentedMap) else \
            {str(item).split("=", 1)[0] for item in container}
        renames, drops = [], []
        for entry in gpus.env:
            new = env_table["rename"].get(entry.name)
            if new and visible_indices(entry.value) is not None and new not in names:
                renames.append((entry, new))
            elif new or entry.name in env_table["drop"]:
                drops.append((entry, "the devices list decides" if new else "nothing reads it on Ascend"))
        if not drops and not renames:
            return True
        if drops and len(drops) == len(container):
            # An emptied `environment:` would be null, which compose refuses: the key goes.
            return plan.remove(doc, gpus.mapping, "environment",
                               "removed environment: " + ", ".join(e.name for e, _ in drops), top=True)
        for entry, new in renames:
            plan.edits.append(Edit(entry.offset, entry.offset + len(entry.name), new))
            plan.changes.append((entry.offset, f"{entry.name} -> {new}"))
        for entry, why in drops:
            message = f"removed {entry.name}: {why}"
            ok = plan.remove(doc, container, entry.key, message) if isinstance(container, CommentedMap) \
                else plan.remove_item(doc, container, entry.key, message)
            if not ok:
                return False
        return True

    # -- what comes ------------------------------------------------------------------------------------------
    def _additions(self, doc: YamlDocument, gpus: ServiceGpus, plan: _Plan) -> bool:
        svc = gpus.mapping
        keys = own_keys(svc)
        key_col = doc.key_span(svc, keys[0])[0] - line_start(doc.text, doc.key_span(svc, keys[0])[0])
        dash = _dash_offset(doc, svc, keys, key_col)
        new_keys: list[str] = []
        for key, wanted, covered in (("devices", device_nodes(self.ctx.target, gpus.indices), _device_present),
                                     ("volumes", mounts(self.ctx.target), _mount_covered)):
            present = svc.get(key) if key in keys and key not in plan.emptied else None
            if key in keys and not (isinstance(present, CommentedSeq) and block_style(present)):
                if present is not None:
                    return False  # a flow list or an odd value: left to the report
            items = [i for n, i in enumerate(present) if key != "devices" or n not in gpus.cdi] \
                if isinstance(present, CommentedSeq) else []
            missing = [w for w in wanted if not any(covered(w, item) for item in items)]
            if not missing:
                continue
            if isinstance(present, CommentedSeq) and present:
                first = doc.offset(*present.lc.item(0))
                item_dash = doc.text[line_start(doc.text, first):first].index("-")
                end = key_block(doc, svc, key)
                if end is None:
                    return False
                lines = "".join(f"{' ' * item_dash}- {m}\n" for m in missing)
                plan.insert(end[1], doc.text, lines, doc.key_span(svc, key)[0], f"{key}: added {', '.join(missing)}")
            else:
                if key in keys and key not in plan.emptied:  # `devices:` with no items
                    if not plan.remove(doc, svc, key, f"{key}: filled in", top=True):
                        return False
                new_keys.append(f"{' ' * key_col}{key}:\n" + "".join(f"{' ' * (key_col + dash)}- {m}\n"
                                                                     for m in missing))
                plan.changes.append((plan.anchor(doc, svc), f"{key}: added {', '.join(missing)}"))
        if new_keys:
            plan.insert(plan.anchor(doc, svc), doc.text, "".join(new_keys), None, "")
        return True


class _Plan:
    """The edits of one service, made only when every one of them can be (all or nothing)."""

    def __init__(self) -> None:
        self.edits: list[Edit] = []
        self.changes: list[tuple[int, str]] = []
        self.top: Optional[int] = None  # where the first service-level key was removed
        self.emptied: set[str] = set()  # service keys removed whole, to be written anew

    def remove(self, doc: YamlDocument, mapping: CommentedMap, key: Any, message: str, top: bool = False) -> bool:
        if not block_style(mapping):
            return False
        block = key_block(doc, mapping, key)
        if block is None:
            return False
        self.edits.append(Edit(block[0], block[1], ""))
        self.changes.append((doc.key_span(mapping, key)[0], message))
        if top and (self.top is None or block[0] < self.top):
            self.top = block[0]
        return True

    def remove_item(self, doc: YamlDocument, seq: CommentedSeq, index: int, message: str) -> bool:
        block = item_block(doc, seq, index)
        if block is None:
            return False
        self.edits.append(Edit(block[0], block[1], ""))
        self.changes.append((doc.offset(*seq.lc.item(index)), message))
        return True

    def anchor(self, doc: YamlDocument, svc: CommentedMap) -> int:
        """Where new keys go: in place of the first removed service key, else after the service's last key."""
        if self.top is not None:
            return self.top
        ends = [b[1] for b in (key_block(doc, svc, k) for k in own_keys(svc)) if b is not None]
        return max(ends) if ends else len(doc.text)

    def insert(self, offset: int, text: str, lines: str, change_at: Optional[int], message: str) -> None:
        if offset == len(text) and text and not text.endswith("\n"):
            lines = "\n" + lines
        self.edits.append(Edit(offset, offset, lines))
        if change_at is not None:
            self.changes.append((change_at, message))


def _emptied_ancestor(svc: CommentedMap) -> tuple[CommentedMap, str]:
    """The highest of deploy / resources / reservations / devices that holds nothing but the GPU devices."""
    chain: list[tuple[CommentedMap, str]] = []
    node: Any = svc
    for key in ("deploy", "resources", "reservations", "devices"):
        chain.append((node, key))
        node = node[key]
    chosen = chain[-1]
    for mapping, key in reversed(chain[:-1]):
        child = mapping[key]
        if own_keys(child) == [chosen[1]]:
            chosen = (mapping, key)
        else:
            break
    return chosen


def _dash_offset(doc: YamlDocument, svc: CommentedMap, keys: list[Any], key_col: int) -> int:
    """How far this file indents `- ` items under their key (0 or 2), from a block list of the service."""
    for key in keys:
        value = svc[key]
        if isinstance(value, CommentedSeq) and block_style(value) and value:
            first = doc.offset(*value.lc.item(0))
            lead = doc.text[line_start(doc.text, first):first]
            if lead.strip() == "-":
                return max(lead.index("-") - key_col, 0)
    return 2


def _device_present(wanted: str, item: Any) -> bool:
    """`/dev/davinci0`, `/dev/davinci0:/dev/davinci0:rwm` or the long form `{source: /dev/davinci0, ...}`."""
    if isinstance(item, CommentedMap):
        return str(item.get("source", "")) == wanted
    return isinstance(item, str) and item.split(":", 1)[0] == wanted


def _mount_covered(wanted: str, item: Any) -> bool:
    """A mount whose container path is the wanted one or a folder above it covers it."""
    target = wanted.split(":")[1].rstrip("/")
    if isinstance(item, CommentedMap):
        have = str(item.get("target", ""))
    elif isinstance(item, str):
        parts = item.split(":")
        have = parts[1] if len(parts) > 1 else parts[0]
    else:
        return False
    have = have.rstrip("/")
    return bool(have) and (target == have or target.startswith(have + "/"))

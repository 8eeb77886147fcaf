"""What the container rules share: the containers table, the Ascend device hint, and where the NVIDIA
GPU requests of a docker-compose file are (compose-npu-devices rewrites them, compose-nvidia-gpus
reports them, so both read the file the same way)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.yaml_edit import YamlDocument, scalar_end

_COMPOSE_NAME = re.compile(r"(docker-)?compose([.-][^/]*)?\.ya?ml")
# `docker run --gpus` / compose device ids that are indices (not GPU UUIDs).
_INDEX = re.compile(r"\d+")
# NVIDIA GPUs as CDI devices (Container Device Interface): `nvidia.com/gpu=all`, `nvidia.com/gpu=0`.
CDI_PREFIX = "nvidia.com/gpu="
# An extended resource name as Kubernetes accepts it: a DNS prefix, a slash, a name.
RESOURCE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def table(target: str) -> dict[str, Any]:
    return load_table(target, "containers")


def device_nodes(target: str, indices: Optional[list[int]]) -> list[str]:
    """The device nodes of a container with these NPUs (None: not known, only the shared nodes)."""
    devices = table(target)["devices"]
    per_npu = [devices["per_npu"].format(index=i) for i in indices or ()]
    return per_npu + list(devices["shared"])


def mounts(target: str) -> list[str]:
    return list(table(target)["mounts"])


def devices_hint(target: str, style: str) -> str:
    """The Ascend devices and mounts, as `docker run` options (style "docker") or compose keys."""
    devices = table(target)["devices"]
    first = devices["per_npu"].format(index=0)
    if style == "docker":
        listed = " ".join([f"--device {first} (one per NPU)"] + [f"--device {d}" for d in devices["shared"]]
                          + [f"-v {m}" for m in mounts(target)])
    else:
        listed = (f"devices: {first} (one per NPU), " + ", ".join(devices["shared"]) + "; volumes: "
                  + ", ".join(mounts(target)))
    return f"Ascend containers get the NPU devices and driver mounts instead: {listed} (vllm-ascend quick start)"


def is_compose_file(path: str, doc: YamlDocument) -> bool:
    """docker-compose*.yml, compose*.yaml (any suffix after a dot or dash), or a YAML file whose top
    level is `services:` with at least one service that has an `image` or a `build`."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if _COMPOSE_NAME.fullmatch(name):
        return True
    top = doc.documents[0] if len(doc.documents) == 1 else None
    if not isinstance(top, CommentedMap) or "apiVersion" in top or not isinstance(top.get("services"), CommentedMap):
        return False
    return any(isinstance(s, CommentedMap) and ("image" in s or "build" in s) for s in top["services"].values())


def own_keys(mapping: CommentedMap) -> list[Any]:
    """The keys written in `mapping` itself, not those a `<<: *anchor` merge brings in."""
    own = getattr(mapping, "_ok", None)
    return [k for k in mapping if own is None or k in own]


# -- compose: the GPU requests of one service ----------------------------------------------------------------

@dataclass
class EnvEntry:
    name: str
    value: Optional[str]
    offset: int  # where the name is
    container: Any  # the environment mapping or sequence
    key: Any  # its key (mapping) or index (sequence)


@dataclass
class ServiceGpus:
    """The NVIDIA parts of one compose service (or of an `x-*` block services merge)."""

    name: str
    mapping: CommentedMap
    runtime: bool = False  # runtime: nvidia
    gpus: bool = False  # the `gpus:` key
    # `deploy.resources.reservations.devices` entries: (the devices sequence, index) of each GPU one.
    reservations: list[int] = field(default_factory=list)
    cdi: list[int] = field(default_factory=list)  # indices of `devices:` items that are NVIDIA CDI devices
    reservation_seq: Optional[CommentedSeq] = None
    env: list[EnvEntry] = field(default_factory=list)
    indices: Optional[list[int]] = None  # the NPUs asked for; None where not known
    unknown: list[tuple[int, str]] = field(default_factory=list)  # (offset, why the NPUs are not known)
    sites: list[tuple[int, str]] = field(default_factory=list)  # (offset, what) of each NVIDIA request

    @property
    def label(self) -> str:
        """How a message names it: `service trainer`, or the extension block `x-gpu`."""
        return self.name if self.name.startswith("x-") else f"service {self.name}"

    @property
    def asks_for_gpus(self) -> bool:
        return self.runtime or self.gpus or bool(self.reservations) or bool(self.cdi) or any(
            e.name == "NVIDIA_VISIBLE_DEVICES" and (e.value or "").strip().lower() not in ("", "void", "none")
            for e in self.env)


def compose_services(doc: YamlDocument) -> Iterator[tuple[str, CommentedMap]]:
    """The services, then the top-level `x-*` extension blocks services merge (`<<: *gpu`)."""
    top = doc.documents[0] if doc.documents else None
    if not isinstance(top, CommentedMap):
        return
    services = top.get("services")
    if isinstance(services, CommentedMap):
        for name in own_keys(services):
            if isinstance(services[name], CommentedMap):
                yield str(name), services[name]
    for name in own_keys(top):
        if str(name).startswith("x-") and isinstance(top[name], CommentedMap):
            yield str(name), top[name]


def service_gpus(doc: YamlDocument, name: str, svc: CommentedMap, target: str) -> ServiceGpus:
    found = ServiceGpus(name, svc)
    keys = own_keys(svc)
    counted: list[Optional[list[int]]] = []
    if "runtime" in keys and str(svc["runtime"]).strip() == "nvidia":
        found.runtime = True
        found.sites.append((doc.key_span(svc, "runtime")[0], "runtime: nvidia"))
    if "gpus" in keys:
        found.gpus = True
        start = doc.key_span(svc, "gpus")[0]
        found.sites.append((start, "gpus"))
        entries = svc["gpus"] if isinstance(svc["gpus"], CommentedSeq) else [svc["gpus"]]
        counted += [_entry_indices(doc, e, found, start) for e in entries]
    seq = _reservation_devices(svc)
    if seq is not None:
        for i, entry in enumerate(seq):
            if _is_gpu_entry(entry):
                found.reservations.append(i)
                start = doc.offset(*seq.lc.item(i))
                found.sites.append((start, "deploy.resources.reservations.devices"))
                counted.append(_entry_indices(doc, entry, found, start))
        found.reservation_seq = seq
    devices = svc.get("devices") if "devices" in keys else None
    if isinstance(devices, CommentedSeq):
        for i, item in enumerate(devices):
            if isinstance(item, str) and item.startswith(CDI_PREFIX):
                found.cdi.append(i)
                start = doc.offset(*devices.lc.item(i))
                found.sites.append((start, f"CDI device {item}"))
                counted.append(_cdi_indices(item, found, start))
    environment = svc.get("environment") if "environment" in keys else None
    found.env = list(_environment(doc, environment, table(target)["environment"]["report_prefix"]))
    visible = next((e for e in found.env if e.name == "NVIDIA_VISIBLE_DEVICES"), None)
    if not counted and visible is not None:
        counted.append(visible_indices(visible.value))
        if counted[-1] is None:
            found.unknown.append((visible.offset, f"NVIDIA_VISIBLE_DEVICES={visible.value}"))
    elif not counted and found.runtime:
        counted.append(None)
        found.unknown.append((found.sites[0][0], "runtime: nvidia without NVIDIA_VISIBLE_DEVICES"))
    if counted and all(c is not None for c in counted):
        found.indices = sorted({i for c in counted for i in c or ()})
    return found


def visible_indices(value: Optional[str]) -> Optional[list[int]]:
    """`0,1` -> [0, 1]; `all`, `none`, GPU UUIDs -> None."""
    parts = [p.strip() for p in (value or "").split(",")]
    if not parts or not all(_INDEX.fullmatch(p) for p in parts):
        return None
    return [int(p) for p in parts]


def _cdi_indices(device: str, found: ServiceGpus, start: int) -> Optional[list[int]]:
    """`nvidia.com/gpu=1` -> [1]; `nvidia.com/gpu=all` or a UUID -> None (reported)."""
    which = device[len(CDI_PREFIX):]
    if _INDEX.fullmatch(which):
        return [int(which)]
    found.unknown.append((start, device))
    return None


def _reservation_devices(svc: CommentedMap) -> Optional[CommentedSeq]:
    node: Any = svc
    for key in ("deploy", "resources", "reservations", "devices"):
        if not isinstance(node, CommentedMap) or key not in own_keys(node):
            return None
        node = node[key]
    return node if isinstance(node, CommentedSeq) else None


def _is_gpu_entry(entry: Any) -> bool:
    if not isinstance(entry, CommentedMap):
        return False
    capabilities = entry.get("capabilities")
    caps = [str(c) for c in capabilities] if isinstance(capabilities, CommentedSeq) else []
    ids = entry.get("device_ids")
    cdi = isinstance(ids, CommentedSeq) and any(str(i).startswith(CDI_PREFIX) for i in ids)
    return str(entry.get("driver", "")).strip() == "nvidia" or "gpu" in caps or cdi


def _entry_indices(doc: YamlDocument, entry: Any, found: ServiceGpus, start: int) -> Optional[list[int]]:
    """The NPU indices a device entry asks for: `count: 2` -> [0, 1], `device_ids: ["0", "3"]` -> [0, 3]."""
    if isinstance(entry, CommentedMap):
        ids = entry.get("device_ids")
        plain = [str(i).strip().removeprefix(CDI_PREFIX) for i in ids] if isinstance(ids, CommentedSeq) else []
        if plain and all(_INDEX.fullmatch(i) for i in plain):
            return [int(i) for i in plain]
        count = entry.get("count")
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            return list(range(count))
        if isinstance(count, str) and _INDEX.fullmatch(count.strip()) and int(count) > 0:
            return list(range(int(count)))
        what = f"device_ids: {list(ids)}" if ids is not None else (f"count: {count}" if count is not None
                                                                   else "no count")
    else:
        what = f"gpus: {entry}"
    found.unknown.append((start, what))
    return None


def _environment(doc: YamlDocument, env: Any, prefix: str) -> Iterator[EnvEntry]:
    if isinstance(env, CommentedMap):
        for key in own_keys(env):
            if str(key).startswith(prefix):
                value = env[key]
                yield EnvEntry(str(key), None if value is None else str(value), doc.key_span(env, key)[0], env, key)
    elif isinstance(env, CommentedSeq):
        for i, item in enumerate(env):
            if isinstance(item, str) and item.startswith(prefix):
                name, _, value = item.partition("=")
                start = doc.offset(*env.lc.item(i))
                start += 1 if doc.text[start] in "'\"" else 0
                yield EnvEntry(name, value if _ else None, start, env, i)


# -- line blocks of block-style YAML ------------------------------------------------------------------------

def line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_end(text: str, first_line_end: int, indent: int, dash_same_indent: bool) -> int:
    """The end of a block whose first line ends at `first_line_end`: the lines after it that are
    indented deeper than `indent` (or, with `dash_same_indent`, sequence items at `indent`), with the
    blank and comment lines between them; trailing blank and comment lines stay outside."""
    end = pos = first_line_end
    while pos < len(text):
        nl = text.find("\n", pos)
        line_end = len(text) if nl < 0 else nl + 1
        line = text[pos:line_end].rstrip("\n")
        body = line.strip()
        if body and not body.startswith("#"):
            ind = _indent(line)
            if ind > indent or (dash_same_indent and ind == indent and body.startswith("-")):
                end = line_end
            else:
                break
        pos = line_end
    return end


def _line_end(text: str, offset: int) -> int:
    nl = text.find("\n", offset)
    return len(text) if nl < 0 else nl + 1


def key_block(doc: YamlDocument, mapping: CommentedMap, key: Any) -> Optional[tuple[int, int]]:
    """The whole lines of `key: value` in a block mapping (None where the key does not start its line)."""
    text = doc.text
    start = doc.key_span(mapping, key)[0]
    begin = line_start(text, start)
    if text[begin:start].strip():
        return None
    value = mapping[key]
    return begin, _block_end(text, _line_end(text, start), start - begin, isinstance(value, CommentedSeq))


def item_block(doc: YamlDocument, seq: CommentedSeq, index: int) -> Optional[tuple[int, int]]:
    """The whole lines of one `- item` of a block sequence (None in a flow sequence)."""
    text = doc.text
    start = doc.offset(*seq.lc.item(index))
    begin = line_start(text, start)
    lead = text[begin:start]
    if lead.strip() != "-" or seq.fa.flow_style():
        return None
    return begin, _block_end(text, _line_end(text, start), lead.index("-"), False)


def block_style(node: Any) -> bool:
    return isinstance(node, (CommentedMap, CommentedSeq)) and not node.fa.flow_style()


def scalar_token(doc: YamlDocument, start: int) -> str:
    return doc.text[start:scalar_end(doc.text, start, in_key=False)]

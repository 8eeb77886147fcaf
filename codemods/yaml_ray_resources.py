"""yaml-ray-resources: GPU requests in Ray Serve and Ray cluster YAML."""

from __future__ import annotations

from npu_port.transpiler.text.text_edits import Edit
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule


class YamlRayResources(YamlRule):
    """Turns GPU resource requests in Ray YAML into the NPU resource.

    What it does:
        Only where the file is clearly Ray's:
        - `num_gpus: N` inside `ray_actor_options` (Ray Serve deployments) becomes
          `resources: {"NPU": N}`; when `resources` is already there it is reported instead;
        - the `GPU` key of a node type's `resources` (Ray cluster launcher `available_node_types`)
          becomes `NPU`.
        `num_gpus` anywhere else (a trainer's own setting, MindSpeed-RL's `num_npus`) is left alone.

    Why:
        `num_gpus` requests Ray's "GPU" resource, which Ascend nodes do not have; Ray exposes NPUs as
        the "NPU" resource (ray/_private/accelerators/npu.py).

    Example:
        ray_actor_options:             ray_actor_options:
          num_gpus: 1          ->        resources: {"NPU": 1}

    With --keep-cuda:
        No device-agnostic form: the line stays as it is, with a warning `kept for CUDA (--keep-cuda)`.
        A Ray Serve config and a cluster launcher's node types are static: Ray reads no variable or
        interpolation in them that could pick the resource at run time, and a node type describes one
        kind of machine. Keep the GPU file and add an NPU one (a second Serve config, or an NPU node
        type beside the GPU one).

    Fix safety:
        Safe: the same count under Ray's NPU resource name.
    """

    ID = "yaml-ray-resources"
    SAFETY = "safe"
    TRIGGERS = ("num_gpus", "GPU")

    def check(self, doc: YamlDocument) -> None:
        for path, mapping in doc.mappings():
            if path and path[-1] == "ray_actor_options" and "num_gpus" in mapping:
                self._actor_options(doc, mapping)
            elif len(path) >= 3 and path[-1] == "resources" and path[-3] == "available_node_types" \
                    and "GPU" in mapping:
                if "NPU" in mapping:
                    self.report(doc.key_span(mapping, "GPU")[0], "node type has both GPU and NPU resources")
                else:
                    self.replace(doc.key_span(mapping, "GPU"), "GPU", "NPU", "node resources: GPU -> NPU")

    def _actor_options(self, doc: YamlDocument, mapping) -> None:
        count = mapping["num_gpus"]
        key_span = doc.key_span(mapping, "num_gpus")
        if isinstance(count, bool) or not isinstance(count, (int, float)):
            self.report(key_span[0], f"num_gpus: {count!r} is not a number: set resources: {{\"NPU\": n}} by hand")
            return
        if "resources" in mapping:
            self.report(key_span[0], "num_gpus next to resources: move the count to resources: {\"NPU\": n}")
            return
        value_span = doc.value_span(mapping, "num_gpus")
        token = doc.text[value_span[0]:value_span[1]]
        if self.replace(key_span, "num_gpus", "resources", f"num_gpus: {token} -> resources: {{\"NPU\": {token}}}"):
            self.edits.append(Edit(value_span[0], value_span[1], '{"NPU": ' + token + "}"))

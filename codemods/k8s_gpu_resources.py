"""k8s-gpu-resources: `nvidia.com/gpu` requests of Kubernetes manifests become the Ascend device plugin's."""

from __future__ import annotations

from typing import Any, Optional

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from npu_port.codemods._containers import RESOURCE_NAME, own_keys, table
from npu_port.codemods._cuda_packages import match_image
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.tables.user_tables import table_rows
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule

_REQUESTS = ("limits", "requests")
_HINT_SELECTOR = "node_labels_hint"


class K8sGpuResources(YamlRule):
    """Renames `nvidia.com/gpu` resource requests of Kubernetes manifests and reports the rest of the GPU setup.

    What it does:
        In each document with `apiVersion` and `kind` (Pod, Deployment, StatefulSet, Job, RayCluster,
        PyTorchJob, ... at any depth of their templates):
        - `nvidia.com/gpu: N` under a `resources:` `limits` or `requests` becomes the Ascend device
          plugin's resource with the same count. The name is the `nvidia.com/gpu` row of
          codemods/data/<target>/containers.yaml (`huawei.com/Ascend910`), reported with a warning
          that names the exact key to check, since it depends on the cluster's device plugin and chip;
          a `--rules` file with a `containers:` row for `nvidia.com/gpu` (for example
          `npu: huawei.com/Ascend310P`) gives the cluster's own name, written without the warning;
        - other `nvidia.com/*` resources (MIG slices, shared GPUs) are reported;
        - node selectors, node affinities and tolerations that name NVIDIA, `runtimeClassName: nvidia`,
          `NVIDIA_*` container variables, KubeRay's `num-gpus` start parameter and CUDA images are
          reported on their line.
        A `limits` / `requests` with `nvidia.com/gpu` in a YAML file that is not a manifest (a Helm
        values file) is reported, not renamed. Helm templates are read through their `{{ ... }}`
        actions (transpiler/text/go_template.py) and converted like the manifests they render.

    Why:
        `nvidia.com/gpu` is advertised by NVIDIA's device plugin only: on Ascend nodes the pod stays
        Pending. MindCluster's Ascend Device Plugin advertises `huawei.com/Ascend910` or
        `huawei.com/Ascend310P`, Huawei Cloud CCE `huawei.com/ascend-1980` (vllm-ascend's Kubernetes
        deployment guide), and labels the nodes `accelerator: huawei-Ascend910`.

    Example:
        resources:                        resources:
          limits:                           limits:
            nvidia.com/gpu: 8       ->        huawei.com/Ascend910: 8   (warning: check the key)

    Fix safety:
        Review: the count is kept; the resource name is the default chip's unless a `--rules` row names it.
    """

    ID = "k8s-gpu-resources"
    SAFETY = "review"
    TRIGGERS = ("nvidia", "NVIDIA_", "num-gpus", "nvcr.io")

    def check(self, doc: YamlDocument) -> None:
        for top in doc.documents:
            manifest = isinstance(top, CommentedMap) and "apiVersion" in top and "kind" in top
            if isinstance(top, (CommentedMap, CommentedSeq)):
                self._walk(doc, top, (), manifest)

    def _walk(self, doc: YamlDocument, node: Any, path: tuple[str, ...], manifest: bool) -> None:
        if isinstance(node, CommentedSeq):
            for item in node:
                self._walk(doc, item, path, manifest)
            return
        if not isinstance(node, CommentedMap):
            return
        if len(path) >= 2 and path[-1] in _REQUESTS and path[-2] == "resources":
            self._resources(doc, node, path[-1], manifest)
        if manifest:
            self._manifest_keys(doc, node, path)
        for key in own_keys(node):
            self._walk(doc, node[key], path + (str(key),), manifest)

    # -- resources.limits / requests --------------------------------------------------------------------------
    def _resources(self, doc: YamlDocument, requests: CommentedMap, which: str, manifest: bool) -> None:
        known = set(table(self.ctx.target)["npu_resources"])
        for key in own_keys(requests):
            name = str(key)
            if not name.startswith("nvidia.com/"):
                continue
            start = doc.key_span(requests, key)[0]
            row, given = self._row(name)
            if row is None or row.get("status") != "rename" or not row.get("npu"):
                hint = row.get("hint", "") if row else ""
                self.report(start, f"{which}: {name} has no Ascend counterpart; left as is",
                            hint=hint or "request whole NPUs (huawei.com/Ascend910, ...) instead")
                continue
            new = row["npu"]
            if not RESOURCE_NAME.fullmatch(new):
                self.report(start, f"{which}: {name} left as is: {new!r} from the rules file is not a Kubernetes "
                            "resource name (prefix/name)")
            elif not manifest:
                self.report(start, f"{which}: {name} in a YAML file that is not a Kubernetes manifest (Helm "
                            f"values?): rename it to {new} if it ends up in a pod's resources", hint=row.get("hint", ""))
            elif new in requests or any(k in requests for k in known):
                self.report(start, f"{which}: {name} next to an Ascend resource: remove {name}")
            elif self.replace(doc.key_span(requests, key), name, new, f"{which}: {name} -> {new}") and not given:
                self.report(start, f"{which}: {new} is the default Ascend resource name: check the key your "
                            f"cluster's device plugin advertises (kubectl describe node: Allocatable)",
                            hint=row.get("hint", ""))

    def _row(self, name: str) -> tuple[Optional[dict], bool]:
        """The containers row for `name` (prefix rows end in `*`), and whether the user's rules gave it."""
        builtin = load_table(self.ctx.target, "containers")["rows"]
        for row in table_rows(self.ctx.target, "containers", self.ctx.options.rules_files):
            cuda = str(row.get("cuda", ""))
            if cuda == name or (cuda.endswith("*") and name.startswith(cuda[:-1])):
                return row, not any(row is b for b in builtin)
        return None, False

    # -- the rest of the GPU setup ------------------------------------------------------------------------------
    def _manifest_keys(self, doc: YamlDocument, node: CommentedMap, path: tuple[str, ...]) -> None:
        labels_hint = table(self.ctx.target)[_HINT_SELECTOR]
        keys = own_keys(node)
        if "runtimeClassName" in keys and "nvidia" in str(node["runtimeClassName"]).lower():
            self.report(doc.key_span(node, "runtimeClassName")[0],
                        f"runtimeClassName: {node['runtimeClassName']} is NVIDIA's container runtime",
                        hint="remove it: the Ascend device plugin mounts the NPUs (or use the Ascend Docker "
                        "Runtime's class if the cluster defines one)")
        if "nodeSelector" in keys and isinstance(node["nodeSelector"], CommentedMap):
            selector = node["nodeSelector"]
            for key in own_keys(selector):
                if _names_nvidia(key) or _names_nvidia(selector[key]):
                    self.report(doc.key_span(selector, key)[0],
                                f"nodeSelector {key}: {selector[key]} selects NVIDIA nodes", hint=labels_hint)
        if path and path[-1] in ("matchExpressions", "tolerations") and "key" in keys:
            values = node.get("values")
            named = _names_nvidia(node["key"]) or _names_nvidia(node.get("value")) or (
                isinstance(values, CommentedSeq) and any(_names_nvidia(v) for v in values))
            if named:
                what = "toleration" if path[-1] == "tolerations" else "node affinity"
                self.report(doc.key_span(node, "key")[0], f"{what} on {node['key']} names NVIDIA nodes",
                            hint=labels_hint if what == "node affinity" else
                            "Ascend nodes have the taints their cluster gives them: tolerate those, or drop it")
        if path and path[-1] == "env" and "name" in keys and str(node["name"]).startswith(
                table(self.ctx.target)["environment"]["report_prefix"]):
            self.report(doc.key_span(node, "name")[0], f"{node['name']} is read by the NVIDIA container runtime "
                        "only", hint="drop it: the Ascend device plugin decides which NPUs the container sees")
        if path and path[-1] == "rayStartParams" and "num-gpus" in keys:
            self.report(doc.key_span(node, "num-gpus")[0], "rayStartParams num-gpus: Ascend NPUs are Ray's NPU "
                        "resource", hint="drop num-gpus (Ray detects the NPUs of /dev/davinci*) or set "
                        "resources: '\"{\\\"NPU\\\": N}\"'")
        if "image" in keys and isinstance(node["image"], str) and path and path[-1] in (
                "containers", "initContainers"):
            row = match_image(self.ctx.target, node["image"])
            if row is not None:
                self.report(doc.value_span(node, "image")[0], f"{row.what}: `image: {node['image']}` has no "
                            "CANN (Ascend) runtime", hint=row.hint)


def _names_nvidia(value: Any) -> bool:
    return isinstance(value, str) and "nvidia" in value.lower()

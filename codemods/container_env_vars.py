"""container-env-vars: CUDA/NCCL variables in the environment of compose services and Kubernetes containers."""

from __future__ import annotations

from typing import Any, Optional

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from npu_port.codemods._containers import compose_services, is_compose_file, item_block, key_block, own_keys
from npu_port.codemods._env_table import env_triggers
from npu_port.codemods.shell_env_vars import env_lookup
from npu_port.transpiler.text.text_edits import Edit
from npu_port.transpiler.text.yaml_edit import YamlDocument, YamlRule


class ContainerEnvVars(YamlRule):
    """Renames CUDA/NCCL variables in the environment of docker-compose services and Kubernetes containers.

    What it does:
        In a docker-compose file, each service's `environment:` (a mapping, or a list of `NAME=value`
        items), and in a Kubernetes manifest (a document with `apiVersion` and `kind`), each `env:`
        item's `name:`, is renamed by the target's env_vars table, as in launchers:
        `CUDA_VISIBLE_DEVICES` -> `ASCEND_RT_VISIBLE_DEVICES`, `PYTORCH_CUDA_ALLOC_CONF` ->
        `PYTORCH_NPU_ALLOC_CONF`, `NCCL_SOCKET_IFNAME` -> `HCCL_SOCKET_IFNAME`. Variables without an
        Ascend counterpart (`NCCL_IB_HCA`, ...) are reported on their line; a rename whose new name is
        already set is reported instead of setting it twice. The NVIDIA runtime's own `NVIDIA_*`
        variables are compose-nvidia-gpus' and k8s-gpu-resources'.

    Why:
        The container's processes read the Ascend names; a CUDA name set in the compose file or the
        pod spec is ignored on the NPU, silently.

    Example:
        environment:                                 environment:
          - CUDA_VISIBLE_DEVICES=0,1           ->      - ASCEND_RT_VISIBLE_DEVICES=0,1
          - PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  ->  - PYTORCH_NPU_ALLOC_CONF=...

    With --keep-cuda:
        environment:                          environment:
          - CUDA_VISIBLE_DEVICES=0,1    ->      - CUDA_VISIBLE_DEVICES=0,1
                                                - ASCEND_RT_VISIBLE_DEVICES=0,1
        (each entry stays and a copy with the Ascend name follows it, its value and comments the same;
        an entry in flow style is kept for CUDA, with a warning.)

    Fix safety:
        Safe: names only; values, quotes and comments stay.
    """

    ID = "container-env-vars"
    SAFETY = "safe"
    TRIGGERS = env_triggers(with_shell=True)

    def check(self, doc: YamlDocument) -> None:
        if is_compose_file(self.ctx.path, doc):
            for _, svc in compose_services(doc):
                if "environment" in own_keys(svc):
                    self._compose(doc, svc["environment"])
        for top in doc.documents:
            if isinstance(top, CommentedMap) and "apiVersion" in top and "kind" in top:
                self._manifest(doc, top, "")

    def _compose(self, doc: YamlDocument, env: Any) -> None:
        if isinstance(env, CommentedMap):
            names = {str(k) for k in env}
            for key in own_keys(env):
                value = env[key]
                self._one(doc, str(key), None if value is None else str(value), names, doc.key_span(env, key)[0],
                          key_block(doc, env, key) if not env.fa.flow_style() else None)
        elif isinstance(env, CommentedSeq):
            names = {str(item).split("=", 1)[0] for item in env if isinstance(item, str)}
            for i, item in enumerate(env):
                if isinstance(item, str):
                    name, eq, value = item.partition("=")
                    self._one(doc, name, value if eq else None, names, doc.offset(*env.lc.item(i)),
                              item_block(doc, env, i))

    def _manifest(self, doc: YamlDocument, node: Any, parent: str) -> None:
        if isinstance(node, CommentedSeq):
            names = {str(i.get("name")) for i in node if isinstance(i, CommentedMap)} if parent == "env" else set()
            for i, item in enumerate(node):
                if parent == "env" and isinstance(item, CommentedMap) and isinstance(item.get("name"), str):
                    value = item.get("value")
                    self._one(doc, item["name"], None if value is None else str(value), names,
                              doc.value_span(item, "name")[0], item_block(doc, node, i))
                else:
                    self._manifest(doc, item, parent)
        elif isinstance(node, CommentedMap):
            for key in own_keys(node):
                self._manifest(doc, node[key], str(key))

    def _one(self, doc: YamlDocument, name: str, value: Any, names: set[str], start: int,
             block: Optional[tuple[int, int]]) -> None:
        """One variable whose name starts the scalar at `start` (a key, a `NAME=value` item, a `name:` value)."""
        row = env_lookup(self.ctx.options, name, value)
        if row is None or row.status == "keep":
            return
        start += 1 if doc.text[start:start + 1] in ("'", '"') else 0
        if row.status == "rename" and row.npu:
            if row.npu in names:
                if not self.ctx.options.keep_cuda:  # with --keep-cuda both are meant to be set
                    self.report(start, f"{name} and {row.npu} are both set; remove {name}")
            elif doc.text.startswith(name, start) and not self.positions.is_silenced(self.ID, start):
                message = f"{name} -> {row.npu}"
                # --keep-cuda: both names, the entry's lines again with the Ascend one (as launchers get).
                twin = None if block is None else \
                    doc.text[block[0]:start] + row.npu + doc.text[start + len(name):block[1]]
                form = self.portable_text(start, row.npu, message, lambda: twin)
                if form is None:
                    return
                if self.ctx.options.keep_cuda and block is not None and twin is not None:
                    self.edits.append(Edit(block[1], block[1], twin if twin.endswith("\n") else "\n" + twin))
                    message += " (both set: --keep-cuda)"
                else:
                    self.edits.append(Edit(start, start + len(name), row.npu))
                line, col = self.positions.line_col(start)
                self.ctx.add(self.ID, line, col, message, kind="change")
        else:
            self.report(start, row.left(name), hint=row.hint)

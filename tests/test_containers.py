"""docker-compose and Kubernetes GPU requests (compose-npu-devices, compose-nvidia-gpus, k8s-gpu-resources)
and the device hint shell-docker-gpus shares with them: what the fixtures alone do not show."""

from __future__ import annotations

import yaml

from npu_port.codemods._containers import device_nodes, mounts
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings

_MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: infer
spec:
  containers:
    - name: server
      image: vllm/vllm-openai:v0.9.1
      resources:
        limits:
          nvidia.com/gpu: 2
"""

_COMPOSE = """\
services:
  trainer:
    image: verl:latest
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""


def _convert(text: str, path: str, **settings):
    result = Engine(Settings(**settings)).convert(text.encode(), path)
    assert result.outcome.status != "failed", result.outcome.error
    out = result.output.decode() if result.output is not None else text
    return out, [f for f in result.outcome.findings if f.kind == "finding"]


def _rules_file(tmp_path, npu: str):
    path = tmp_path / "rules.yaml"
    path.write_text(f"containers:\n  - {{cuda: nvidia.com/gpu, npu: {npu}, status: rename}}\n")
    return (("rules_files", (str(path),)),)


def test_the_default_resource_name_is_written_with_a_finding_that_names_the_key():
    out, findings = _convert(_MANIFEST, "k8s/pod.yaml", select=("k8s-gpu-resources",))
    assert "huawei.com/Ascend910: 2" in out and "nvidia.com/gpu" not in out
    assert [f.line for f in findings] == [11]
    assert "huawei.com/Ascend910" in findings[0].message and "device plugin" in findings[0].message


def test_a_rules_file_names_the_clusters_resource_and_silences_the_check(tmp_path):
    out, findings = _convert(_MANIFEST, "k8s/pod.yaml", select=("k8s-gpu-resources",),
                             options_extra=_rules_file(tmp_path, "huawei.com/Ascend310P"))
    assert "huawei.com/Ascend310P: 2" in out
    assert findings == []


def test_a_rules_file_name_that_is_no_resource_name_is_reported_not_written(tmp_path):
    out, findings = _convert(_MANIFEST, "k8s/pod.yaml", select=("k8s-gpu-resources",),
                             options_extra=_rules_file(tmp_path, "'Ascend910: 8 # x'"))
    assert out == _MANIFEST
    assert len(findings) == 1 and "not a Kubernetes resource name" in findings[0].message


def test_a_document_without_apiVersion_and_kind_is_reported_not_renamed():
    values = "resources:\n  limits:\n    nvidia.com/gpu: 1\n"
    out, findings = _convert(values, "chart/values.yaml", select=("k8s-gpu-resources",))
    assert out == values
    assert [(f.line, f.rule) for f in findings] == [(3, "k8s-gpu-resources")]


def test_compose_default_run_reports_and_the_extras_run_leaves_nothing_to_report():
    _, findings = _convert(_COMPOSE, "docker-compose.yml")
    assert [(f.line, f.rule) for f in findings] == [(8, "compose-nvidia-gpus")]
    out, findings = _convert(_COMPOSE, "docker-compose.yml", extras=True)
    assert findings == []
    service = yaml.safe_load(out)["services"]["trainer"]
    assert service["devices"] == device_nodes("ascend", [0])
    assert service["volumes"] == mounts("ascend")
    assert "deploy" not in service
    again, _ = _convert(out, "docker-compose.yml", extras=True)
    assert again == out


def test_compose_keeps_other_reservations_and_adds_to_the_existing_lists():
    text = _COMPOSE.replace("          devices:\n", "          devices:\n            - driver: cdi\n"
                            "              device_ids: [vendor.com/device=0]\n") + \
        "    volumes:\n      - /usr/local/Ascend/driver:/usr/local/Ascend/driver\n"
    out, _ = _convert(text, "compose.yaml", select=("compose-npu-devices",))
    service = yaml.safe_load(out)["services"]["trainer"]
    assert service["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "cdi", "device_ids": ["vendor.com/device=0"]}]
    # The whole driver folder is mounted already: its lib64/ and version.info are not added again.
    assert not any(v.startswith("/usr/local/Ascend/driver/") for v in service["volumes"])
    assert "/usr/local/dcmi:/usr/local/dcmi" in service["volumes"]


def test_compose_service_with_an_ignore_comment_is_left_as_it_is():
    text = _COMPOSE.replace("driver: nvidia", "driver: nvidia  # npu-port: ignore")
    out, findings = _convert(text, "docker-compose.yml", extras=True)
    assert out == text
    assert findings == []


def test_compose_without_a_final_newline_gets_whole_lines():
    out, _ = _convert(_COMPOSE.rstrip("\n"), "docker-compose.yml", select=("compose-npu-devices",))
    assert "\n    devices:\n      - /dev/davinci0\n" in out
    yaml.safe_load(out)


def test_yaml_that_is_not_a_compose_file_is_not_touched():
    text = "trainer:\n  runtime: nvidia\n  gpus: all\n"
    out, findings = _convert(text, "conf/trainer.yaml", extras=True)
    assert out == text and findings == []


def test_docker_run_hint_lists_the_devices_and_mounts_of_the_containers_table():
    _, findings = _convert("#!/bin/bash\ndocker run --gpus all image\n", "run.sh", select=("shell-docker-gpus",))
    (finding,) = findings
    for item in device_nodes("ascend", [0]):
        assert f"--device {item}" in finding.hint
    for mount in mounts("ascend"):
        assert f"-v {mount}" in finding.hint


def test_compose_extras_run_ports_the_gpu_request_and_the_cuda_environment_together():
    text = _COMPOSE.replace("    deploy:\n", "    environment:\n      - NVIDIA_VISIBLE_DEVICES=3\n"
                            "      - CUDA_VISIBLE_DEVICES=0\n      - NVIDIA_DRIVER_CAPABILITIES=all\n    deploy:\n")
    out, findings = _convert(text, "docker-compose.yml", extras=True)
    service = yaml.safe_load(out)["services"]["trainer"]
    assert service["environment"] == ["ASCEND_VISIBLE_DEVICES=3", "ASCEND_RT_VISIBLE_DEVICES=0"]
    assert service["devices"][0] == "/dev/davinci0"  # the reservation's count: 1 decides, not the variable
    assert findings == []
    assert _convert(out, "docker-compose.yml", extras=True)[0] == out


def test_compose_never_sets_a_variable_twice_nor_lists_a_device_twice():
    text = ("services:\n  s:\n    image: x\n    runtime: nvidia\n    environment:\n"
            "      NVIDIA_VISIBLE_DEVICES: 0,1\n      ASCEND_VISIBLE_DEVICES: 0,1\n"
            "    devices:\n      - source: /dev/davinci0\n        target: /dev/davinci0\n")
    out, _ = _convert(text, "docker-compose.yml", select=("compose-npu-devices",))
    service = yaml.safe_load(out)["services"]["s"]
    assert service["environment"] == {"ASCEND_VISIBLE_DEVICES": "0,1"}
    assert service["devices"] == [{"source": "/dev/davinci0", "target": "/dev/davinci0"}] + device_nodes("ascend", [1])[-4:]


def test_docker_run_extras_run_leaves_nothing_for_the_report_and_is_idempotent():
    script = "#!/bin/bash\ndocker run --gpus 2 --rm img python x.py\n"
    _, findings = _convert(script, "run.sh")
    assert [f.rule for f in findings] == ["shell-docker-gpus"]
    out, findings = _convert(script, "run.sh", extras=True)
    assert "--device /dev/davinci0 --device /dev/davinci1 --device /dev/davinci_manager" in out
    assert "--gpus" not in out and not [f for f in findings if f.rule.startswith("shell-docker")]
    assert _convert(out, "run.sh", extras=True)[0] == out

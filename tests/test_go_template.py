"""Helm templates (YAML with `{{ ... }}` actions) read through a same-length mask: transpiler/text/go_template.py."""

from __future__ import annotations

import pytest

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.python_source import SourceError
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.text.go_template import mask
from npu_port.transpiler.text.yaml_edit import YamlDocument

_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "chart.fullname" . }}
  labels:
    {{- include "chart.labels" . | nindent 4 }}
spec:
  template:
    spec:
      containers:
        - name: server
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          resources:
            {{- if .Values.gpus }}  # one node
            limits:
              nvidia.com/gpu: {{ .Values.gpus }}
            {{- end }}
"""


def test_mask_keeps_every_offset_and_turns_action_lines_into_comments():
    masked = mask(_TEMPLATE)
    assert masked is not None and len(masked) == len(_TEMPLATE)
    assert [len(line) for line in masked.splitlines()] == [len(line) for line in _TEMPLATE.splitlines()]
    assert "    #{- include" in masked and "            #{- end }}" in masked
    assert "name: ______" in masked and "{{" not in masked


def test_mask_gives_up_on_an_action_over_several_lines_and_on_plain_yaml():
    assert mask("a: {{ .Values.x\n}}\n") is None
    assert mask("a: 1\n") is None


def test_a_template_parses_through_its_mask_and_an_error_stays_an_error():
    doc = YamlDocument(_TEMPLATE)
    limits = doc.documents[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    start, end = doc.key_span(limits, "nvidia.com/gpu")
    assert _TEMPLATE[start:end] == "nvidia.com/gpu"
    with pytest.raises(SourceError, match="YAML error at line 2"):
        YamlDocument("a: {{ x }}\n b: [\n")


def test_a_helm_template_is_converted_and_its_actions_stay():
    engine = Engine(Settings())
    result = engine.convert(_TEMPLATE.encode(), "chart/templates/deployment.yaml")
    assert result.outcome.status != "failed", result.outcome.error
    out = result.output.decode()
    assert out == _TEMPLATE.replace("nvidia.com/gpu:", "huawei.com/Ascend910:")
    assert engine.convert(result.output, "chart/templates/deployment.yaml").output is None

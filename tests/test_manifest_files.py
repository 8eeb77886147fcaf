"""Dependency lists and container recipes are a file kind of their own: found, read, never rewritten."""
from __future__ import annotations

import pytest

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import language_of
from npu_port.transpiler.core.settings import Settings


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-cuda.txt", "requirements/dev.txt",
                                  "dev-requirements.txt", "constraints.txt", "pyproject.toml", "Dockerfile",
                                  "docker/Dockerfile.stable.vllm", "gpu.dockerfile", "Containerfile", "setup.cfg"])
def test_manifests_are_found(name):
    assert language_of(name) == "manifest"


@pytest.mark.parametrize("name", ["notes.txt", "README.md", "config.toml", "tox.ini", "docker-compose.yml"])
def test_other_files_are_not_manifests(name):
    assert language_of(name) != "manifest"


def test_a_manifest_is_reported_and_left_byte_for_byte():
    data = b"torch==2.5.1\r\nflash-attn>=2.6  # CUDA\r\n"
    result = Engine(Settings()).convert(data, "requirements.txt", "manifest")
    assert result.output is None or result.output == data
    assert [(f.line, f.rule) for f in result.outcome.findings] == [(2, "cuda-only-deps-manifest")]

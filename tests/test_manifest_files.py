"""Dependency lists and container recipes are a file kind of their own: found, read, never rewritten."""
from __future__ import annotations

import pytest

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.files import language_of
from npu_port.transpiler.core.settings import Settings


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-cuda.txt", "requirements/dev.txt",
                                  "dev-requirements.txt", "constraints.txt", "pyproject.toml", "Dockerfile",
                                  "docker/Dockerfile.stable.vllm", "gpu.dockerfile", "Containerfile", "setup.cfg",
                                  "Makefile", "GNUmakefile", "docs/makefile", "build/rules.mk", "Makefile.in"])
def test_manifests_are_found(name):
    assert language_of(name) == "manifest"


@pytest.mark.parametrize("name", ["notes.txt", "README.md", "config.toml", "tox.ini", "docker-compose.yml",
                                  "makefile_helpers.py", "make.sh", "CMakeLists.txt"])
def test_other_files_are_not_manifests(name):
    assert language_of(name) != "manifest"


def test_a_manifest_is_reported_and_left_byte_for_byte():
    data = b"torch==2.5.1\r\nflash-attn>=2.6  # CUDA\r\n"
    result = Engine(Settings()).convert(data, "requirements.txt", "manifest")
    assert result.output is None or result.output == data
    assert [(f.line, f.rule) for f in result.outcome.findings] == [(2, "cuda-only-deps-manifest")]


def test_a_makefile_recipe_is_read_as_shell_and_left_byte_for_byte():
    data = b"# pip install flash-attn\ninstall:\n\t@uv pip install torch && \\\n\tpip install flash-attn\n"
    result = Engine(Settings()).convert(data, "Makefile")
    assert result.output is None
    assert [(f.line, f.col, f.rule) for f in result.outcome.findings] == [(4, 14, "cuda-only-deps-manifest")]

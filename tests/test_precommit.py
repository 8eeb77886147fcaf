"""The pre-commit hooks (.pre-commit-hooks.yaml) on a real git repository.

Two ways: `repo: local` hooks built from our hook definitions with `language: system` (no install,
always runs), and `pre-commit try-repo` against this checkout, which installs npu-port into a fresh
environment the way users get it (needs PyPI for the dependencies; skipped only when offline).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))

BAD = 'from vllm import LLM\nllm = LLM(model="m", npu_memory_utilization=0.8)\n'
GOOD = 'from vllm import LLM\nllm = LLM(model="m", gpu_memory_utilization=0.8)\n'
GPU = "import torch\nimport torch_npu\n\ntorch.cuda.synchronize()\n"


def _env(home: Path) -> dict:
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com", PRE_COMMIT_COLOR="never")
    env.pop("PYTHONPATH", None)
    return env


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=_env(repo / ".pc"))


def _pre_commit(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=repo, capture_output=True, text=True,
                          env=_env(home), timeout=300)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    _git(path, "init", "-q")
    (path / "serve.py").write_text(BAD, encoding="utf-8")
    (path / "README.md").write_text("npu_memory_utilization in prose is not checked\n", encoding="utf-8")
    return path


def _hook(hook_id: str) -> dict:
    return next(h for h in HOOKS if h["id"] == hook_id)


def test_hook_definitions():
    assert {h["id"] for h in HOOKS} == {"npu-port-check", "npu-port-convert"}
    for hook in HOOKS:
        assert hook["entry"].startswith("npu-port ") and hook["language"] == "python"
        assert set(hook["types_or"]) == {"python", "shell", "yaml", "jupyter"}


def _local_config(repo: Path) -> None:
    """Our hooks as `repo: local` + `language: system`, running this checkout's code."""
    hooks = []
    for hook in HOOKS:
        local = {k: v for k, v in hook.items() if k != "description"}
        local["entry"] = hook["entry"].replace("npu-port", f"{sys.executable} -m transpiler", 1)
        local["language"] = "system"
        hooks.append(local)
    config = {"repos": [{"repo": "local", "hooks": hooks}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


@pytest.mark.slow  # four pre-commit runs
def test_hooks_as_local_system_hooks(repo, tmp_path):
    _local_config(repo)
    _git(repo, "add", "-A")

    def run(*args: str) -> subprocess.CompletedProcess:  # the hooks import this checkout's transpiler
        return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=repo, capture_output=True, text=True,
                              timeout=300, env={**_env(tmp_path / "pc-home"), "PYTHONPATH": str(ROOT)})

    result = run("run", "npu-port-check", "--all-files")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2:22  error  unknown-framework-arg" in result.stdout
    assert "README.md" not in result.stdout  # not a python/shell/yaml file: never passed to the hook

    (repo / "serve.py").write_text(GOOD, encoding="utf-8")
    _git(repo, "add", "-A")
    result = run("run", "npu-port-check", "--all-files")
    assert result.returncode == 0, result.stdout + result.stderr

    (repo / "train.py").write_text(GPU, encoding="utf-8")
    _git(repo, "add", "-A")
    result = run("run", "npu-port-convert", "--all-files")
    assert result.returncode == 1 and "files were modified by this hook" in result.stdout, result.stdout
    assert (repo / "train.py").read_text(encoding="utf-8") == GPU.replace("torch.cuda", "torch.npu")
    _git(repo, "add", "-A")
    assert run("run", "npu-port-convert", "--all-files").returncode == 0  # idempotent: nothing left to do


def _online() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
        return True
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.network  # pip installs npu-port's dependencies from the package index
def test_try_repo_installs_and_runs_the_hooks(repo, tmp_path):
    """The real thing: pre-commit builds the hooks' environment from this checkout with pip (one
    install, both hooks in one run)."""
    if not _online():
        pytest.skip("offline: pre-commit installs npu-port's dependencies from PyPI to build the hook environment")
    (repo / "train.py").write_text(GPU, encoding="utf-8")
    _git(repo, "add", "-A")
    result = _pre_commit(repo, tmp_path / "pc-home", "try-repo", str(ROOT), "--all-files")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    check_part, convert_part = out.split("npu-port convert.", 1)
    assert "npu-port check" in check_part and "Failed" in check_part
    assert "serve.py\n  2:22  error  unknown-framework-arg" in check_part
    assert "CUDA left over" in check_part  # train.py, before the convert hook ran
    assert "files were modified by this hook" in convert_part
    assert (repo / "train.py").read_text(encoding="utf-8") == GPU.replace("torch.cuda", "torch.npu")
    assert (repo / "serve.py").read_text(encoding="utf-8") == BAD  # nothing to convert there

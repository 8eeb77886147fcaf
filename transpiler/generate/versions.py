"""The installable Ascend version sets the skeletons target (skeletons/version_sets.yaml).

A generated file names its set in its header, `generate ... --requirements-out` writes the set as a
pip requirements file, and `--verl-version` / `--vllm-version` choose a set: each set pairs one verl
release with the one vLLM release its vllm-ascend supports, so the two flags must agree on a set.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Optional

import yaml

# The packages whose API every set is snapshotted at (codemods/data/api/, tools/release_snapshots.py).
SNAPSHOTTED_PACKAGES = ("verl", "vllm", "ray", "transformers")


class VersionSetError(ValueError):
    pass


@dataclass(frozen=True)
class VersionSet:
    name: str
    summary: str
    cann: str
    python: str
    trainer: str  # "v1": run_ppo(config, task_runner_class=TaskRunnerV1); "legacy": run_ppo(config)
    versions: dict[str, str]  # verl, vllm, vllm_ascend, ray, transformers
    requirements: tuple[str, ...]

    @property
    def verl(self) -> str:
        return self.versions["verl"]

    @property
    def vllm(self) -> str:
        return self.versions["vllm"]

    def header_lines(self) -> list[str]:
        """The lines every generated file starts its description with (without comment markers)."""
        v = self.versions
        return [f"Targets: verl {v['verl']}, vLLM {v['vllm']} + vllm-ascend {v['vllm_ascend']}, "
                f"Ray {v['ray']}, transformers {v['transformers']},",
                f"CANN {self.cann}, Python {self.python} (`npu-port generate ... --requirements-out "
                "requirements-npu.txt` writes the pins)."]

    def requirements_text(self) -> str:
        v = self.versions
        head = [
            f"# Ascend NPU stack for the generated scripts: {self.summary}.",
            "# Written by `npu-port generate --requirements-out`; every pin is read from the packages' own",
            "# metadata and vllm-ascend's release compatibility matrix. Install on a host with the Ascend driver and",
            f"# CANN {self.cann} (toolkit and the matching kernels/nnal packages), Python {self.python}:",
            "#   source /usr/local/Ascend/ascend-toolkit/set_env.sh",
            "#   pip install -r requirements-npu.txt",
            f"#   git clone --depth 1 --branch v{v['vllm']} https://github.com/vllm-project/vllm",
            "#   VLLM_TARGET_DEVICE=empty pip install -e vllm   # vLLM without its CUDA torch pin",
        ]
        return "\n".join(head + list(self.requirements)) + "\n"


def _parse(name: str, data: dict) -> VersionSet:
    try:
        versions = {k: str(data[k]) for k in ("verl", "vllm", "vllm_ascend", "ray", "transformers")}
        vs = VersionSet(name=name, summary=str(data["summary"]), cann=str(data["cann"]), python=str(data["python"]),
                        trainer=str(data["trainer"]), versions=versions,
                        requirements=tuple(str(r) for r in data["requirements"]))
    except (KeyError, TypeError) as exc:
        raise VersionSetError(f"version set {name!r} lacks {exc}") from None
    if vs.trainer not in ("v1", "legacy"):
        raise VersionSetError(f"version set {name!r}: trainer is v1 or legacy, not {vs.trainer!r}")
    return vs


@cache
def _loaded() -> tuple[str, dict[str, VersionSet]]:
    text = (resources.files("npu_port.skeletons") / "version_sets.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    sets = {name: _parse(name, body) for name, body in data["sets"].items()}
    if data["default"] not in sets:
        raise VersionSetError(f"default version set {data['default']!r} is not defined")
    return data["default"], sets


def version_sets() -> dict[str, VersionSet]:
    return _loaded()[1]


def default_set() -> VersionSet:
    default, sets = _loaded()
    return sets[default]


def verl_versions() -> list[str]:
    return sorted({s.verl for s in version_sets().values()}, reverse=True)


def vllm_versions() -> list[str]:
    return sorted({s.vllm for s in version_sets().values()}, reverse=True)


def choose(verl: Optional[str] = None, vllm: Optional[str] = None) -> VersionSet:
    """The set with this verl and/or vLLM release (the default set when neither is given)."""
    if verl is None and vllm is None:
        return default_set()
    matches = [s for s in version_sets().values()
               if (verl is None or s.verl == verl) and (vllm is None or s.vllm == vllm)]
    if not matches:
        pairs = ", ".join(f"verl {s.verl} with vLLM {s.vllm}" for s in version_sets().values())
        raise VersionSetError(f"no installable set has verl {verl or 'any'} with vLLM {vllm or 'any'} "
                              f"(the snapshotted sets: {pairs})")
    return matches[0]

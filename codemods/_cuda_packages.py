"""The table of distributions with no Ascend build (codemods/data/<target>/cuda_only_packages.yaml) and
how a requirement, a conda spec or a Docker image is matched against it. Shared by the cuda-only-deps
rules for Python, YAML and manifests, so that every file kind reads a requirement the same way."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Optional

from npu_port.transpiler.analysis.project_pins import admits_from
from npu_port.transpiler.tables.mapping import available_targets, load_table

# PEP 508: the name, then extras, a version, `@ url` or `; marker`.
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:[<>=!~;@(]|$)")
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
# A VCS requirement without #egg= is known by its repository's name (`git+https://github.com/NVIDIA/apex`,
# `git+https://github.com/NVIDIA/TransformerEngine.git@v1.7`); matched with separators ignored (see matches).
_VCS = re.compile(r"(?:git|hg|svn|bzr)\+[a-z]+://[^\s@#]*/([A-Za-z0-9][A-Za-z0-9._-]*?)(?:\.git)?(?:[@#]\S*)?$")
# conda: `[channel::]name[=version[=build]]`, `name>=1.2`, `name 1.2.*`
_CONDA = re.compile(r"\s*(?:[A-Za-z0-9_.-]+::)?([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:[<>=!~ ]|$)")


# Words one of the table's names holds (any case): a file without one declares none of them.
TRIGGER_PATTERN = (r"(?i)cupy|flash|bitsandbytes|xformers|apex|liger|mamba|causal|transformer|nvidia|triton"
                   r"|pynvml|pycuda|tensorrt|pytorch|cuda|nccl|cudnn|unsloth|vllm|megablocks|grouped|faiss")


@dataclass(frozen=True)
class PackageRow:
    name: str
    what: str
    hint: str
    replacement: str = ""
    only_with: str = ""  # images: reported only when the tag contains this
    from_source: str = ""  # the release from which a build from source runs on Ascend (the PyPI wheel does not)
    ascend_from: str = ""  # the first release that runs on Ascend: only a requirement that rules it out is reported

    def matches(self, name: str) -> bool:
        # A name without separators (a repository's: TransformerEngine) may spell the distribution
        # (transformer-engine) without them.
        own = self.name if "-" in name else self.name.replace("-", "")
        if own.endswith("*"):
            return name.startswith(own[:-1])
        return name == own


def normalise(name: str) -> str:
    """PEP 503: lower case, every run of `-`, `_` and `.` one `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _rows(raw: list[dict]) -> tuple[PackageRow, ...]:
    return tuple(PackageRow(r["name"], r["what"], r["hint"], r.get("replacement", ""), r.get("only_with", ""),
                            str(r.get("from_source", "")), str(r.get("ascend_from", ""))) for r in raw)


@cache
def package_rows(target: str) -> tuple[PackageRow, ...]:
    return _rows(load_table(target, "cuda_only_packages")["rows"])


@cache
def conda_rows(target: str) -> tuple[PackageRow, ...]:
    return _rows(load_table(target, "cuda_only_packages")["conda"])


@cache
def system_rows(target: str) -> tuple[PackageRow, ...]:
    return _rows(load_table(target, "cuda_only_packages")["system"])


def match_system(target: str, package: str) -> Optional[PackageRow]:
    """A system package (`cuda-toolkit-12-4`, `libcudnn9-cuda-12=9.1.0.70-1`) of the CUDA stack."""
    name = re.split(r"[=:<>]", package.strip(), maxsplit=1)[0].lower()
    return next((row for row in system_rows(target) if row.matches(name)), None)


@cache
def image_rows(target: str) -> tuple[PackageRow, ...]:
    return _rows(load_table(target, "cuda_only_packages")["images"])


def requirement_name(text: str) -> Optional[str]:
    """The distribution a requirement string names (`flash-attn>=2; sys_platform=="linux"` ->
    `flash-attn`, `git+https://...#egg=apex` -> `apex`), normalised; None for what is no requirement."""
    text = text.strip()
    egg = _EGG.search(text)
    if egg:
        return normalise(egg.group(1))
    vcs = _VCS.match(text)
    if vcs:
        return normalise(vcs.group(1))
    if not text or text.startswith(("-", "#", ".", "/")) or "://" in text.split("@", 1)[0]:
        return None
    m = _REQUIREMENT.match(text)
    return normalise(m.group(1)) if m else None


def match_requirement(target: str, text: str) -> Optional[tuple[str, PackageRow]]:
    """(distribution name, row) when the requirement names a distribution with no Ascend build."""
    name = requirement_name(text)
    if name is None:
        return None
    for row in package_rows(target):
        if row.matches(name):
            return (name, row) if _ruled_out(row, text) else None
    return None


def _ruled_out(row: PackageRow, text: str) -> bool:
    """A row with a first Ascend release matches only a requirement whose versions all come before it."""
    if not row.ascend_from:
        return True
    spec = text.split(";", 1)[0]
    m = _REQUIREMENT.match(spec)
    return not admits_from(spec[m.end(1):] if m else spec, row.ascend_from)


def match_conda(target: str, spec: str) -> Optional[tuple[str, PackageRow]]:
    """A conda dependency: the CUDA stack's conda packages, and the pip rows under their conda names."""
    m = _CONDA.match(spec)
    if m is None:
        return None
    name = normalise(m.group(1))
    for row in (*conda_rows(target), *package_rows(target)):
        if row.matches(name):
            return (name, row) if _ruled_out(row, spec) else None  # conda's single `=` pin is not read
    return None


# A CUDA version in an image's tag: `-cu124-`, `cuda12.1`, `cuda-12.4` (not `cuda-python`, not `cu` in a word).
_CUDA_TAG = re.compile(r"(?<![a-z0-9])cu(?:da)?[-_]?1[0-9](?:\.?[0-9])*(?![a-z])")


def match_image(target: str, image: str) -> Optional[PackageRow]:
    """A Docker base image (`nvidia/cuda:12.4.1-devel-ubuntu22.04`) built on CUDA. The table's row without a
    name stands for any other image whose tag names a CUDA version (`someone/verl:th2.4.0-cu124-base`)."""
    name = image.lower().removeprefix("docker.io/")
    tag = name.rsplit("/", 1)[-1].partition(":")[2]
    for row in image_rows(target):
        if not row.name:
            if _CUDA_TAG.search(tag):
                return row
        elif name.startswith(row.name) and (not row.only_with or row.only_with in name):
            return row
    return None


@cache
def switch_rows(target: str) -> dict[str, PackageRow]:
    """Config key (`use_liger_kernel`) -> the row of the package it switches on, from the table's `switches`."""
    out = {}
    for raw in load_table(target, "cuda_only_packages").get("switches", []):
        found = match_requirement(target, raw["package"])
        if found is not None:
            out[raw["key"]] = found[1]
    return out


def switch_keys() -> tuple[str, ...]:
    """Every target's switch keys, for a rule's TRIGGERS."""
    return tuple(sorted({key for target in available_targets() for key in switch_rows(target)}))


def message(row: PackageRow, text: str) -> str:
    """One line for a dependency that has no Ascend build."""
    instead = f"; depend on {row.replacement} instead" if row.replacement else ""
    if row.ascend_from:
        return f"{row.what}: `{text}` accepts no release from {row.ascend_from} on, the first that runs on Ascend{instead}"
    if row.from_source:
        return (f"{row.what}: `{text}` has no Ascend build on PyPI (from {row.from_source} it builds for Ascend from "
                f"source){instead}")
    return f"{row.what}: `{text}` has no Ascend build{instead}"

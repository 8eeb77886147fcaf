"""The installable Ascend version sets the skeletons target (skeletons/version_sets.yaml).

A generated file names its set in its header, `generate ... --requirements-out` writes the set as a
pip requirements file, and `--verl-version` / `--vllm-version` choose a set: each set pairs one verl
release with the one vLLM release its vllm-ascend supports, so the two flags must agree on a set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Optional

import yaml

# The packages whose API every set is snapshotted at (codemods/data/api/, tools/release_snapshots.py).
SNAPSHOTTED_PACKAGES = ("verl", "vllm", "ray", "transformers")


PYPI = "https://pypi.org/simple"
MACHINES = ("x86_64", "aarch64")  # the Ascend hosts: Atlas 800 (Kunpeng, aarch64) and x86_64 servers


class VersionSetError(ValueError):
    pass


@dataclass(frozen=True)
class PackageIndex:
    """An index other than PyPI that some packages come from on some machines (PyTorch's CPU index on
    x86_64: PyPI's x86_64 torch is the CUDA build, and torch-npu runs on the CPU one)."""

    url: str
    packages: tuple[str, ...]
    machines: tuple[str, ...]
    local: str = ""  # the local version label of its builds ("cpu": torch==2.10.0+cpu)
    why: str = ""


@dataclass(frozen=True)
class NoDeps:
    """A package installed after the requirements file with `pip install --no-deps`: its own metadata cannot
    resolve (`replaced`: the requirements of its that name no release on the index); the file holds the rest."""

    requirement: str
    why: str
    replaced: tuple[str, ...] = ()


def requirement_name(line: str) -> str:
    return re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Removal:
    """A package some requirement pulls in on some machines that is broken on Ascend: uninstalled after the
    install (`restores`: packages of the set that share its files, reinstalled after the uninstall)."""

    package: str
    why: str
    restores: tuple[str, ...] = ()


@dataclass(frozen=True)
class VersionSet:
    name: str
    summary: str
    cann: str
    python: str
    trainer: str  # "v1": run_ppo(config, task_runner_class=TaskRunnerV1); "legacy": run_ppo(config)
    versions: dict[str, str]  # verl, vllm, vllm_ascend, ray, transformers
    requirements: tuple[str, ...]
    indexes: tuple[PackageIndex, ...] = ()  # where a package comes from when not from PyPI
    no_deps: tuple[NoDeps, ...] = ()  # installed after the file, with --no-deps
    engine_reload: bool = False  # a running vLLM engine's workers can reload weights from a checkpoint folder
    removals: tuple[Removal, ...] = ()  # uninstalled after everything else

    def all_requirements(self) -> tuple[str, ...]:
        """The file's lines, then the --no-deps ones."""
        return self.requirements + tuple(n.requirement for n in self.no_deps)

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

    def index_for(self, package: str, machine: str) -> PackageIndex:
        """The index `package` is installed from on `machine` (PyPI unless the set names another)."""
        for index in self.indexes:
            if machine in index.machines and _canonical(package) in {_canonical(p) for p in index.packages}:
                return index
        return PackageIndex(PYPI, (), MACHINES)

    def install_lines(self) -> list[str]:
        """The requirement lines, each ending with the index it comes from; a package that comes from another
        index on some machines gets one line per machine (an environment marker each)."""
        lines = [f"--extra-index-url {url}" for url in dict.fromkeys(i.url for i in self.indexes)]
        for requirement in self.requirements:
            name = requirement_name(requirement)
            where = {m: self.index_for(name, m) for m in MACHINES}
            if len({i.url for i in where.values()}) == 1:
                lines.append(f"{requirement}  # index: {where[MACHINES[0]].url}")
                continue
            for machine, index in where.items():
                pinned = requirement + (f"+{index.local}" if index.local and "==" in requirement else "")
                lines.append(f'{pinned}; platform_machine == "{machine}"  # index: {index.url}')
        return lines

    def _removal_lines(self) -> list[str]:
        lines = []
        pinned = {_canonical(requirement_name(r)): r for r in self.all_requirements()}
        for removal in self.removals:
            lines.append(f"#   pip uninstall -y {removal.package}   # {removal.why}")
            for name in removal.restores:
                if _canonical(name) in pinned:
                    lines.append(f"#   pip install --no-deps --force-reinstall {pinned[_canonical(name)]}   # it shares "
                                 f"{removal.package}'s files, which the uninstall removed")
        return lines

    def requirements_text(self) -> str:
        v = self.versions
        head = [
            f"# Ascend NPU stack for the generated scripts: {self.summary}.",
            "# Written by `npu-port generate --requirements-out`. Every pin is a release on its index for linux",
            f"# x86_64 and aarch64, CPython {self.python} (read with tools/index_pins.py), and the whole set resolves",
            "# with pip's resolver. Install on a host with the Ascend driver and",
            f"# CANN {self.cann} (toolkit and the matching kernels/nnal packages), Python {self.python}:",
            "#   source /usr/local/Ascend/ascend-toolkit/set_env.sh",
            "#   python -m pip install --upgrade pip   # as vllm-ascend's install guide does first: a venv's own pip"
            " (23.2 with Python 3.11.7) backtracks for long over these pins",
            "#   pip install -r requirements-npu.txt",
            *(f"#   pip install --no-deps {n.requirement}   # index: {self.index_for(requirement_name(n.requirement), MACHINES[0]).url}; "
              f"{' '.join(n.why.split())}" for n in self.no_deps),
            f"#   git clone --depth 1 --branch v{v['vllm']} https://github.com/vllm-project/vllm",
            "#   VLLM_TARGET_DEVICE=empty pip install -e vllm"
            + "".join(f" --extra-index-url {url}" for url in dict.fromkeys(i.url for i in self.indexes))
            + "   # vLLM without its CUDA torch pin"
            + (" (its build takes torch from there on x86_64)" if self.indexes else ""),
            *self._removal_lines(),
            f"# Each line names the index it comes from: {PYPI} (PyPI) unless it says otherwise.",
        ]
        for index in self.indexes:
            head.append(f"# {', '.join(index.packages)} on {', '.join(index.machines)}: {index.url}"
                        + (f" ({index.why})" if index.why else ""))
        return "\n".join(head + self.install_lines()) + "\n"


def _removal(data: dict) -> Removal:
    try:
        return Removal(package=str(data["package"]), why=" ".join(str(data["why"]).split()),
                       restores=tuple(map(str, data.get("restores") or ())))
    except (KeyError, TypeError) as exc:
        raise VersionSetError(f"a removal lacks {exc}") from None


def _index(data: dict) -> PackageIndex:
    try:
        return PackageIndex(url=str(data["url"]), packages=tuple(map(str, data["packages"])),
                            machines=tuple(map(str, data["machines"])), local=str(data.get("local", "")),
                            why=str(data.get("why", "")))
    except (KeyError, TypeError) as exc:
        raise VersionSetError(f"an index lacks {exc}") from None


def _parse(name: str, data: dict, indexes: tuple[PackageIndex, ...] = (),
           removals: tuple[Removal, ...] = ()) -> VersionSet:
    try:
        versions = {k: str(data[k]) for k in ("verl", "vllm", "vllm_ascend", "ray", "transformers")}
        vs = VersionSet(name=name, summary=str(data["summary"]), cann=str(data["cann"]), python=str(data["python"]),
                        trainer=str(data["trainer"]), versions=versions,
                        requirements=tuple(str(r) for r in data["requirements"]), indexes=indexes,
                        removals=removals,
                        engine_reload=bool(data.get("engine_reload", False)),
                        no_deps=tuple(NoDeps(str(n["requirement"]), " ".join(str(n["why"]).split()),
                                             tuple(map(str, n.get("replaced") or ())))
                                      for n in data.get("no_deps") or ()))
    except (KeyError, TypeError) as exc:
        raise VersionSetError(f"version set {name!r} lacks {exc}") from None
    if vs.trainer not in ("v1", "legacy"):
        raise VersionSetError(f"version set {name!r}: trainer is v1 or legacy, not {vs.trainer!r}")
    return vs


@cache
def _loaded() -> tuple[str, dict[str, VersionSet]]:
    text = (resources.files("npu_port.skeletons") / "version_sets.yaml").read_text(encoding="utf-8")
    return parse_sets(yaml.safe_load(text))


def parse_sets(data: dict) -> tuple[str, dict[str, VersionSet]]:
    """The default set's name and every set of a loaded version_sets.yaml."""
    indexes = tuple(_index(i) for i in data.get("indexes") or ())
    removals = tuple(_removal(r) for r in data.get("remove_after_install") or ())
    sets = {name: _parse(name, body, indexes, removals) for name, body in data["sets"].items()}
    if data["default"] not in sets:
        raise VersionSetError(f"default version set {data['default']!r} is not defined")
    return data["default"], sets


@dataclass(frozen=True)
class SourceLabel:
    """A source targeted at a commit rather than a release: what it is called, and the commit."""

    commit: str
    label: str


@cache
def mindspeed_rl_source() -> SourceLabel:
    """The MindSpeed-RL source msrl-train targets (version_sets.yaml, mindspeed_rl)."""
    text = (resources.files("npu_port.skeletons") / "version_sets.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text).get("mindspeed_rl") or {}
    try:
        return SourceLabel(str(data["commit"]), str(data["label"]))
    except KeyError as exc:
        raise VersionSetError(f"version_sets.yaml: mindspeed_rl lacks {exc}") from None


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

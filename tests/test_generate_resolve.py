"""The requirements `generate --requirements-out` writes install as written.

- Every `==` pin of every set is a release on the index its line names, for linux x86_64 and aarch64 with
  CPython 3.11 (skeletons/index_pins.json, read from the index by `python -m tools.index_pins`; the
  `network` test reads the index again).
- Every line says which index it comes from; torch, torchvision and torchaudio come from PyTorch's CPU index
  on x86_64.
- Every set resolves with pip's resolver (`pip install --dry-run --report`, `network`, `slow`).
- `NPU_PORT_INSTALL_SETS=1`: each set's CPU-installable part is installed into a fresh venv and `verl`,
  vLLM's config classes and `ray` are imported (opt-in: several GB of downloads and tens of minutes per set).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

from npu_port.transpiler.generate.versions import MACHINES, PYPI, requirement_name, version_sets
from tools import index_pins

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = json.loads((ROOT / "skeletons" / "index_pins.json").read_text(encoding="utf-8"))
SETS = sorted(version_sets())


def _exact_pins() -> list[tuple[str, str]]:
    return [(vs.name, line) for vs in version_sets().values() for line in vs.all_requirements()
            if any(s.operator == "==" for s in Requirement(line).specifier)]


def test_the_snapshot_holds_every_pin_of_every_set():
    assert sorted((r["set"], r["requirement"]) for r in SNAPSHOT["pins"]) == sorted(_exact_pins())


def test_no_pin_is_wrong_on_its_index():
    wrong = [(r["set"], r["requirement"], m, e["why"]) for r in SNAPSHOT["pins"]
             for m, e in r["machines"].items() if not e["ok"] and not e.get("unreachable")]
    assert wrong == []
    assert SNAPSHOT["wrong"] == 0
    for record in SNAPSHOT["pins"]:
        assert set(record["machines"]) == set(MACHINES)
        for machine, entry in record["machines"].items():
            if entry["ok"] and entry["file"].endswith(".whl"):
                assert index_pins._installs_on(entry["file"], machine), entry["file"]


def test_the_pin_that_named_no_release_is_gone():
    # triton-ascend 3.2.2 was never published on PyPI (3.2.0 is its only release).
    for vs in version_sets().values():
        assert "triton-ascend==3.2.2" not in vs.requirements


@pytest.mark.parametrize("name", SETS)
def test_every_line_names_its_index(name):
    vs = version_sets()[name]
    lines = [line for line in vs.requirements_text().splitlines() if line and not line.startswith("#")]
    options = [line for line in lines if line.startswith("--")]
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    for line in lines:
        if not line.startswith("--"):
            assert "  # index: https://" in line, line
    for machine in MACHINES:
        env = dict(default_environment(), platform_machine=machine)
        chosen = {}
        for line in lines:
            if line.startswith("--"):
                continue
            req = Requirement(line.split("  #", 1)[0])
            if req.marker is None or req.marker.evaluate(env):
                assert req.name not in chosen, f"{req.name} twice on {machine}"
                chosen[req.name] = (str(req.specifier), line.rsplit("# index: ", 1)[1])
        torch_spec, torch_index = chosen["torch"]
        if machine == "x86_64":
            assert torch_index == "https://download.pytorch.org/whl/cpu" and torch_spec.endswith("+cpu")
        else:
            assert torch_index == PYPI and "+" not in torch_spec
        assert chosen["torch-npu"][1] == PYPI


def test_the_verl_080_set_keeps_pyarrow_below_the_release_that_needs_numpy_2():
    vs = version_sets()["verl-0.8.0"]
    spec = next(Requirement(r).specifier for r in vs.requirements if requirement_name(r) == "pyarrow")
    assert "26.0.0" not in spec and "25.0.1" in spec
    assert any(r.startswith("numpy<2") for r in vs.requirements)


@pytest.mark.parametrize("name", [n for n in SETS if version_sets()[n].no_deps])
def test_a_no_deps_package_finds_its_other_requirements_in_the_file(name):
    vs = version_sets()[name]
    text = vs.requirements_text()
    file_reqs = {Requirement(r).name.lower().replace("_", "-"): Requirement(r) for r in vs.requirements}
    for nd in vs.no_deps:
        assert f"pip install --no-deps {nd.requirement}" in text
        record = next(r for r in SNAPSHOT["pins"] if r["requirement"] == nd.requirement and r["set"] == name)
        for machine, entry in record["machines"].items():
            declared = [Requirement(r) for r in entry["requires_dist"]]
            for req in declared:
                if req.marker is not None and not req.marker.evaluate(
                        dict(default_environment(), platform_machine=machine, extra="")):
                    continue
                if str(req) in nd.replaced:
                    assert req.name in file_reqs and str(file_reqs[req.name].specifier) != str(req.specifier)
                    continue
                mine = file_reqs.get(req.name.lower().replace("_", "-"))
                assert mine is not None, f"{nd.requirement} needs {req}; the file lacks it"
                pinned = [s.version for s in mine.specifier if s.operator == "=="]
                if pinned:
                    assert req.specifier.contains(pinned[0], prereleases=True), (req, mine)
                else:
                    assert str(req.specifier) in ("", str(mine.specifier)), (req, mine)


@pytest.mark.network
def test_every_pin_is_a_release_on_the_live_index():
    listing: dict = {}
    records = [index_pins.check_pin(p, listing) for p in index_pins.pins()]
    wrong = [(r["set"], r["requirement"], m, e["why"]) for r in records for m, e in r["machines"].items()
             if not e["ok"] and not e.get("unreachable")]
    assert wrong == []


# --- pip's resolver ----------------------------------------------------------------------------------------

def _reachable(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def _clean_env(extra: dict[str, str]) -> dict[str, str]:
    """pip as a user on a bare machine has it: no pip configuration (this machine's constraints and local
    indexes would change the answer), PyPI unless NPU_PORT_INDEX_URL names a mirror of it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
               PIP_INDEX_URL=os.environ.get("NPU_PORT_INDEX_URL", PYPI), PIP_DEFAULT_TIMEOUT="120")
    if os.environ.get("PIP_CERT"):
        env["PIP_CERT"] = os.environ["PIP_CERT"]
    env.update(extra)
    return env


def _stand_in(site: Path, vs, machine: str) -> list[str]:
    """The packages of an index this machine cannot reach, as installed distributions carrying the metadata
    the snapshot read for them (PyPI's aarch64 build of the same release: the CPU build, whose only extra
    requirements are CUDA libraries marked platform_machine == "x86_64", dropped here). pip takes an installed
    release that meets a requirement as it is, so the rest of the set is resolved against them."""
    names = []
    for record in SNAPSHOT["pins"]:
        entry = record["machines"][machine]
        if record["set"] != vs.name or not entry.get("unreachable"):
            continue
        meta = record["machines"]["aarch64"]
        req = Requirement(record["requirement"])
        dist = site / f"{req.name}-{entry['version']}.dist-info"
        dist.mkdir(parents=True)
        requires = [r for r in meta["requires_dist"] if "x86_64" not in r]
        dist.joinpath("METADATA").write_text(
            "Metadata-Version: 2.1\n" f"Name: {req.name}\n" f"Version: {entry['version']}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires), encoding="utf-8")
        dist.joinpath("INSTALLER").write_text("npu-port-test\n")
        dist.joinpath("RECORD").write_text("")
        names.append(req.name)
    return names


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path / "bin" / "python"


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _machine() -> str:
    import platform

    return platform.machine()


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("name", SETS)
def test_every_set_resolves_with_pips_resolver(name, tmp_path):
    vs = version_sets()[name]
    machine = _machine()
    if machine not in MACHINES:
        pytest.skip(f"the sets target linux {' and '.join(MACHINES)}, not {machine}")
    python = _venv(tmp_path / "venv")
    text = vs.requirements_text()
    extra_env = {}
    unreachable = [i for i in vs.indexes if machine in i.machines and not _reachable(i.url)]
    if unreachable:
        site = tmp_path / "stand-in"
        standing = _stand_in(site, vs, machine)
        assert standing, "an unreachable index with nothing recorded from it"
        extra_env["PYTHONPATH"] = str(site)
        kept = [line for line in text.splitlines()
                if not any(line == f"--extra-index-url {i.url}" or line.endswith(f"# index: {i.url}")
                           for i in unreachable)]
        kept += [f"{n}=={next(r['machines'][machine]['version'] for r in SNAPSHOT['pins'] if r['set'] == name and Requirement(r['requirement']).name == n)}"
                 for n in standing]
        text = "\n".join(kept) + "\n"
    requirements = tmp_path / "requirements-npu.txt"
    requirements.write_text(text, encoding="utf-8")
    report = tmp_path / "report.json"
    # This pip (a current resolver: the venv's bundled pip backtracks for long) resolves for the fresh venv.
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet",
                           "--report", str(report), "-r", str(requirements)], capture_output=True, text=True,
                          timeout=3000, env=_clean_env(extra_env), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    # What the venv has already (pip, setuptools, the stand-ins) and what pip would add to it.
    listed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "list", "--format", "json"],
                            capture_output=True, text=True, timeout=300, env=_clean_env(extra_env), check=True)
    resolved = {_key(d["name"]): d["version"] for d in json.loads(listed.stdout)}
    resolved.update({_key(i["metadata"]["name"]): i["metadata"]["version"]
                     for i in json.loads(report.read_text())["install"]})
    for line in vs.requirements:
        req = Requirement(line)
        got = resolved.get(_key(req.name))
        assert got is not None and req.specifier.contains(got, prereleases=True), (line, got)
    # What pip install --no-deps adds next: its own requirements (but the replaced ones) are met.
    for nd in vs.no_deps:
        record = next(r for r in SNAPSHOT["pins"] if r["requirement"] == nd.requirement and r["set"] == name)
        for r in record["machines"][machine]["requires_dist"]:
            req = Requirement(r)
            if str(req) in nd.replaced or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
                continue
            got = resolved.get(_key(req.name))
            assert got is not None and req.specifier.contains(got, prereleases=True), (nd.requirement, r, got)
    if any(r.startswith("numpy<2") for r in vs.requirements) and "pyarrow" in resolved:
        assert Version(resolved["pyarrow"]) < Version("26"), "pyarrow 26 does not import with numpy 1.x"


# --- installed for real (opt-in) ---------------------------------------------------------------------------

VLLM_REQUIRES = """
from importlib.metadata import requires
from packaging.requirements import Requirement
CUDA = ("torch", "torchvision", "torchaudio", "xformers", "triton", "flashinfer", "nvidia", "cupy", "ray")
for line in requires("vllm") or []:
    req = Requirement(line)
    if not req.name.lower().startswith(CUDA) and (req.marker is None or req.marker.evaluate({"extra": ""})):
        print(str(req).split(";")[0])
"""

IMPORTS = """
import ray
import verl
from vllm.config import ModelConfig, ParallelConfig, VllmConfig
print("imported", verl.__version__, ray.__version__, ModelConfig.__name__, ParallelConfig.__name__, VllmConfig.__name__)
"""


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.skipif(os.environ.get("NPU_PORT_INSTALL_SETS") != "1",
                    reason="installs several GB per set: NPU_PORT_INSTALL_SETS=1 runs it")
@pytest.mark.parametrize("name", SETS)
def test_the_cpu_installable_part_of_a_set_installs_and_imports(name, tmp_path):
    """torch's CPU build and every package that installs without CANN (not torch-npu, triton-ascend,
    vllm-ascend: they need the Ascend toolkit at import), then vLLM from its wheel without its CUDA
    requirements (VLLM_TARGET_DEVICE=empty is a source build), and the imports a generated script makes."""
    vs = version_sets()[name]
    missing = [i.url for i in vs.indexes if _machine() in i.machines and not _reachable(i.url)]
    if missing:
        pytest.skip(f"the set installs torch from {', '.join(missing)}, which this machine cannot reach")
    python = _venv(tmp_path / "venv")
    ascend_only = {"torch-npu", "triton-ascend", "vllm-ascend", "memfabric-hybrid", "memcache-hybrid",
                   "arctic-inference"}
    lines = [line for line in vs.requirements_text().splitlines()
             if line and not line.startswith("#")
             and (line.startswith("--") or requirement_name(line).lower().replace("_", "-") not in ascend_only)]
    requirements = tmp_path / "cpu.txt"
    requirements.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = _clean_env({})
    for args in (["-r", str(requirements)], ["--no-deps", f"vllm=={vs.vllm}"], ["-r", str(tmp_path / "vllm.txt")]):
        if args[-1].endswith("vllm.txt"):
            # vLLM's own requirements but the CUDA ones (torch and what is built against it): what
            # VLLM_TARGET_DEVICE=empty installs from its source.
            listed = subprocess.run([str(python), "-c", VLLM_REQUIRES], capture_output=True, text=True, timeout=60,
                                    env=env, check=True).stdout
            (tmp_path / "vllm.txt").write_text(listed, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *args],
                              capture_output=True, text=True, timeout=5400, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-6000:]
    proc = subprocess.run([str(python), "-c", IMPORTS], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "imported" in proc.stdout, proc.stderr[-6000:]

"""The requirements `generate --requirements-out` writes install as written.

- Every `==` pin of every set is a release on the index its line names, for linux x86_64 and aarch64 with
  CPython 3.11 (skeletons/index_pins.json, read from the index by `python -m tools.index_pins`; the
  `network` test reads the index again).
- Every line says which index it comes from; torch, torchvision and torchaudio come from PyTorch's CPU index
  on x86_64.
- Every set resolves with pip's resolver (`pip install --dry-run --report`, `network`, `slow`), together with
  what vLLM's source build installs after it (its requirements/common.txt, recorded in the snapshot).
- `NPU_PORT_INSTALL_SETS=1`: each set is installed into a fresh venv by the steps its file's header gives
  (the file, the `--no-deps` lines, vLLM from its source with VLLM_TARGET_DEVICE=empty), its pins are still
  what they pin afterwards, and `verl`, vLLM's config classes and `ray` import on the CPU (opt-in: several GB
  of downloads and minutes per set). Where PyTorch's CPU index cannot be reached, torch comes from PyPI.
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


def _header_steps(text: str) -> list[str]:
    """The commands the file's header gives, in order (without their comments)."""
    return [line[4:].split("   #", 1)[0].strip() for line in text.splitlines() if line.startswith("#   ")]


@pytest.mark.parametrize("name", SETS)
def test_the_header_removes_nvidias_triton_after_everything_and_restores_triton_ascend(name):
    # xgrammar requires triton on x86_64 (the resolver installs triton 3.9.0 beside triton-ascend 3.2.0); both
    # write site-packages/triton. vllm-ascend's Dockerfile uninstalls it after vLLM, then reinstalls triton-ascend.
    vs = version_sets()[name]
    steps = _header_steps(vs.requirements_text())
    vllm = next(i for i, s in enumerate(steps) if s.startswith("VLLM_TARGET_DEVICE=empty pip install"))
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in steps[vllm]
    assert steps[vllm + 1] == "pip uninstall -y triton"
    ascend = [r for r in vs.all_requirements() if requirement_name(r) == "triton-ascend"]
    assert steps[vllm + 2:] == [f"pip install --no-deps --force-reinstall {r}" for r in ascend]


@pytest.mark.parametrize("name", SETS)
def test_the_header_upgrades_pip_before_the_file(name):
    # A fresh venv's pip (23.2.1 with CPython 3.11.7) was still backtracking through virtualenv and datasets
    # releases after 8 minutes on the verl 0.8.0 file; pip 26 resolves it in about 2.
    steps = _header_steps(version_sets()[name].requirements_text())
    assert steps.index("python -m pip install --upgrade pip") < steps.index("pip install -r requirements-npu.txt")


def _applies(req: Requirement, machine: str) -> bool:
    env = dict(default_environment(), platform_machine=machine, platform_system="Linux", sys_platform="linux",
               python_version="3.11", python_full_version="3.11.7", implementation_name="cpython", extra="")
    return req.marker is None or req.marker.evaluate(env)


@pytest.mark.parametrize("name", SETS)
def test_vllms_source_requirements_are_recorded_and_fit_the_sets_pins(name):
    # `VLLM_TARGET_DEVICE=empty pip install -e vllm` (the file's header) installs vLLM's requirements/common.txt
    # after the file: an exact pin of the set that vLLM refuses would be replaced by that second install.
    vs = version_sets()[name]
    source = SNAPSHOT["vllm_source"][vs.vllm]
    assert source["ok"] and source["file"] == f"vllm-{vs.vllm}.tar.gz", source
    required = [Requirement(r) for r in source["requirements"]]
    assert {"transformers", "numpy", "compressed-tensors"} <= {_key(r.name) for r in required}
    exact = {}
    for line in vs.all_requirements():
        req = Requirement(line)
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        if pinned:
            exact[_key(req.name)] = pinned[0]
    refused = [(str(r), exact[_key(r.name)], m) for m in MACHINES for r in required
               if _applies(r, m) and _key(r.name) in exact and not r.specifier.contains(exact[_key(r.name)], True)]
    assert refused == []


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
    # What the header installs next, vLLM from its source (VLLM_TARGET_DEVICE=empty): its requirements/common.txt,
    # resolved with the file, so that the second install has nothing to replace.
    vllm_source = tmp_path / "vllm-common.txt"
    vllm_source.write_text("\n".join(SNAPSHOT["vllm_source"][vs.vllm]["requirements"]) + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    # This pip (a current resolver: the venv's bundled pip backtracks for long) resolves for the fresh venv.
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet",
                           "--report", str(report), "-r", str(requirements), "-r", str(vllm_source)], capture_output=True, text=True,
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
    for line in SNAPSHOT["vllm_source"][vs.vllm]["requirements"]:
        req = Requirement(line)
        if _applies(req, machine):
            got = resolved.get(_key(req.name))
            assert got is not None and req.specifier.contains(got, prereleases=True), ("vllm", line, got)
    # What pip install --no-deps adds next: its own requirements (but the replaced ones) are met.
    for nd in vs.no_deps:
        record = next(r for r in SNAPSHOT["pins"] if r["requirement"] == nd.requirement and r["set"] == name)
        for r in record["machines"][machine]["requires_dist"]:
            req = Requirement(r)
            if str(req) in nd.replaced or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
                continue
            got = resolved.get(_key(req.name))
            assert got is not None and req.specifier.contains(got, prereleases=True), (nd.requirement, r, got)
    if "triton" in resolved:  # NVIDIA's triton, pulled in by xgrammar on x86_64: the header removes it
        assert "pip uninstall -y triton" in _header_steps(vs.requirements_text())
    if any(r.startswith("numpy<2") for r in vs.requirements) and "pyarrow" in resolved:
        assert Version(resolved["pyarrow"]) < Version("26"), "pyarrow 26 does not import with numpy 1.x"


# --- installed for real (opt-in) ---------------------------------------------------------------------------

IMPORTS = """
import ray
import verl
from vllm.config import ModelConfig, ParallelConfig, VllmConfig
print("imported", verl.__version__, ray.__version__, ModelConfig.__name__, ParallelConfig.__name__, VllmConfig.__name__)
"""

PLUGINS = """
from importlib.metadata import entry_points
print(sorted(e.value for e in entry_points(group="vllm.platform_plugins")))
"""


def _without_index(text: str, unreachable: list) -> str:
    """The file as written but for the option naming an index this machine cannot reach."""
    return "\n".join(line for line in text.splitlines()
                     if not any(line == f"--extra-index-url {i.url}" for i in unreachable)) + "\n"


def _install_stand_ins(python: Path, env: dict, vs, unreachable: list, machine: str) -> list[str]:
    """What an unreachable index would give, installed before the file: the same release from PyPI, relabelled
    with the index's local version (torch 2.10.0 as 2.10.0+cpu; torch-npu's x86_64 wheel requires exactly that).
    PyPI's x86_64 torch is the CUDA build: the same release and API, and it imports on a CPU. The file's own
    lines then find them installed."""
    stand_ins = []
    for line in vs.requirements:
        name = requirement_name(line)
        index = vs.index_for(name, machine)
        if index in unreachable and "==" in line:
            stand_ins.append((name, Requirement(line).specifier, index.local))
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                           *(f"{name}{spec}" for name, spec, _ in stand_ins)],
                          capture_output=True, text=True, timeout=5400, env=env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    site = next((python.parent.parent / "lib").glob("python3*/site-packages"))
    for name, spec, local in stand_ins:
        version = next(s.version for s in spec if s.operator == "==")
        info = site / f"{name}-{version}.dist-info"
        meta = info / "METADATA"
        text = meta.read_text(encoding="utf-8")
        assert f"\nVersion: {version}\n" in text, name
        meta.write_text(text.replace(f"\nVersion: {version}\n", f"\nVersion: {version}+{local}\n", 1), encoding="utf-8")
        info.rename(site / f"{name}-{version}+{local}.dist-info")
    return [name for name, _, _ in stand_ins]


def _vllm_source(folder: Path, version: str) -> None:
    """vLLM's source at the release into `folder` (the header clones the tag from GitHub; the release's sdist on
    PyPI is that source, the one tools/index_pins read requirements/common.txt from)."""
    import shutil
    import tarfile
    import urllib.request

    source = SNAPSHOT["vllm_source"][version]
    url = next(f.url for f in index_pins.project_files(PYPI, "vllm") if f.filename == source["file"])
    archive = folder.parent / source["file"]
    with urllib.request.urlopen(url, timeout=600) as response:
        archive.write_bytes(response.read())
    with tarfile.open(archive) as tar:
        tar.extractall(folder.parent / "sdist", filter="data")
    shutil.move(str(folder.parent / "sdist" / f"vllm-{version}"), str(folder))


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.skipif(os.environ.get("NPU_PORT_INSTALL_SETS") != "1",
                    reason="installs several GB per set: NPU_PORT_INSTALL_SETS=1 runs it")
@pytest.mark.parametrize("name", SETS)
def test_a_set_installs_as_its_file_says_and_imports_on_a_cpu(name, tmp_path):
    """The requirements file's header run as written, in a fresh venv: `pip install -r` the file (the Ascend wheels
    install without CANN; nothing imports them here), the `--no-deps` lines, vLLM from its source with
    VLLM_TARGET_DEVICE=empty, the clean-up. Then every pin of the set is still what it pins (the later steps
    replaced nothing), NVIDIA's triton is gone and triton-ascend whole, vllm-ascend is vLLM's platform plugin,
    and `verl`, vLLM's config classes and `ray` import on this CPU (without torch-npu and vllm-ascend, which
    need CANN to import). `source set_env.sh` is skipped (CANN); what an index this machine cannot reach
    holds is stood in for by the same release from PyPI (_install_stand_ins)."""
    import shlex

    vs = version_sets()[name]
    machine = _machine()
    if machine not in MACHINES:
        pytest.skip(f"the sets target linux {' and '.join(MACHINES)}, not {machine}")
    python = _venv(tmp_path / "venv")
    env = _clean_env({})
    text = vs.requirements_text()
    unreachable = [i for i in vs.indexes if machine in i.machines and not _reachable(i.url)]
    if unreachable:
        print("stand-ins for an unreachable index:", _install_stand_ins(python, env, vs, unreachable, machine))
    (tmp_path / "requirements-npu.txt").write_text(_without_index(text, unreachable), encoding="utf-8")
    for step in _header_steps(text):
        words = shlex.split(step)
        if unreachable and words[:3] == ["pip", "install", "-r"]:
            # pip keeps what a venv holds where it can (the stand-ins' own requirements, newer than a fresh
            # resolution picks, sent it backtracking through datasets releases): resolve as in a fresh venv.
            words += ["--upgrade-strategy", "eager"]
        if words[0] == "source":
            continue
        if words[:2] == ["git", "clone"]:
            _vllm_source(tmp_path / words[-1].rsplit("/", 1)[-1], vs.vllm)
            continue
        extra = {}
        while "=" in words[0]:
            key, _, value = words.pop(0).partition("=")
            extra[key] = value
        for index in unreachable:
            while f"--extra-index-url={index.url}" in words or index.url in words:
                at = words.index(index.url) if index.url in words else words.index(f"--extra-index-url={index.url}")
                del words[at - (words[at] == index.url):at + 1]
        assert words[0] in ("pip", "python"), step
        command = [str(python), *words[1:]] if words[0] == "python" else [str(python), "-m", "pip", *words[1:]]
        proc = subprocess.run([*command, *(["--quiet"] if "install" in words[1:3] else [])],
                              capture_output=True, text=True, timeout=5400, env=dict(env, **extra), cwd=tmp_path)
        assert proc.returncode == 0, (step, proc.stderr[-6000:])
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                            timeout=300, env=env, check=True)
    installed = {_key(d["name"]): d["version"] for d in json.loads(listed.stdout)}
    for line in vs.all_requirements():
        req = Requirement(line)
        got = installed.get(_key(req.name))
        assert got is not None and req.specifier.contains(got.split("+", 1)[0], prereleases=True), (line, got)
    assert installed.get("vllm", "").startswith(vs.vllm), installed.get("vllm")
    assert "triton" not in installed
    whole = ("from importlib.metadata import distribution, PackageNotFoundError\n"
             "try:\n    d = distribution('triton-ascend')\nexcept PackageNotFoundError:\n    print('none')\n"
             "else:\n    print(sum(not d.locate_file(f).exists() for f in d.files or []))")
    missing = subprocess.run([str(python), "-c", whole], capture_output=True, text=True, timeout=300, env=env,
                             check=True).stdout.strip()
    assert missing in ("0", "none") and (missing == "0") == ("triton-ascend" in installed), missing
    plugins = subprocess.run([str(python), "-c", PLUGINS], capture_output=True, text=True, timeout=300, env=env,
                             check=True).stdout
    assert "vllm_ascend:register" in plugins, plugins  # vLLM finds the Ascend platform on an NPU host
    # Installed, torch_npu is imported by torch (backend auto-loading), by transformers (is_torch_npu_available)
    # and by vllm-ascend, vLLM's platform plugin; it needs CANN's libraries (libhccl.so), which this machine
    # lacks. The imports on a CPU are of the rest: the two packages that load it are uninstalled first.
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "--quiet", "torch-npu", "vllm-ascend"],
                   capture_output=True, text=True, timeout=300, env=env, check=True)
    proc = subprocess.run([str(python), "-c", IMPORTS], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "imported" in proc.stdout, proc.stderr[-6000:]
    print(proc.stdout.strip())

"""Read every `==` pin of skeletons/version_sets.yaml from the package index, and record what it found.

    python -m tools.index_pins            # query the indexes, write skeletons/index_pins.json
    python -m tools.index_pins --check    # query them, exit 1 if a pin is not a release there (nothing written)

A pin passes when its release is on the index its requirement line names (PyPI unless the set's `indexes`
say otherwise for that package and machine), is not yanked, and has a file that installs on linux x86_64 and
on linux aarch64 with CPython 3.11: a wheel for that machine, or a pure-Python wheel; an sdist only for a
release that publishes no wheel at all. For each file the snapshot keeps its name, sha256 and the wheel's
Requires-Dist (read from the wheel's METADATA with HTTP range requests, not the whole wheel), so the tests
can check the sets offline and the resolver test can stand in for what it cannot download.

vLLM is built from its source (`VLLM_TARGET_DEVICE=empty pip install -e vllm`, as the requirements file's header
says), which installs the source's requirements/common.txt: the snapshot keeps those lines per vLLM release
(`vllm_source`, read from the release's sdist on PyPI), so the tests can hold the sets to them and the resolver
test resolves each set together with them.

An index this machine cannot reach is recorded as unreachable, never as passed; `--check` fails on it.
"""

from __future__ import annotations

import argparse
import html.parser
import io
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "skeletons" / "index_pins.json"
MACHINES = ("x86_64", "aarch64")
PYPI_SIMPLE = "https://pypi.org/simple"
PYTHON = "cp311"
TIMEOUT = 120


# --- the indexes -----------------------------------------------------------------------------------------

@dataclass
class IndexFile:
    filename: str
    url: str
    sha256: Optional[str]
    yanked: bool


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, dict[str, Optional[str]]]] = []
        self._attrs: Optional[dict[str, Optional[str]]] = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self._attrs = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._attrs is not None:
            self.links.append((data.strip(), self._attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._attrs = None


def project_files(index: str, name: str) -> list[IndexFile]:
    """The files of project `name` on a PEP 503/691 simple index (JSON when it answers JSON, else HTML)."""
    url = f"{index.rstrip('/')}/{canonicalize_name(name)}/"
    request = urllib.request.Request(url, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        body = response.read()
        kind = response.headers.get("Content-Type", "")
    if "json" in kind:
        data = json.loads(body)
        return [IndexFile(f["filename"], urllib.parse.urljoin(url, f["url"]), f.get("hashes", {}).get("sha256"),
                          bool(f.get("yanked"))) for f in data["files"]]
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    files = []
    for text, attrs in parser.links:
        href = urllib.parse.urljoin(url, attrs.get("href") or "")
        link, _, fragment = href.partition("#")
        sha = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        files.append(IndexFile(text or link.rsplit("/", 1)[-1], link, sha, "data-yanked" in attrs))
    return files


class _RangeFile(io.RawIOBase):
    """A remote file read with HTTP range requests (enough of one for zipfile to find one member)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pos = 0
        request = urllib.request.Request(url, headers={"Range": "bytes=0-0"})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            total = response.headers.get("Content-Range", "").rpartition("/")[2]
            if response.status != 206 or not total.isdigit():
                raise OSError(f"{url}: the server does not answer range requests")
        self.size = int(total)

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            data = response.read()
        self.pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def wheel_requires(url: str) -> list[str]:
    """The Requires-Dist lines of a remote wheel's METADATA (PEP 658's .metadata first, else range reads)."""
    try:
        with urllib.request.urlopen(url + ".metadata", timeout=TIMEOUT) as response:
            text = response.read().decode("utf-8")
    except urllib.error.HTTPError:
        with zipfile.ZipFile(io.BufferedReader(_RangeFile(url), buffer_size=1 << 16)) as wheel:  # type: ignore[arg-type]
            member = next(n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
            text = wheel.read(member).decode("utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


# --- which file installs where ---------------------------------------------------------------------------

def _interpreter_fits(interpreter: str, abi: str) -> bool:
    """CPython 3.11 runs a wheel built for it (cp311), a pure-Python one (py3, py311: abi none), and a stable-ABI
    one built for any CPython 3.x up to 3.11 (cp38-abi3: vLLM's wheels)."""
    if abi == "abi3":
        m = re.fullmatch(r"cp3(\d+)", interpreter)
        return m is not None and int(m.group(1)) <= int(PYTHON[3:])
    if abi == "none":
        return interpreter in ("py3", "py311", PYTHON)
    return interpreter == PYTHON and abi == PYTHON


def _installs_on(filename: str, machine: str) -> bool:
    _, _, _, tags = parse_wheel_filename(filename)
    for tag in tags:
        if not _interpreter_fits(tag.interpreter, tag.abi):
            continue
        if tag.platform == "any" or (tag.platform.startswith(("manylinux", "linux"))
                                     and tag.platform.endswith(machine)):
            return True
    return False


def pick_file(files: list[IndexFile], name: str, version: str, machine: str) -> tuple[Optional[IndexFile], str]:
    """The file pip would install for name==version on linux `machine`, CPython 3.11, and why (or why none)."""
    wheels, sdists = [], []
    for f in files:
        try:
            if f.filename.endswith(".whl"):
                wname, wversion, _, _ = parse_wheel_filename(f.filename)
                if wname == canonicalize_name(name) and str(wversion) == version:
                    wheels.append(f)
            elif f.filename.endswith((".tar.gz", ".zip")):
                sname, sversion = parse_sdist_filename(f.filename)
                if sname == canonicalize_name(name) and str(sversion) == version:
                    sdists.append(f)
        except ValueError:
            continue
    if not wheels and not sdists:
        return None, "no such release on the index"
    if all(f.yanked for f in wheels + sdists):
        return None, "yanked"
    fitting = [f for f in wheels if not f.yanked and _installs_on(f.filename, machine)]
    if fitting:
        # A build tag (torch-2.10.0-3-...) is a rebuild: pip prefers the highest, so does this.
        return sorted(fitting, key=lambda f: parse_wheel_filename(f.filename)[2])[-1], "wheel"
    if wheels:
        return None, f"no wheel for linux {machine} CPython 3.11 (the release publishes wheels)"
    return next(f for f in sdists if not f.yanked), "sdist (the release publishes no wheel)"


# --- the sets --------------------------------------------------------------------------------------------

@dataclass
class Pin:
    set_name: str
    requirement: str  # as the set writes it, e.g. "torch==2.10.0"
    name: str
    version: str
    indexes: dict[str, str] = field(default_factory=dict)  # machine -> index URL
    local: dict[str, str] = field(default_factory=dict)  # machine -> local version label ("cpu")


def _sets(path: Optional[Path] = None) -> dict[str, Any]:
    import yaml

    from npu_port.transpiler.generate.versions import parse_sets

    text = (path or ROOT / "skeletons" / "version_sets.yaml").read_text(encoding="utf-8")
    return parse_sets(yaml.safe_load(text))[1]


def pins(path: Optional[Path] = None) -> list[Pin]:
    """Every `==` pin of every set, with the index each machine installs it from."""
    found = []
    for vs in _sets(path).values():
        for line in vs.all_requirements():
            req = Requirement(line)
            exact = [s for s in req.specifier if s.operator == "=="]
            if not exact:
                continue
            pin = Pin(vs.name, line, req.name, exact[0].version)
            for machine in MACHINES:
                index = vs.index_for(req.name, machine)
                pin.indexes[machine] = index.url
                if index.local:
                    pin.local[machine] = index.local
            found.append(pin)
    return found


def check_pin(pin: Pin, listing: dict[tuple[str, str], Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"set": pin.set_name, "requirement": pin.requirement, "machines": {}}
    for machine in MACHINES:
        index = pin.indexes[machine]
        version = pin.version + (f"+{pin.local[machine]}" if machine in pin.local else "")
        key = (index, pin.name)
        if key not in listing:
            try:
                listing[key] = project_files(index, pin.name)
            except (OSError, ValueError) as exc:
                listing[key] = exc
        files = listing[key]
        entry: dict[str, Any] = {"index": index, "version": version}
        if isinstance(files, Exception):
            entry.update(ok=False, unreachable=True, why=f"index unreachable from here, not checked: {files}")
        else:
            chosen, why = pick_file(files, pin.name, version, machine)
            entry.update(ok=chosen is not None, why=why)
            if chosen is not None:
                entry.update(file=chosen.filename, sha256=chosen.sha256)
                if chosen.filename.endswith(".whl"):
                    try:
                        entry["requires_dist"] = wheel_requires(chosen.url)
                    except (OSError, ValueError, StopIteration, zipfile.BadZipFile) as exc:
                        entry["requires_dist_error"] = str(exc)
        record["machines"][machine] = entry
    record["ok"] = all(e["ok"] for e in record["machines"].values())
    record["unreachable"] = any(e.get("unreachable") for e in record["machines"].values())
    return record


# --- vLLM, built from its source -------------------------------------------------------------------------

def source_requirements(files: dict[str, str], name: str = "requirements/common.txt") -> list[str]:
    """The requirement lines of one of vLLM's requirements files (`files`: path in the source tree -> text),
    following `-r other.txt` as vLLM's setup.py does; comments, blank lines and other options dropped."""
    lines: list[str] = []
    folder = name.rsplit("/", 1)[0]
    for raw in files[name].splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line.startswith("-r "):
            lines += source_requirements(files, f"{folder}/{line.split()[1]}")
        elif line and not line.startswith(("#", "-")):
            lines.append(" ".join(line.split()))
    return lines


def vllm_source(version: str, listing: dict[tuple[str, str], Any]) -> dict[str, Any]:
    """What `VLLM_TARGET_DEVICE=empty pip install -e vllm` installs besides vLLM: requirements/common.txt of the
    release's source (setup.py's get_requirements, the no-device branch), read from the release's sdist on PyPI
    (the tag's source)."""
    import tarfile

    record: dict[str, Any] = {"vllm": version, "index": PYPI_SIMPLE}
    key = (PYPI_SIMPLE, "vllm")
    try:
        if key not in listing:
            listing[key] = project_files(PYPI_SIMPLE, "vllm")
        files = listing[key]
        if isinstance(files, Exception):
            raise files
        sdist = next((f for f in files if f.filename == f"vllm-{version}.tar.gz" and not f.yanked), None)
        if sdist is None:
            return dict(record, ok=False, why="no sdist of this release on the index")
        with urllib.request.urlopen(sdist.url, timeout=TIMEOUT) as response:
            data = response.read()
        texts: dict[str, str] = {}
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar.getmembers():
                parts = member.name.split("/", 1)
                if member.isfile() and len(parts) == 2 and parts[1].startswith("requirements/") \
                        and parts[1].endswith(".txt"):
                    texts[parts[1]] = (tar.extractfile(member) or io.BytesIO()).read().decode("utf-8")
        return dict(record, ok=True, file=sdist.filename, sha256=sdist.sha256, source="requirements/common.txt",
                    requirements=source_requirements(texts))
    except (OSError, ValueError, KeyError, tarfile.TarError) as exc:
        return dict(record, ok=False, unreachable=isinstance(exc, OSError), why=str(exc))


def snapshot(path: Optional[Path] = None) -> dict[str, Any]:
    listing: dict[tuple[str, str], Any] = {}
    records = [check_pin(p, listing) for p in pins(path)]
    sources = {v: vllm_source(v, listing) for v in sorted({vs.vllm for vs in _sets(path).values()})}
    return {
        # vLLM's own requirements, as its source build installs them, per release the sets build.
        "vllm_source": sources,
        "generated_by": "python -m tools.index_pins",
        "read_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": PYTHON,
        "machines": list(MACHINES),
        "pins": records,
        # A pin is wrong when an index that answered has no installable release of it for a machine.
        "wrong": sum(any(not e["ok"] and not e.get("unreachable") for e in r["machines"].values())
                     for r in records),
        "unchecked": sum(r["unreachable"] for r in records),
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if a pin is wrong or unchecked")
    parser.add_argument("--allow-unreachable", action="store_true",
                        help="an index this machine cannot reach does not fail --check (it is still reported)")
    parser.add_argument("--sets", type=Path, help="another version_sets.yaml (default: the skeletons')")
    parser.add_argument("--out", type=Path, default=SNAPSHOT)
    args = parser.parse_args(argv)
    data = snapshot(args.sets)
    for record in data["pins"]:
        for machine, entry in record["machines"].items():
            mark = "ok " if entry["ok"] else "???" if entry.get("unreachable") else "BAD"
            print(f"{mark} {record['set']:<12} {record['requirement']:<28} {machine:<8} {entry['why']}: "
                  f"{entry.get('file', '')} ({entry['index']})")
    for version, source in data["vllm_source"].items():
        print(f"{'ok ' if source['ok'] else '???'} vllm {version} source: "
              + (f"{len(source['requirements'])} requirements in {source['source']} of {source['file']}"
                 if source["ok"] else source["why"]))
    print(f"{len(data['pins'])} pins: {data['wrong']} wrong, {data['unchecked']} not checked "
          "(an index this machine cannot reach)", file=sys.stderr)
    if not args.check:
        args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
        return 1 if data["wrong"] else 0
    sources = data["vllm_source"].values()
    unread = any(not s["ok"] and not s.get("unreachable") for s in sources)
    unread_here = any(s.get("unreachable") for s in sources)
    return 1 if data["wrong"] or unread or ((data["unchecked"] or unread_here) and not args.allow_unreachable) else 0


if __name__ == "__main__":
    sys.exit(main())

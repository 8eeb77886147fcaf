"""The oldest release of a package a project accepts, read from its dependency files as text (never run).

`convert --keep-cuda` writes torch's device-agnostic API only where the project's torch has it, so it
needs the lowest torch the project supports: a pin of torch or torch-npu, or the torch a pinned vLLM or
VERL release itself requires (`implied`, a table of the caller's: codemods/data/<target>/device_agnostic.yaml).

Read: requirements*.txt / .in / .lock and requirements/*.txt (pip's format), pyproject.toml
(`[project]` dependencies and extras, `[dependency-groups]`, `[build-system]` requires, Poetry's
dependency tables), setup.py (parsed with `ast`: every string constant that is a requirement, never
executed), setup.cfg (`install_requires`, `extras_require`), conda's environment.yml, Pipfile, and the
lock files uv.lock, poetry.lock, pdm.lock and Pipfile.lock (the versions they lock). The tool never
executes code of the tree it converts.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from npu_port.transpiler.core.files import ReadError, read_text

# The files that name a project's dependencies; a folder holding one is a project root.
_FILES = ("requirements*.txt", "requirements/*.txt", "requirements*.in", "requirements*.lock", "pyproject.toml",
          "setup.py", "setup.cfg", "environment.yml", "environment.yaml", "Pipfile", "Pipfile.lock", "uv.lock",
          "poetry.lock", "pdm.lock")
_LOCK_BYTES = 64 * 1024 * 1024  # lock files of large projects run to megabytes
# A PEP 508 requirement: name, extras, then a version specifier (markers and URLs after it are ignored).
_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?\s*"
                          r"(?P<spec>(?:(?:===?|>=|~=|<=?|>|!=)\s*[0-9][0-9A-Za-z.*+!-]*\s*,?\s*)*)")
_LOWER = re.compile(r"(===?|>=|~=|>)\s*v?([0-9]+(?:\.[0-9]+)*)")
# conda: `- pytorch=2.1.0`, `- pytorch>=2.1`, `- torch==2.1` (a pip: list item too).
_CONDA = re.compile(r"^\s*-\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<spec>(?:===?|>=|~=|=)\s*[0-9][0-9A-Za-z.*+]*)",
                    re.M)
# uv.lock, poetry.lock, pdm.lock: `[[package]]` tables that begin `name = "torch"` `version = "2.6.0"`.
_LOCKED = re.compile(r'^name\s*=\s*"(?P<name>[^"]+)"\s*\n(?:[^\[\n][^\n]*\n)*?version\s*=\s*"(?P<version>[^"]+)"', re.M)
TORCH = ("torch", "torch-npu")
_CONDA_NAMES = {"pytorch": "torch"}


@dataclass(frozen=True)
class Pin:
    version: str  # "2.1.0": the oldest release the project accepts, as its pin writes it
    where: str  # "requirements.txt:3", or for an implied pin "setup.py:52 (vllm 0.8.5 requires torch 2.6.0)"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"[0-9]+", version.split("+")[0])[:3])


def lowest_torch(paths: Iterable[Path], implied: Optional[Mapping[str, Sequence]] = None) -> Optional[Pin]:
    """The oldest torch any input's project accepts: a lower bound or exact pin of torch or torch-npu
    (torch-npu X.Y pairs with torch X.Y), or the torch that the oldest release of a pinned package requires
    (`implied`: package -> [(release, torch or None), ...] sorted by release; a release between two rows
    takes the row below it, a release before the first row implies nothing). None where nothing says."""
    implied = {normalize(k): v for k, v in (implied or {}).items()}
    found = [p for p in _pins(paths, (*TORCH, *implied))]
    out: list[Pin] = []
    for name, pin in found:
        if name in TORCH:
            out.append(pin)
            continue
        torch = _implied(implied[name], pin.version)
        if torch is not None:
            out.append(Pin(torch, f"{pin.where} accepts {name} {pin.version}, which requires torch {torch}"))
    return min(out, key=lambda p: release(p.version), default=None)


def lowest_pin(paths: Iterable[Path], names: tuple[str, ...]) -> Optional[Pin]:
    """The oldest release of the named packages any input's project accepts, or None."""
    return min((pin for _, pin in _pins(paths, names)), key=lambda p: release(p.version), default=None)


def _implied(rows: Sequence, version: str) -> Optional[str]:
    below = [row for row in rows if release(str(row[0])) <= release(version)]
    return str(below[-1][1]) if below and below[-1][1] is not None else None


def _pins(paths: Iterable[Path], names: Iterable[str]) -> Iterator[tuple[str, Pin]]:
    wanted = {normalize(n) for n in names}
    seen: set[Path] = set()
    for path in paths:
        root = project_root(Path(path))
        if root is None or root in seen:
            continue
        seen.add(root)
        for name, spec, where in _requirements(root):
            name = normalize(_CONDA_NAMES.get(name.lower(), name))
            if name in wanted:
                low = lower_bound(spec)
                if low is not None:
                    yield name, Pin(low, where)


def lower_bound(spec: str) -> Optional[str]:
    """The lowest release a version specifier accepts (`>=2.1,<2.8` -> 2.1; `==2.6.*` -> 2.6; `^2.1` and
    `~2.1`, Poetry's, -> 2.1), or None where it has no lower bound (`<2.8`, `*`, none)."""
    spec = spec.strip()
    poetry = re.fullmatch(r"[\^~]\s*([0-9]+(?:\.[0-9]+)*)", spec) or re.fullmatch(r"([0-9]+(?:\.[0-9]+)*)[0-9A-Za-z.+]*", spec)
    if poetry:
        return poetry.group(1)
    bounds = [m.group(2) for m in _LOWER.finditer(spec)]
    return min(bounds, key=release) if bounds else None


def admits_from(spec: str, version: str) -> bool:
    """Whether a version specifier accepts some release at or after `version` (`<=0.6.3` and `==0.5.4` do
    not accept 0.7.1; `>=0.6`, `<0.9` and none do). Only upper bounds and exact pins can rule it out."""
    floor = release(version)
    for op, value in re.findall(r"(===|==|<=|<|~=)\s*([0-9][0-9A-Za-z.*+]*)", spec):
        bound = release(value.replace("*", ""))
        if op in ("==", "===") and value.endswith("*"):
            if bound < floor[:len(bound)]:
                return False
        elif op in ("==", "===", "<="):
            if bound < floor:
                return False
        elif op == "<":
            if bound <= floor:
                return False
        elif op == "~=":  # ~=0.6.1 is >=0.6.1, ==0.6.*
            if bound[:-1] < floor[:len(bound) - 1]:
                return False
    return True


def project_root(path: Path) -> Optional[Path]:
    """The nearest folder at or above `path` holding a dependency file; the walk stops at a git root."""
    here = path if path.is_dir() else path.parent
    for folder in (here, *here.parents):
        if any(next(iter(folder.glob(files)), None) is not None for files in _FILES):
            return folder
        if (folder / ".git").exists():
            return None
    return None


def _read(path: Path, lock: bool) -> Optional[str]:
    try:
        return read_text(path, _LOCK_BYTES, bom=True) if lock else read_text(path, bom=True)
    except (ReadError, OSError):
        return None


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, max(at, 0)) + 1


def _requirements(root: Path) -> Iterator[tuple[str, str, str]]:
    """(name, version specifier, where) of every requirement the root's dependency files state."""
    for pattern in _FILES:
        for file in sorted(root.glob(pattern)):
            if not file.is_file():
                continue
            lock = file.name.endswith(".lock") and not file.name.startswith("requirements")
            text = _read(file, lock)
            if text is None:
                continue
            rel = file.relative_to(root).as_posix()
            reader = _READERS.get(file.name) or (_read_pip if file.name.startswith("requirements") else None)
            if reader is None and file.name in ("uv.lock", "poetry.lock", "pdm.lock"):
                reader = _read_locked
            if reader is None and file.name.startswith("environment."):
                reader = _read_conda
            if reader is None:
                continue
            for name, spec, at in reader(text):
                yield name, spec, f"{rel}:{_line(text, at)}"


def _requirement(text: str) -> Optional[tuple[str, str]]:
    m = _REQUIREMENT.match(text)
    return (m.group("name"), m.group("spec")) if m else None


def _read_pip(text: str) -> Iterator[tuple[str, str, int]]:
    at = 0
    for line in text.splitlines(keepends=True):
        code = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        if code.strip() and not code.lstrip().startswith("-"):
            found = _requirement(code)
            if found:
                yield found[0], found[1], at
        at += len(line)


def _in_text(text: str, value: str) -> int:
    found = text.find(value)
    return found if found >= 0 else 0


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _table(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _read_pyproject(text: str) -> Iterator[tuple[str, str, int]]:
    try:
        import tomllib  # only where a project file is read
        doc = tomllib.loads(text)
    except Exception:  # noqa: BLE001 - invalid TOML (or no tomllib): the file says nothing
        return
    project = _table(doc.get("project"))
    lists = [_strings(project.get("dependencies")), _strings(_table(doc.get("build-system")).get("requires"))]
    lists += [_strings(v) for v in _table(project.get("optional-dependencies")).values()]
    lists += [_strings(v) for v in _table(doc.get("dependency-groups")).values()]
    for requirement in (r for group in lists for r in group):
        found = _requirement(requirement)
        if found:
            yield found[0], found[1], _in_text(text, requirement)
    poetry = _table(_table(doc.get("tool")).get("poetry"))
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    tables += [_table(g).get("dependencies") for g in _table(poetry.get("group")).values()]
    for table in tables:
        for name, value in _table(table).items():
            spec = _table(value).get("version") if isinstance(value, dict) else value
            if isinstance(spec, str):
                yield name, spec, _in_text(text, f"{name} =") or _in_text(text, name)


def _read_setup_py(text: str) -> Iterator[tuple[str, str, int]]:
    """Every string constant of setup.py that reads as a requirement (`"torch==2.1.0"`, in
    install_requires, an extras dict or a list assigned to a name): parsed, never run."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            found = _requirement(node.value)
            if found and found[1]:
                yield found[0], found[1], offsets[node.lineno - 1]


def _read_setup_cfg(text: str) -> Iterator[tuple[str, str, int]]:
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return
    values = []
    if parser.has_option("options", "install_requires"):
        values.append(parser.get("options", "install_requires"))
    if parser.has_section("options.extras_require"):
        values += [v for _, v in parser.items("options.extras_require")]
    for value in values:
        for line in value.splitlines():
            found = _requirement(line.split("#", 1)[0])
            if found:
                yield found[0], found[1], _in_text(text, line.strip())


def _read_conda(text: str) -> Iterator[tuple[str, str, int]]:
    for m in _CONDA.finditer(text):
        spec = m.group("spec")
        yield m.group("name"), "==" + spec.lstrip("=") if re.match(r"=\s*[0-9]", spec) else spec, m.start()


def _read_locked(text: str) -> Iterator[tuple[str, str, int]]:
    for m in _LOCKED.finditer(text):
        yield m.group("name"), "==" + m.group("version"), m.start()


def _read_pipfile(text: str) -> Iterator[tuple[str, str, int]]:
    try:
        import tomllib
        doc = tomllib.loads(text)
    except Exception:  # noqa: BLE001
        return
    for section in ("packages", "dev-packages"):
        for name, value in _table(doc.get(section)).items():
            spec = _table(value).get("version") if isinstance(value, dict) else value
            if isinstance(spec, str) and spec.strip() != "*":
                yield name, spec, _in_text(text, name)


def _read_pipfile_lock(text: str) -> Iterator[tuple[str, str, int]]:
    try:
        doc = json.loads(text)
    except ValueError:
        return
    for section in ("default", "develop"):
        for name, value in _table(_table(doc).get(section)).items():
            spec = _table(value).get("version")
            if isinstance(spec, str):
                yield name, spec, _in_text(text, f'"{name}"')


_READERS = {"pyproject.toml": _read_pyproject, "setup.py": _read_setup_py, "setup.cfg": _read_setup_cfg,
            "Pipfile": _read_pipfile, "Pipfile.lock": _read_pipfile_lock}

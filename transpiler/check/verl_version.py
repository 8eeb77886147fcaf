"""Which VERL release a project uses, read from its files (never imported or run): the `verl/version/version`
file of a VERL checkout, else a `verl` pin in requirements*.txt, pyproject.toml or setup.py.

`check` validates VERL config keys against that release (transpiler/tables/verl_keys.py); `--verl-version`
or `verl_version` in `[tool.npu-port]` says it instead.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from npu_port.transpiler.core.files import ReadError, read_text
from npu_port.transpiler.tables import verl_configs, verl_keys

# `verl==0.7.1`, `verl[vllm]>=0.6,<0.8`, `verl ~= 0.7.0`, in a requirement string (PEP 508, no URL forms).
_REQUIREMENT = re.compile(r"^\s*verl\s*(?:\[[^\]]*\])?\s*(?P<spec>(?:[=<>!~]=?|===)[^;#]*)?(?:[;#].*)?$",
                          re.IGNORECASE)
_CLAUSE = re.compile(r"^\s*(?P<op>===|==|~=|!=|<=|>=|<|>)\s*(?P<version>[\w.*+!-]+)\s*$")
# Files that say a folder is a project root: the search for a pin stops at the first such folder.
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_MAX_BYTES = 1 << 20  # a requirements file or setup.py larger than this is not read


@dataclass(frozen=True)
class VerlVersion:
    version: str  # the release the keys are checked against (one with a key snapshot, or a checkout's own)
    where: str  # where it came from: "requirements.txt:3 (verl==0.7.1)", "verl/version/version (0.8.0.dev)", ...
    option: str = ""  # the rule option that says it (verl_keys.release reads it); the version when empty
    pinned: bool = True  # False where nothing said it and the newest snapshotted release is assumed

    @property
    def run_option(self) -> str:
        return self.option or self.version


def resolve(paths: Iterable[Path], given: Optional[str] = None, given_where: str = "") -> VerlVersion:
    """The release to check against: `given` (the flag or config value) if set, else the project's pin,
    else the newest release with a key snapshot."""
    if given:
        return VerlVersion(verl_keys.release(given).version, f"{given_where or 'given'} ({given})")
    for folder in _project_folders(paths):
        own = _checkout(folder)
        if own is not None:
            return own
        found = _pin_in(folder)
        if found is not None:
            spec, where = found
            return VerlVersion(_satisfying(spec), where)
    declared = _declared(paths)
    if declared is not None:
        return declared
    return VerlVersion(verl_keys.release().version, "the newest release snapshotted (no verl pin found)", pinned=False)


# What a file written by `npu-port generate` / `pipeline` / `weave` says it targets (transpiler/generate/
# versions.py writes "Targets: verl 0.8.0, vLLM ..." in its docstring): the release it was generated for.
_DECLARED = re.compile(r"^Targets: verl (\d+\.\d+\.\d+)\b", re.M)


def _declared(paths: Iterable[Path]) -> Optional[VerlVersion]:
    """The VERL release the given files declare they target, where all that declare one agree."""
    found: dict[str, str] = {}
    for p in paths:
        if str(p) == "-" or not Path(p).is_file():
            continue
        text = _read(Path(p)) or ""
        m = _DECLARED.search(text[:8192])
        if m:
            found.setdefault(m.group(1), f"{_shown(Path(p))}:{text.count(chr(10), 0, m.start()) + 1} (Targets: verl {m.group(1)})")
    if len(found) != 1:
        return None
    version, where = next(iter(found.items()))
    return VerlVersion(verl_keys.release(version).version, where)


def _project_folders(paths: Iterable[Path]) -> Iterator[Path]:
    """The given folders (a file's own folder), then each folder above up to the first project root."""
    seen: set[Path] = set()
    # Shared folders hold no project's pins: never read the filesystem root or the temp folder itself.
    shared = {Path(os.path.abspath(os.sep)), Path(os.path.abspath(tempfile.gettempdir()))}
    for p in paths:
        if str(p) == "-":
            continue
        start = Path(os.path.abspath(p))
        folder = start if start.is_dir() else start.parent
        for candidate in (folder, *folder.parents):
            if candidate in seen or candidate in shared:
                break
            seen.add(candidate)
            yield candidate
            if any((candidate / m).exists() for m in _PROJECT_MARKERS):
                break


def _read(path: Path) -> Optional[str]:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return None
        return read_text(path)
    except (OSError, ReadError):
        return None


def _checkout(folder: Path) -> Optional[VerlVersion]:
    """A VERL checkout (verl/version/version and the packaged config folder): its own configs are the
    schema its launchers and YAML files are written against, whatever release it is between."""
    checkout = _read(folder / "verl" / "version" / "version")
    if not (checkout and re.match(r"^\s*\d+\.\d+", checkout)):
        return None
    version = checkout.strip()
    where = f"{_shown(folder / 'verl/version/version')} ({version}, a VERL checkout)"
    if not (folder / verl_configs.CONFIG_DIR).is_dir():
        return VerlVersion(verl_keys.release(version).version, where)
    option = verl_keys.checkout_option(version, folder, _digest(folder / "verl"))
    if verl_keys.release(option).version != version:  # its configs could not be read: the closest snapshot
        return VerlVersion(verl_keys.release(version).version, where + "; its own config could not be read")
    return VerlVersion(version, where + ", its own config", option)


def _digest(package: Path) -> str:
    """Names, sizes and times of the checkout's YAML and Python files: a change gives another option,
    so the result cache never reuses findings made against the old config."""
    h = hashlib.blake2b(digest_size=8)
    try:
        for path in sorted(p for p in package.rglob("*") if p.suffix in (".yaml", ".py")):
            st = path.stat()
            h.update(f"{path.relative_to(package).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    except OSError:
        pass
    return h.hexdigest()


def _pin_in(folder: Path) -> Optional[tuple[str, str]]:
    """(version spec, where) of the first verl pin the folder's project files hold."""
    requirement_files = sorted(folder.glob("requirements*.txt")) + sorted(folder.glob("requirements/*.txt"))
    for path in requirement_files:
        for lineno, line in enumerate((_read(path) or "").splitlines(), start=1):
            m = _REQUIREMENT.match(line)
            if m and m.group("spec"):
                return m.group("spec").strip(), f"{_shown(path)}:{lineno} ({line.strip()})"
    for spec, where in _pyproject_pins(folder / "pyproject.toml"):
        return spec, where
    for spec, where in _setup_py_pins(folder / "setup.py"):
        return spec, where
    return None


def _shown(path: Path) -> str:
    """The path relative to the current folder when it lies below it, else as given."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError):
        return str(path)


def _pyproject_pins(path: Path) -> Iterator[tuple[str, str]]:
    text = _read(path)
    if not text or "verl" not in text:
        return
    import tomllib  # only for a pyproject.toml that names verl

    try:
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return
    project = _table(doc.get("project"))
    requirements = _strings(project.get("dependencies"))
    for extra in _table(project.get("optional-dependencies")).values():
        requirements += _strings(extra)
    for requirement in requirements:
        m = _REQUIREMENT.match(requirement) if isinstance(requirement, str) else None
        if m and m.group("spec"):
            yield m.group("spec").strip(), f"{_shown(path)} ({requirement})"
    pinned = _table(_table(_table(doc.get("tool")).get("poetry")).get("dependencies")).get("verl")
    version = _table(pinned).get("version") if isinstance(pinned, dict) else pinned
    if isinstance(version, str) and version.strip():
        spec = version.strip()
        yield (f"=={spec}" if spec[0].isdigit() else spec.replace("^", ">=")), f"{_shown(path)} (verl = {spec!r})"


def _table(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _setup_py_pins(path: Path) -> Iterator[tuple[str, str]]:
    """String constants such as `"verl==0.7.1"` in setup.py (parsed, never run)."""
    text = _read(path)
    if not text or "verl" not in text:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _REQUIREMENT.match(node.value)
            if m and m.group("spec"):
                yield m.group("spec").strip(), f"{_shown(path)}:{node.lineno} ({node.value})"


def _satisfying(spec: str) -> str:
    """The newest snapshotted release `spec` allows; when none does, the version the spec names
    (verl_keys.release then picks the closest snapshot)."""
    clauses = [m for m in (_CLAUSE.match(c) for c in spec.split(",")) if m]
    if not clauses:
        return verl_keys.release().version
    for candidate in reversed(verl_keys.releases()):
        if all(_allows(m.group("op"), m.group("version"), candidate.version) for m in clauses):
            return candidate.version
    named = next((m.group("version") for m in clauses if m.group("op") in ("==", "===", "~=", ">=", ">")),
                 clauses[0].group("version"))
    return verl_keys.release(named.replace("*", "0")).version


def _allows(op: str, version: str, candidate: str) -> bool:
    have = verl_keys.version_key(candidate)
    if version.endswith(".*"):  # ==0.7.* / !=0.7.*
        prefix = verl_keys.version_key(version[:-2])
        same = have[:len(prefix)] == prefix
        return same if op == "==" else not same if op == "!=" else True
    want = verl_keys.version_key(version)
    if op in ("==", "==="):
        # A dev or rc build (0.8.0.dev) is checked as the release it becomes.
        return have[:len(want)] == want
    if op == "!=":
        return have[:len(want)] != want
    if op == "~=":  # ~=0.7.0: >=0.7.0, ==0.7.*
        return have >= want and have[:max(len(want) - 1, 1)] == want[:max(len(want) - 1, 1)]
    return {"<": have < want, "<=": have <= want, ">": have > want, ">=": have >= want}[op]

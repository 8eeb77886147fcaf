"""The incremental cache: what converting a file's exact bytes produced, so an unchanged tree is not parsed again.

An entry is keyed by the file's content digest, its path inside the tree (rules may look at names)
and its language, under a fingerprint of everything else that can change a result: the tool
version, the source of the engine and of the selected rules, the mapping tables and the settings.
Each entry is one small file (a JSON line of the outcome, then the converted bytes) written by
rename, so a crash leaves either the old entry or the new one; a damaged entry is a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

from codemods._base import Rule
from transpiler import __version__
from transpiler.files import atomic_write, is_within
from transpiler.report import FileOutcome, Finding
from transpiler.settings import Settings

CACHE_DIR_NAME = ".npu-port-cache"
_FORMAT = 1
# How many fingerprint folders (versions of the code, rules and settings) a cache keeps: after each run
# the ones used least recently go, so a cache does not grow with every upgrade or settings change.
KEEP_FINGERPRINTS = 4
_FINGERPRINT_NAME = re.compile(r"[0-9a-f]{32}")
# Run mechanics that never change what a file converts to.
_IRRELEVANT_SETTINGS = frozenset({"jobs"})


def _digest_files(paths: Sequence[Path]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(set(paths)):
        h.update(str(path).encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"\0missing")
    return h.hexdigest()


@lru_cache(maxsize=None)
def _package_digest() -> str:
    """The engine's and the rules' code and data: an edit to either invalidates every entry."""
    import codemods
    import transpiler

    code: list[Path] = []
    for pkg in (transpiler, codemods):
        root = Path(pkg.__file__).parent
        code += [p.relative_to(root.parent) for p in root.rglob("*")
                 if p.suffix in (".py", ".yaml", ".yml", ".json", ".j2") and "__pycache__" not in p.parts]
    here = Path(codemods.__file__).parent.parent
    return _digest_files([here / p for p in code])


def _named_files(value: Any) -> list[Path]:
    """Files a setting names (a custom rules file, a runtime-env profile): their content counts too."""
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _named_files(v)]
    if isinstance(value, (str, Path)) and str(value) and len(str(value)) < 4096:
        try:
            if os.path.isfile(value):
                return [Path(os.path.abspath(value))]
        except (OSError, ValueError):
            pass
    return []


def fingerprint(settings: Settings, rules: Sequence[type[Rule]]) -> str:
    """Everything besides the file itself that decides a result."""
    modules = []
    for rule in rules:  # rules defined outside the two packages (tests, plugins)
        module = sys.modules.get(rule.__module__)
        if module is not None and getattr(module, "__file__", None):
            modules.append(Path(module.__file__))
    fields = {k: v for k, v in dataclasses.asdict(settings).items() if k not in _IRRELEVANT_SETTINGS}
    doc = {
        "format": _FORMAT,
        "version": __version__,
        "python": sys.version_info[:2],
        "rules": [f"{r.__module__}.{r.__qualname__}:{r.ID}" for r in rules],
        "settings": fields,
        "code": _package_digest(),
        "rule_modules": _digest_files(modules),
        "named_files": _digest_files(_named_files(list(fields.values()))),
    }
    return hashlib.blake2b(json.dumps(doc, sort_keys=True, default=repr).encode(), digest_size=16).hexdigest()


SKIPPED = "skipped"


class StatIndex:
    """What the last run learnt of each file, by its metadata alone: the prefilter skipped it, or the
    digest of its content, whose result the cache holds. A re-run that finds a file with the same size,
    modification time and inode need not read it at all (git's index does the same). An entry is trusted
    only if the file was last modified well before the index was written, so that a change within the
    same clock tick as the recorded one is never missed; an untrusted entry only costs a read."""

    RACY_NS = 2_000_000_000
    NAME = "stat-index.json"

    def __init__(self, path: Path):
        self.path = path
        self._old: dict[str, list] = {}
        self._written_ns = 0
        try:
            doc = json.loads(path.read_bytes())
            self._old, self._written_ns = doc["files"], int(doc["written_ns"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        self._now: dict[str, list] = {}
        self._racy = False  # an entry was too recent to trust: write the index anew, with a later time

    def lookup(self, rel: str, st: os.stat_result) -> Optional[str]:
        entry = self._old.get(rel)
        if entry is None or entry[:3] != [st.st_size, st.st_mtime_ns, st.st_ino]:
            return None
        if st.st_mtime_ns + self.RACY_NS > self._written_ns:
            self._racy = True
            return None
        self._now[rel] = entry
        return entry[3]

    def record(self, rel: str, st: os.stat_result, value: str) -> None:
        self._now[rel] = [st.st_size, st.st_mtime_ns, st.st_ino, value]

    def save(self) -> None:
        """Keeps the files this run saw (a file gone from the tree drops out)."""
        if self._now == self._old and not self._racy:
            return
        data = json.dumps({"written_ns": time.time_ns(), "files": self._now}).encode()
        try:
            atomic_write(self.path, data, 0o644, durable=False)
        except OSError:
            pass


class Cache:
    """Entries live under `root/<fingerprint>/`; a run with other settings or code uses another folder."""

    def __init__(self, root: Path):
        self.root = root
        self.hits = 0
        self._made = False
        self._indexes: dict[str, StatIndex] = {}

    def index(self, fingerprint: str) -> StatIndex:
        found = self._indexes.get(fingerprint)
        if found is None:
            found = self._indexes[fingerprint] = StatIndex(self.root / fingerprint / StatIndex.NAME)
        return found

    def save_indexes(self) -> None:
        if self._indexes and not self._made:
            self._prepare()
        for index in self._indexes.values():
            index.save()

    def _entry(self, fingerprint: str, rel: str, language: str, digest: str) -> Path:
        key = hashlib.blake2b(f"{rel}\0{language}\0{digest}".encode(), digest_size=20).hexdigest()
        return self.root / fingerprint / key[:2] / key

    def get(self, fingerprint: str, rel: str, language: str, digest: str,
            display: str) -> Optional[tuple[FileOutcome, Optional[bytes]]]:
        try:
            raw = self._entry(fingerprint, rel, language, digest).read_bytes()
            head, _, body = raw.partition(b"\n")
            doc = json.loads(head)
            findings = [Finding(display, *f) for f in doc["findings"]]
            outcome = FileOutcome(display, doc["status"], findings, doc["error"], doc["language"])
            output = body if doc["changed"] else None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        self.hits += 1
        return outcome, output

    def put(self, fingerprint: str, rel: str, language: str, digest: str, outcome: FileOutcome,
            output: Optional[bytes]) -> None:
        if not self._made:
            self._prepare()
        doc = {
            "status": outcome.status, "error": outcome.error, "language": outcome.language,
            "changed": output is not None,
            "findings": [dataclasses.astuple(f)[1:] for f in outcome.findings],
        }
        data = json.dumps(doc).encode() + b"\n" + (output or b"")
        try:
            atomic_write(self._entry(fingerprint, rel, language, digest), data, 0o644, durable=False)
        except OSError:
            pass  # a cache that cannot be written only costs speed

    def prune(self, in_use: Sequence[str]) -> None:
        """Mark the fingerprint folders this run used as recent and remove all but the KEEP_FINGERPRINTS
        most recent. Only folders named like a fingerprint are ever touched."""
        try:
            for name in in_use:
                if (self.root / name).is_dir():
                    os.utime(self.root / name)
            folders = [p for p in self.root.iterdir()
                       if _FINGERPRINT_NAME.fullmatch(p.name) and p.is_dir() and not p.is_symlink()]
            folders.sort(key=lambda p: (p.name in in_use, p.stat().st_mtime), reverse=True)
        except OSError:
            return
        for old in folders[KEEP_FINGERPRINTS:]:
            shutil.rmtree(old, ignore_errors=True)

    def _prepare(self) -> None:
        self._made = True
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            ignore = self.root / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Created by npu-port; safe to delete.\n*\n")
            tag = self.root / "CACHEDIR.TAG"
            if not tag.exists():
                tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n"
                               "# This directory is a cache of npu-port results; see https://bford.info/cachedir/\n")
        except OSError:
            pass


def default_cache_dir(inputs: Sequence[Path], writes_inputs: bool) -> Path:
    """`.npu-port-cache` in the current folder, unless that lies inside an input tree that this run
    must leave untouched: then the user cache folder, so the inputs gain no folder either."""
    here = Path.cwd() / CACHE_DIR_NAME
    inside = any(is_within(Path.cwd(), p) for p in inputs if p.is_dir())
    if writes_inputs or not inside:
        return here
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "npu-port"

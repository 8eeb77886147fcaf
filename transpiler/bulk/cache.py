"""The incremental cache: what converting a file's exact bytes produced, so an unchanged tree is not parsed again.

An entry is keyed by the file's content digest, its path inside the tree (rules may look at names)
and its language, under a fingerprint of everything else that can change a result: the tool
version, the source of the engine and of the selected rules, the mapping tables and the settings.
Each entry is one small file (a JSON header line, then the converted bytes) written by rename, so a
crash leaves either the old entry or the new one. The header carries what proves the entry: the
format version, the fingerprint, the path, language and input digest it was made for, the outcome,
the payload's length and a checksum over all of it. An entry that does not verify (truncated,
corrupted, another file's entry, malformed) is a miss counted as damaged: the file is converted again
and the entry rewritten, and the run warns once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Optional

from npu_port.transpiler import __version__
from npu_port.transpiler.core.files import atomic_write, is_within
from npu_port.transpiler.core.report import FINDING_KINDS, SEVERITIES, STATUSES, FileOutcome, Finding, OutcomeLanguage
from npu_port.transpiler.core.rule_catalog import RuleLike, as_spec
from npu_port.transpiler.core.settings import Settings

CACHE_DIR_NAME = ".npu-port-cache"
_FORMAT = 2
# How many fingerprint folders (versions of the code, rules and settings) a cache keeps: after each run
# the ones used least recently go, so a cache does not grow with every upgrade or settings change.
KEEP_FINGERPRINTS = 4
_FINGERPRINT_NAME = re.compile(r"[0-9a-f]{32}")
# Run mechanics that never change what a file converts to.
_IRRELEVANT_SETTINGS = frozenset({"jobs"})


def _utf8(text: str) -> bytes:
    """Any str as bytes, for hashing: file names that are not valid UTF-8 arrive as surrogates."""
    return text.encode("utf-8", "surrogatepass")


def _digest_files(paths: Sequence[Path]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(set(paths)):
        h.update(_utf8(str(path)) + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"\0missing")
    return h.hexdigest()


@cache
def _package_digest() -> str:
    """The engine's and the rules' code and data: an edit to either invalidates every entry."""
    from npu_port import codemods, transpiler

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


def fingerprint(settings: Settings, rules: Sequence[RuleLike]) -> str:
    """Everything besides the file itself that decides a result. The same whether a rule is imported
    yet or not: the package's rules are covered by its code digest, so only the modules of rules
    defined outside it (tests, plugins), which are imported, are read."""
    specs = [as_spec(r) for r in rules]
    modules = []
    for spec in specs:
        module = sys.modules.get(spec.module) if not spec.module.startswith("npu_port.") else None
        if module is not None and getattr(module, "__file__", None):
            modules.append(Path(module.__file__))
    fields = {k: v for k, v in dataclasses.asdict(settings).items() if k not in _IRRELEVANT_SETTINGS}
    doc = {
        "format": _FORMAT,
        "version": __version__,
        "python": sys.version_info[:2],
        "rules": [f"{r.module}.{r.qualname}:{r.ID}" for r in specs],
        "settings": fields,
        "code": _package_digest(),
        "rule_modules": _digest_files(modules),
        "named_files": _digest_files(_named_files(list(fields.values()))),
    }
    return hashlib.blake2b(json.dumps(doc, sort_keys=True, default=repr).encode(), digest_size=16).hexdigest()


SKIPPED = "skipped"
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX_SEAL = re.compile(r"[0-9a-f]{16}")


def _is_int(value: Any) -> bool:
    return type(value) is int  # not a bool


class StatIndex:
    """What the last run learnt of each file, by its metadata alone: the prefilter skipped it, or the
    digest of its content, whose result the cache holds. A re-run that finds a file with the same size,
    modification time, change time and inode need not read it at all (git's index does the same). An
    entry is trusted only if the file was last modified well before the index was written, so that a
    change within the same clock tick as the recorded one is never missed; an untrusted entry only
    costs a read.

    Each entry is `[size, mtime_ns, ctime_ns, ino, value, seal]`, the seal a hash of the path it is
    filed under, the index's time and the other fields: an entry that is malformed, moved to another
    path or altered is dropped (counted in `damaged`) and the file is read again."""

    RACY_NS = 2_000_000_000
    NAME = "stat-index.json"
    # When the index is written: a test sets it, so whether an entry is racy never depends on how
    # long a run took.
    clock = staticmethod(time.time_ns)

    def __init__(self, path: Path):
        self.path = path
        self._old: dict[str, list] = {}
        self._written_ns = 0
        self.damaged = 0  # entries that did not verify (a whole unreadable index counts once)
        try:
            raw = path.read_bytes()
        except OSError:
            raw = None  # no index yet: nothing damaged
        if raw is not None:
            self._load(raw)
        self._now: dict[str, list] = {}
        self._racy = False  # an entry was too recent to trust: write the index anew, with a later time

    def _load(self, raw: bytes) -> None:
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            doc = None
        if not (isinstance(doc, dict) and doc.get("format") == _FORMAT and _is_int(doc.get("written_ns"))
                and isinstance(doc.get("files"), dict)):
            self.damaged = 1
            return
        self._written_ns = doc["written_ns"]
        for rel, entry in doc["files"].items():
            fields = self._verified(rel, entry)
            if fields is None:
                self.damaged += 1
            else:
                self._old[rel] = fields

    def _verified(self, rel: str, entry: Any) -> Optional[list]:
        if not (isinstance(entry, list) and len(entry) == 6 and all(_is_int(v) for v in entry[:4])):
            return None
        value, seal = entry[4], entry[5]
        if not (isinstance(value, str) and (value == SKIPPED or _HEX40.fullmatch(value))):
            return None
        fields = entry[:5]
        if not (isinstance(seal, str) and _HEX_SEAL.fullmatch(seal)
                and seal == self._seal(self._written_ns, rel, fields)):
            return None
        return fields

    @staticmethod
    def _seal(written_ns: int, rel: str, fields: list) -> str:
        h = hashlib.blake2b(digest_size=8)
        h.update(f"{_FORMAT}\0{written_ns}\0{fields[0]}\0{fields[1]}\0{fields[2]}\0{fields[3]}\0{fields[4]}\0".encode())
        h.update(_utf8(rel))
        return h.hexdigest()

    @staticmethod
    def _key(st: os.stat_result) -> list:
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]

    def lookup(self, rel: str, st: os.stat_result) -> Optional[str]:
        entry = self._old.get(rel)
        if entry is None or entry[:4] != self._key(st):
            return None
        if st.st_mtime_ns + self.RACY_NS > self._written_ns:
            self._racy = True
            return None
        self._now[rel] = entry
        return entry[4]

    def record(self, rel: str, st: os.stat_result, value: str) -> None:
        self._now[rel] = [*self._key(st), value]

    def save(self) -> None:
        """Keeps the files this run saw (a file gone from the tree drops out)."""
        if self._now == self._old and not self._racy and not self.damaged:
            return
        written = self.clock()
        files = {rel: [*fields, self._seal(written, rel, fields)] for rel, fields in self._now.items()}
        data = json.dumps({"format": _FORMAT, "written_ns": written, "files": files}).encode()
        try:
            atomic_write(self.path, data, 0o644, durable=False)
        except OSError:
            pass


# What a cached outcome may say (core/report.py's words); anything else in an entry makes it damaged.
_FINDING_TYPES = tuple({"int": int, "str": str, "Severity": str, "FindingKind": str}.get(str(f.type), object)
                       for f in dataclasses.fields(Finding)[1:])  # after `file`, which the reader gives


def _checksum(header: dict, payload: bytes) -> str:
    """Over every header field but the checksum itself, and the payload."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps(header, sort_keys=True).encode())
    h.update(b"\n")
    h.update(payload)
    return h.hexdigest()


def _finding(display: str, raw: Any) -> Finding:
    """A finding from an entry's JSON, or ValueError: a malformed one must never get further."""
    if not (isinstance(raw, list) and len(raw) == len(_FINDING_TYPES)):
        raise ValueError("malformed finding")
    for value, kind in zip(raw, _FINDING_TYPES):
        if kind is not object and type(value) is not kind:
            raise ValueError("malformed finding")
    finding = Finding(display, *raw)
    if finding.severity not in SEVERITIES or finding.kind not in FINDING_KINDS:
        raise ValueError("malformed finding")
    return finding


class Cache:
    """Entries live under `root/<fingerprint>/`; a run with other settings or code uses another folder."""

    def __init__(self, root: Path):
        self.root = root
        self.hits = 0
        self._made = False
        self._indexes: dict[str, StatIndex] = {}
        self._damaged: set[Path] = set()  # entries found damaged this run (each counted once)

    @property
    def damaged(self) -> int:
        """Entries and stat-index entries that did not verify this run: ignored, and rebuilt."""
        return len(self._damaged) + sum(index.damaged for index in self._indexes.values())

    def damage_warning(self) -> Optional[str]:
        n = self.damaged
        if not n:
            return None
        what = "entry was" if n == 1 else "entries were"
        return f"warning: {n} damaged cache {what} ignored and rebuilt in {os.fsdecode(self.root)}"

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

    def _entry(self, fingerprint: str, rel: str, language: OutcomeLanguage, digest: str) -> Path:
        key = hashlib.blake2b(_utf8(f"{rel}\0{language}\0{digest}"), digest_size=20).hexdigest()
        return self.root / fingerprint / key[:2] / key

    def get(self, fingerprint: str, rel: str, language: OutcomeLanguage, digest: str,
            display: str) -> Optional[tuple[FileOutcome, Optional[bytes]]]:
        path = self._entry(fingerprint, rel, language, digest)
        try:
            raw = path.read_bytes()
        except OSError:
            return None  # not there (or unreadable): an ordinary miss
        try:
            found = self._verified(raw, fingerprint, rel, language, digest, display)
        except (ValueError, KeyError, TypeError, RecursionError):
            found = None
        if found is None:
            self._damaged.add(path)
            try:  # so that a file whose result is not cached again (a timeout) is not reported every run
                path.unlink()
            except OSError:
                pass
            return None
        self.hits += 1
        return found

    @staticmethod
    def _verified(raw: bytes, fingerprint: str, rel: str, language: OutcomeLanguage, digest: str,
                  display: str) -> Optional[tuple[FileOutcome, Optional[bytes]]]:
        head, newline, body = raw.partition(b"\n")
        if not newline:
            return None
        doc = json.loads(head)
        if not isinstance(doc, dict):
            return None
        claimed = doc.pop("checksum", None)
        if not (doc.get("format") == _FORMAT and doc.get("fingerprint") == fingerprint and doc.get("rel") == rel
                and doc.get("language") == language and doc.get("digest") == digest
                and _is_int(doc.get("length")) and doc["length"] == len(body)
                and isinstance(claimed, str) and claimed == _checksum(doc, body)):
            return None
        status, error, changed, findings = doc["status"], doc["error"], doc["changed"], doc["findings"]
        if not (status in STATUSES and isinstance(error, str) and isinstance(changed, bool)
                and changed == (status == "converted") and (changed or not body) and isinstance(findings, list)):
            return None
        outcome = FileOutcome(display, status, [_finding(display, f) for f in findings], error, language)
        return outcome, body if changed else None

    def put(self, fingerprint: str, rel: str, language: OutcomeLanguage, digest: str, outcome: FileOutcome,
            output: Optional[bytes]) -> None:
        """Write (or overwrite) the entry for these exact bytes of `rel`."""
        if not self._made:
            self._prepare()
        payload = output or b""
        doc = {
            "format": _FORMAT, "fingerprint": fingerprint, "rel": rel, "language": language, "digest": digest,
            "status": outcome.status, "error": outcome.error, "changed": output is not None,
            "findings": [list(dataclasses.astuple(f)[1:]) for f in outcome.findings],
            "length": len(payload),
        }
        doc["checksum"] = _checksum(doc, payload)
        data = json.dumps(doc, sort_keys=True).encode() + b"\n" + payload
        path = self._entry(fingerprint, rel, language, digest)
        try:
            atomic_write(path, data, 0o644, durable=False)
        except OSError:
            return  # a cache that cannot be written only costs speed

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
        import shutil  # with bz2 and lzma: only here, where old fingerprint folders go

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

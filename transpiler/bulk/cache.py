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

The cache is not an input: whoever can write files where it lives must not decide an output. So it
lives in the user's cache folder (never the current folder or a tree being converted, which a
repository could ship one in), made private; every entry and stat-index entry carries a MAC keyed with
a secret only this user's runs can read (`secret`), so an entry that any other hand wrote (a
committed cache, a copy from another machine) never verifies; and every cache file is opened without
following links, checked to be a regular file and read within a bound, so a FIFO or /dev/zero planted
there is damage, never a hang. A folder named with --cache-dir is used only if it is empty, new, or
already marked as npu-port's (CACHEDIR.TAG): pruning and marking never touch a user's own folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import re
import stat
import sys
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from npu_port.transpiler import __version__
from npu_port.transpiler.analysis.project_modules import digest_of_read
from npu_port.transpiler.core.files import NotReplaceable, atomic_write, is_within
from npu_port.transpiler.core.report import FINDING_KINDS, SEVERITIES, STATUSES, FileOutcome, Finding, OutcomeLanguage
from npu_port.transpiler.core.rule_catalog import RuleLike, as_spec
from npu_port.transpiler.core.settings import Settings

_FORMAT = 3  # 3: keyed MACs (a format-2 entry never verifies)
# How many fingerprint folders (versions of the code, rules and settings) a cache keeps: after each run
# the ones used least recently go, so a cache does not grow with every upgrade or settings change.
KEEP_FINGERPRINTS = 4
_FINGERPRINT_NAME = re.compile(r"[0-9a-f]{32}")
# Run mechanics that never change what a file converts to.
_IRRELEVANT_SETTINGS = frozenset({"jobs"})
# Bounds on what a cache read may take: an entry holds one converted file (inputs are at most
# --max-bytes, 5 MiB by default), the stat index one line per file of a tree.
MAX_ENTRY_BYTES = 64 * 1024 * 1024
MAX_INDEX_BYTES = 256 * 1024 * 1024
_SECRET_NAME = "secret.key"
_SECRET_BYTES = 32
_TAG_NAME = "CACHEDIR.TAG"
_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
        "# This directory is a cache of npu-port results; see https://bford.info/cachedir/\n")
_MARK = b"npu-port"  # what makes a CACHEDIR.TAG npu-port's own


class CacheRefused(Exception):
    """A folder named as the cache that the tool must not use (another tool's or the user's own)."""


class NotRegular(OSError):
    """A cache file that is a link, FIFO, device or folder, or larger than its bound: damage."""


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of the regular file `path`, opened without following a link and without blocking on a
    FIFO, and only if it holds at most `limit` bytes; FileNotFoundError if there is none, NotRegular for
    anything else that is there. Nothing is read before the type and size are known."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise NotRegular(exc.errno, f"cannot open {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise NotRegular(0, f"{path} is not a regular file of at most {limit} bytes")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise NotRegular(0, f"{path} grew past {limit} bytes")
    return data


def _write_entry(path: Path, data: bytes) -> None:
    """Replace the cache file `path` by rename, readable by this user alone. Whatever is there that is
    no regular file (a FIFO, a link to a device) is removed first, never written through. A cache that
    cannot be written only costs speed."""
    for _ in range(2):
        try:
            atomic_write(path, data, 0o600, durable=False, streams=False)
            return
        except NotReplaceable:
            try:
                os.unlink(path)
            except OSError:
                return
        except OSError:
            return


def user_cache_dir() -> Path:
    """The user's cache folder for npu-port ($XDG_CACHE_HOME/npu-port, else ~/.cache/npu-port)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "npu-port"


def _private(st: os.stat_result) -> bool:
    return st.st_uid == os.getuid() and not st.st_mode & 0o077 if hasattr(os, "getuid") else True


def user_secret() -> Optional[bytes]:
    """This user's cache key: 32 random bytes in a file of the user's cache folder that only the user
    can read, made on first use (written aside and linked into place, so two first runs agree on one).
    None where there is none to be had (no home, a read-only one, a key file someone else could have
    written): the run then goes without a cache."""
    folder = user_cache_dir()
    path = folder / _SECRET_NAME
    for _ in range(2):
        try:
            data = read_bounded(path, _SECRET_BYTES)
            st = os.lstat(path)
        except FileNotFoundError:
            pass
        except OSError:
            return None
        else:
            return data if len(data) == _SECRET_BYTES and _private(st) else None
        try:
            _claim(folder)
            tmp = folder / f".{_SECRET_NAME}.{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(os.urandom(_SECRET_BYTES))
                try:
                    os.link(tmp, path)  # never over a key another run made meanwhile: that one wins
                except FileExistsError:
                    pass
            finally:
                os.unlink(tmp)
        except (OSError, CacheRefused):
            return None
    return None


def _is_ours(root: Path) -> bool:
    try:
        return _MARK in read_bounded(root / _TAG_NAME, 4096)
    except OSError:
        return False


def _claim(root: Path) -> None:
    """Make `root` npu-port's cache folder, or CacheRefused: created (private) where it is missing, used
    where it is marked as npu-port's, marked where it is an empty folder of this user's; never a link,
    another user's folder, or a folder holding anything else (whose sub-folders pruning could remove)."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        try:
            root.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
        except OSError as exc:
            raise CacheRefused(f"cannot create it: {exc.strerror}") from None
        st = os.lstat(root)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise CacheRefused("it is not a folder (a link or a file)")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CacheRefused("it belongs to another user")
    if _is_ours(root):
        return
    try:
        if any(root.iterdir()):
            raise CacheRefused("it is a folder that is not npu-port's cache and is not empty")
        (root / _TAG_NAME).write_text(_TAG)
        (root / ".gitignore").write_text("# Created by npu-port; safe to delete.\n*\n")
    except OSError as exc:
        raise CacheRefused(f"cannot write to it: {exc.strerror}") from None


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


def _package_folder(pkg: ModuleType) -> Path:
    """The folder of a regular package, the one its __init__.py is in (npu_port's packages all have one)."""
    if pkg.__file__ is None:
        raise RuntimeError(f"{pkg.__name__} is a namespace package: its code cannot be digested")
    return Path(pkg.__file__).parent


@cache
def _package_digest() -> str:
    """The engine's and the rules' code and data: an edit to either invalidates every entry."""
    from npu_port import codemods, transpiler

    code: list[Path] = []
    for pkg in (transpiler, codemods):
        root = _package_folder(pkg)
        code += [p.relative_to(root.parent) for p in root.rglob("*")
                 if p.suffix in (".py", ".yaml", ".yml", ".json", ".j2") and "__pycache__" not in p.parts]
    here = _package_folder(codemods).parent
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
        file = getattr(module, "__file__", None) if module is not None else None
        if file:
            modules.append(Path(file))
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

    Each entry is `[size, mtime_ns, ctime_ns, ino, value, seal]`, the seal a MAC (keyed with the user's
    secret) of the path it is filed under, the index's time and the other fields: an entry that is
    malformed, moved to another path, altered or written by anyone else is dropped (counted in
    `damaged`) and the file is read again."""

    RACY_NS = 2_000_000_000
    NAME = "stat-index.json"
    # When the index is written: a test sets it, so whether an entry is racy never depends on how
    # long a run took.
    clock = staticmethod(time.time_ns)

    def __init__(self, path: Path, secret: bytes):
        self.path = path
        self._secret = secret
        self._old: dict[str, list] = {}
        self._written_ns = 0
        self.damaged = 0  # entries that did not verify (a whole unreadable index counts once)
        try:
            raw: Optional[bytes] = read_bounded(path, MAX_INDEX_BYTES)
        except FileNotFoundError:
            raw = None  # no index yet: nothing damaged
        except OSError:
            raw = b""  # a link, FIFO, device or giant: damage, never read
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

    def _seal(self, written_ns: int, rel: str, fields: list) -> str:
        h = hashlib.blake2b(digest_size=8, key=self._secret)
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
        _write_entry(self.path, data)


# What a cached outcome may say (core/report.py's words); anything else in an entry makes it damaged.
_FINDING_TYPES = tuple({"int": int, "str": str, "Severity": str, "FindingKind": str}.get(str(f.type), object)
                       for f in dataclasses.fields(Finding)[1:])  # after `file`, which the reader gives


def _checksum(secret: bytes, header: dict, payload: bytes) -> str:
    """A MAC over every header field but the checksum itself, and the payload."""
    h = hashlib.blake2b(digest_size=16, key=secret)
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
    """Entries live under `root/<fingerprint>/`; a run with other settings or code uses another folder.
    `secret` keys every MAC (the user's, `user_secret`); `open` makes one for a run."""

    def __init__(self, root: Path, secret: bytes):
        self.root = root
        self.hits = 0
        self._secret = secret
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
            found = self._indexes[fingerprint] = StatIndex(self.root / fingerprint / StatIndex.NAME, self._secret)
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
            raw: Optional[bytes] = read_bounded(path, MAX_ENTRY_BYTES)
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            return None  # not there (or unreadable): an ordinary miss
        except OSError:
            raw = None  # a link, FIFO, device or giant: damage, never read
        try:
            found = self._verified(raw, fingerprint, rel, language, digest, display) if raw is not None else None
        except (ValueError, KeyError, TypeError, RecursionError):
            found = None
        if found is not None and found[2]:
            # The result depends on other files of the project (analysis/project_modules.recording_reads):
            # valid only while each still reads as it did. A changed one is an ordinary miss, not damage.
            if any(digest_of_read(p) != d for p, d in found[2]):
                return None
        if found is None:
            self._damaged.add(path)
            try:  # so that a file whose result is not cached again (a timeout) is not reported every run
                path.unlink()
            except OSError:
                pass
            return None
        self.hits += 1
        return found[0], found[1]

    def _verified(self, raw: bytes, fingerprint: str, rel: str, language: OutcomeLanguage, digest: str,
                  display: str) -> Optional[tuple[FileOutcome, Optional[bytes], list[tuple[str, str]]]]:
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
                and isinstance(claimed, str) and hmac.compare_digest(claimed, _checksum(self._secret, doc, body))):
            return None
        status, error, changed, findings = doc["status"], doc["error"], doc["changed"], doc["findings"]
        if not (status in STATUSES and isinstance(error, str) and isinstance(changed, bool)
                and changed == (status == "converted") and (changed or not body) and isinstance(findings, list)):
            return None
        reads = doc.get("reads", [])
        if not (isinstance(reads, list) and all(isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r)
                                                for r in reads)):
            return None
        outcome = FileOutcome(display, status, [_finding(display, f) for f in findings], error, language)
        return outcome, body if changed else None, [(p, d) for p, d in reads]

    def put(self, fingerprint: str, rel: str, language: OutcomeLanguage, digest: str, outcome: FileOutcome,
            output: Optional[bytes], reads: Sequence[tuple[str, str]] = ()) -> None:
        """Write (or overwrite) the entry for these exact bytes of `rel`; `reads`: the other files the result
        depends on, (path, digest), checked before the entry is used again."""
        if not self._made:
            self._prepare()
        payload = output or b""
        doc = {
            "format": _FORMAT, "fingerprint": fingerprint, "rel": rel, "language": language, "digest": digest,
            "status": outcome.status, "error": outcome.error, "changed": output is not None,
            "findings": [list(dataclasses.astuple(f)[1:]) for f in outcome.findings],
            "length": len(payload), "reads": [list(r) for r in reads],
        }
        doc["checksum"] = _checksum(self._secret, doc, payload)
        data = json.dumps(doc, sort_keys=True).encode() + b"\n" + payload
        _write_entry(self._entry(fingerprint, rel, language, digest), data)

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
            _claim(self.root)
        except CacheRefused:
            pass  # written nowhere: the run only goes slower

    @classmethod
    def open(cls, root: Optional[Path], inputs: Sequence[Path]) -> Optional[Cache]:
        """The cache for a run over `inputs`: in `root` (a --cache-dir, which must be npu-port's own,
        empty or new, else CacheRefused saying why), or by default in the user's cache folder. None
        where no cache can be trusted: no user secret, or a default folder inside an input tree."""
        if root is None:
            root = user_cache_dir()
            if any(p.is_dir() and is_within(root, p) for p in inputs):
                return None
        else:
            _claim(root)
        secret = user_secret()
        return cls(root, secret) if secret is not None else None

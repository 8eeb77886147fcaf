"""Whether git holds a copy of a file's current bytes: `convert --in-place` overwrites only such files
(without --force), so whatever it replaces can be restored from git.

A file qualifies when the index (staged or committed work) or HEAD has a blob with exactly the bytes
on disk now, at that path, as a regular file. The blob id is computed here, in Python, from the bytes
(`blob <size>\\0<bytes>`, SHA-1 or SHA-256 as the repository's ids are), so no clean filter of the
repository runs; git is only asked to list its index and HEAD tree, with the settings that could make
those commands run a program (core.fsmonitor) switched off and no fetch allowed. Git-ignored and
untracked files, files outside any repository, a repository git refuses to read (dubious ownership),
an edited file marked assume-unchanged or skip-worktree (its index entry still holds the old bytes)
and a git that fails or is missing all mean "no copy".
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# -c settings for every git call: a repository's own config must not run a program. ls-files runs
# core.fsmonitor when it reads the index; the rest are belts and braces (no hooks, no prompts, and no
# fetch of a missing object in a partial clone, which would run core.sshCommand and the like).
SAFE_CONFIG = ("core.fsmonitor=false", "core.hooksPath=/dev/null", "protocol.allow=never")
_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_LAZY_FETCH": "1"}
_TIMEOUT = 120
_REGULAR = ("100644", "100755")


class GitError(Exception):
    pass


def git(cwd: str, *args: str) -> bytes:
    """Run a read-only git command in `cwd`; GitError with git's first line of stderr when it fails."""
    cmd = ["git", "--no-pager"]
    for setting in SAFE_CONFIG:
        cmd += ["-c", setting]
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_EXTERNAL_DIFF", "GIT_PAGER")}
    env.update(_ENV)
    try:
        proc = subprocess.run(cmd + list(args), cwd=cwd, capture_output=True, timeout=_TIMEOUT, env=env,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git did not answer within {_TIMEOUT} s") from None
    except OSError as exc:
        raise GitError(f"cannot run git: {exc.strerror}") from None
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(lines[0] if lines else f"git exited with status {proc.returncode}")
    return proc.stdout


def blob_id(data: bytes, hex_length: int) -> str:
    """The id git gives a blob of these bytes (40 hex digits: SHA-1, 64: SHA-256)."""
    algorithm = hashlib.sha256 if hex_length == 64 else hashlib.sha1
    return algorithm(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class _Repo:
    toplevel: str
    index: dict[str, tuple[str, str]]  # path relative to the top -> (mode, blob id), stage-0 entries
    head: Optional[dict[str, tuple[str, str]]] = None  # the same for HEAD's tree, read when first needed


def _entries(listing: bytes, with_stage: bool) -> dict[str, tuple[str, str]]:
    """Parse `ls-files -s -z` (`MODE ID STAGE\\tPATH`) or `ls-tree -z` (`MODE TYPE ID\\tPATH`)."""
    out = {}
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        parts = meta.decode("ascii", "replace").split()
        if with_stage:
            if len(parts) != 3 or parts[2] != "0":
                continue  # a merge conflict's stages hold no single copy
            mode, oid = parts[0], parts[1]
        else:
            if len(parts) != 3:
                continue
            mode, oid = parts[0], parts[2]
        out[os.fsdecode(path)] = (mode, oid)
    return out


class GitCopies:
    """Answers `reason_unsafe(path)` for many files, asking git once per repository for its index (and
    once for its HEAD tree, when a file's bytes are not in the index)."""

    def __init__(self) -> None:
        self._repo_of_dir: dict[str, object] = {}  # real folder -> _Repo | GitError | None (no repository)
        self._repo_at: dict[str, object] = {}  # the folder holding .git -> _Repo | GitError

    def reason_unsafe(self, path: Path, data: Optional[bytes] = None) -> Optional[str]:
        """None when git holds exactly the current bytes of `path` (a regular file, not a link), else
        why not. `data`: the file's bytes, when they were just read."""
        if os.path.islink(path) or not os.path.isfile(path):
            return "not a regular file"
        folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        repo = self._repo(folder)
        if repo is None:
            return "it is not inside a git repository"
        if isinstance(repo, GitError):
            return f"git cannot read its repository: {repo}"
        assert isinstance(repo, _Repo)
        rel = os.path.relpath(os.path.join(folder, os.path.basename(path)), repo.toplevel)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            return "it is outside its repository's work tree"
        rel = rel.replace(os.sep, "/")
        if data is None:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError as exc:
                return f"cannot read it: {exc.strerror}"
        index = repo.index.get(rel)
        if _holds(index, data):
            return None
        head = self._head(repo).get(rel)
        if _holds(head, data):
            return None
        if index is None and head is None:
            return "git does not track it (untracked or ignored)"
        held = index if index is not None else head
        if held is not None and held[0] not in _REGULAR:
            return "git holds a link or a submodule there, not this file"
        return "its content differs from what git's index and HEAD hold (changed and not staged)"

    def _repo(self, folder: str):
        if folder in self._repo_of_dir:
            return self._repo_of_dir[folder]
        marker = _nearest_git(folder)
        if marker is None:
            repo = None
        elif marker in self._repo_at:
            repo = self._repo_at[marker]
        else:
            repo = self._repo_at[marker] = _open(marker)
        self._repo_of_dir[folder] = repo
        return repo

    @staticmethod
    def _head(repo: _Repo) -> dict[str, tuple[str, str]]:
        if repo.head is None:
            try:
                repo.head = _entries(git(repo.toplevel, "ls-tree", "-r", "-z", "--full-tree", "HEAD"),
                                     with_stage=False)
            except GitError:
                repo.head = {}  # no commit yet, or HEAD unreadable: HEAD holds nothing
        return repo.head


def _holds(entry: Optional[tuple[str, str]], data: bytes) -> bool:
    return entry is not None and entry[0] in _REGULAR and entry[1] == blob_id(data, len(entry[1]))


def _open(folder: str):
    try:
        top = os.fsdecode(git(folder, "rev-parse", "--show-toplevel").rstrip(b"\n"))
        if not top:
            return GitError("it has no work tree (a bare repository)")
        listing = git(top, "ls-files", "-s", "-z", "--full-name")
    except GitError as exc:
        return exc
    return _Repo(os.path.realpath(top), _entries(listing, with_stage=True))


def _nearest_git(folder: str) -> Optional[str]:
    """The nearest folder at or above `folder` that has a `.git` (a folder, or a file as in submodules
    and worktrees): where git would find the repository. None when there is none."""
    current = folder
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent

"""`cuda-only-deps-manifest`: requirements files, pyproject.toml and Dockerfiles that depend on packages
or base images with no Ascend build."""

from __future__ import annotations

import re
from collections.abc import Iterator

from npu_port.codemods._cuda_packages import TRIGGER_PATTERN, match_image, match_requirement, match_system, message
from npu_port.transpiler.core.rules import TextRule
from npu_port.transpiler.text.shell import Script, ShellSyntaxError
from npu_port.transpiler.text.text_edits import LineIndex

_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_.\"'-]+)\s*=")
_TOML_STRING = re.compile(r"\"((?:[^\"\\\n]|\\.)*)\"|'([^'\n]*)'")
# Tables whose array values are PEP 508 requirements, with the keys that hold them (None: every key).
_REQUIREMENT_KEYS = {"project": {"dependencies"}, "project.optional-dependencies": None,
                     "build-system": {"requires"}, "dependency-groups": None}
_POETRY_DEPENDENCIES = re.compile(r"tool\.poetry\.(?:group\.[^.]+\.)?(?:dev-)?dependencies")
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.I | re.M)
_RUN = re.compile(r"^\s*RUN\s+", re.I | re.M)
_PIP_OPTIONS_WITH_VALUE = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
                           "-f", "--find-links", "--target", "-t", "--prefix", "--root", "--trusted-host",
                           "--platform", "--python-version", "--implementation", "--abi", "--cache-dir", "--src"}
_PIP_PROGRAMS = {"pip", "pip3", "uv", "python", "python3", "mim"}
_SYSTEM_INSTALLERS = {"apt-get", "apt", "yum", "dnf"}


class CudaOnlyDepsManifest(TextRule):
    """Reports dependencies with no Ascend build in requirements files, pyproject.toml and Dockerfiles.

    What it does:
        Reads `requirements*.txt` / `constraints*.txt` line by line, the requirement arrays of
        `pyproject.toml` (`[project] dependencies`, `[project.optional-dependencies]`,
        `[build-system] requires`, `[dependency-groups]`, Poetry's dependency tables), and in a
        Dockerfile each `pip install` and each `apt-get` / `yum` install of a `RUN` line (CUDA system
        packages: `cuda-*`, `libcudnn*`, `libnccl*`) and each `FROM` image. Every requirement of a
        distribution with no Ascend build (`cupy-cuda*`, `flash-attn`, `bitsandbytes`, `xformers`,
        `apex`, `nvidia-*` wheels, `triton`, whose Ascend backend is `triton-ascend`, ...) and every
        CUDA base image (`nvidia/cuda`, NGC images) is reported on its line. The table is
        codemods/data/<target>/cuda_only_packages.yaml.

    Why:
        `pip install -r requirements.txt` on an Ascend host fails on these (or installs CUDA
        libraries nothing can load), and an image built `FROM nvidia/cuda` has no CANN. The code that
        imported them is reported by `unsupported-cuda-libs`; the manifests are where the port has
        to drop or swap them, so they belong on the same list.

    Example:
        flash-attn>=2.5.0                        ->  unchanged; warning: no Ascend build
        triton==3.1.0                            ->  unchanged; warning: depend on triton-ascend instead
        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 ->  unchanged; warning: a CUDA base image

    Fix safety:
        Report-only: which dependency replaces one (or whether it can simply go) is a decision.
    """

    ID = "cuda-only-deps-manifest"
    LANGUAGE = "manifest"
    SAFETY = "report-only"
    TRIGGERS = ()  # names come in any case: the pattern ignores it
    TRIGGER_PATTERNS = (TRIGGER_PATTERN,)

    def apply(self, text: str) -> str:
        self._lines = LineIndex(text)
        name = self.ctx.path.replace("\\", "/").rsplit("/", 1)[-1].lower()
        if name.endswith(".toml"):
            sites = self._pyproject(text)
        elif name.endswith(".txt"):
            sites = self._requirements(text)
        else:
            sites = self._dockerfile(text)
        for offset, message_text, hint in sites:
            line, col = self._lines.line_col(offset)
            self.ctx.add(self.ID, line, col, message_text, severity="warning", hint=hint)
        return text

    def _requirement(self, offset: int, requirement: str) -> Iterator[tuple[int, str, str]]:
        found = match_requirement(self.ctx.target, requirement)
        if found is not None:
            _, row = found
            yield offset, message(row, requirement.strip()), row.hint

    # -- requirements*.txt ----------------------------------------------------------------------
    def _requirements(self, text: str) -> Iterator[tuple[int, str, str]]:
        offset = 0
        for line in text.splitlines(keepends=True):
            body = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].rstrip()
            lead = len(body) - len(body.lstrip())
            requirement = body.strip()
            if requirement.startswith(("-e ", "--editable ")):
                requirement = requirement.split(None, 1)[1]
            if requirement:
                yield from self._requirement(offset + lead, requirement)
            offset += len(line)

    # -- pyproject.toml -------------------------------------------------------------------------
    def _pyproject(self, text: str) -> Iterator[tuple[int, str, str]]:
        table, key, offset = "", "", 0
        for line in text.splitlines(keepends=True):
            header = _TOML_TABLE.match(line)
            if header:
                table, key = header.group(1).replace('"', "").replace("'", ""), ""
            else:
                assigned = _TOML_KEY.match(line)
                if assigned:
                    key = assigned.group(1).strip("\"'")
                    if _POETRY_DEPENDENCIES.fullmatch(table):
                        # Poetry names the dependency by its key: `flash-attn = "^2.5"`.
                        yield from self._requirement(offset + assigned.start(1), key)
                keys = _REQUIREMENT_KEYS.get(table, set())
                if keys is None or key in (keys or ()):
                    start = assigned.end() if assigned else 0
                    for m in _TOML_STRING.finditer(line, start):
                        value = m.group(1) if m.group(1) is not None else m.group(2)
                        yield from self._requirement(offset + m.start() + 1, value)
            offset += len(line)

    # -- Dockerfile -----------------------------------------------------------------------------
    def _dockerfile(self, text: str) -> Iterator[tuple[int, str, str]]:
        for m in _FROM.finditer(text):
            row = match_image(self.ctx.target, m.group(1))
            if row is not None:
                yield m.start(1), f"{row.what}: `FROM {m.group(1)}` has no CANN (Ascend) runtime", row.hint
        for m in _RUN.finditer(text):
            body_end = _instruction_end(text, m.end())
            yield from self._pip_installs(text[m.end():body_end], m.end())

    def _pip_installs(self, body: str, base: int) -> Iterator[tuple[int, str, str]]:
        # A RUN body is shell (line continuations included): the shell lexer splits it into commands.
        try:
            script = Script(body)
        except ShellSyntaxError:
            return
        for cmd in script.commands:
            words = [w for w in cmd.words if w.value is not None]
            values = [w.value or "" for w in words]
            if values and values[0] in _SYSTEM_INSTALLERS and "install" in values:
                for word, value in zip(words[values.index("install") + 1:], values[values.index("install") + 1:]):
                    row = match_system(self.ctx.target, value) if not value.startswith("-") else None
                    if row is not None:
                        yield base + word.start, f"{row.what}: `{value}` is installed here; an Ascend host has none", \
                            row.hint
                continue
            if not values or values[0].rsplit("/", 1)[-1] not in _PIP_PROGRAMS or "install" not in values:
                continue
            i = values.index("install") + 1
            while i < len(words):
                value = values[i]
                if value in _PIP_OPTIONS_WITH_VALUE:
                    i += 2
                    continue
                if not value.startswith("-"):
                    yield from self._requirement(base + words[i].start, value)
                i += 1


def _instruction_end(text: str, start: int) -> int:
    """Where a Dockerfile instruction that starts at `start` ends: the first line not continued by `\\`."""
    i = start
    while True:
        newline = text.find("\n", i)
        if newline < 0:
            return len(text)
        if text[i:newline].rstrip().endswith("\\"):
            i = newline + 1
            continue
        return newline

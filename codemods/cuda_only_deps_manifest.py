"""`cuda-only-deps-manifest`: requirements files, pyproject.toml and Dockerfiles that depend on packages
or base images with no Ascend build."""

from __future__ import annotations

import re
from collections.abc import Iterator

from npu_port.codemods._cuda_packages import TRIGGER_PATTERN, match_image, match_requirement, match_system, message
from npu_port.transpiler.core.files import is_makefile
from npu_port.transpiler.core.report import Severity
from npu_port.transpiler.core.rules import TextRule
from npu_port.transpiler.text.make_recipes import recipes
from npu_port.transpiler.text.shell import Script, ShellSyntaxError
from npu_port.transpiler.text.text_edits import LineIndex

# A finding's offset, message, hint and severity.
_Site = tuple[int, str, str, Severity]
_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
# A key: bare or quoted parts joined by dots, then `=` (not the `==` of a pin inside an array's string).
_TOML_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*'))*)"""
                       r"\s*=(?!=)")
_TOML_STRING = re.compile(r"\"((?:[^\"\\\n]|\\.)*)\"|'([^'\n]*)'")
_SETUP_CFG_KEYS = frozenset({"install_requires", "setup_requires", "tests_require"})
# Tables whose array values are PEP 508 requirements, with the keys that hold them (None: every key).
_REQUIREMENT_KEYS = {"project": {"dependencies"}, "project.optional-dependencies": None,
                     "build-system": {"requires"}, "dependency-groups": None, "tool.uv": {"dev-dependencies"},
                     "tool.pdm.dev-dependencies": None}
# uv's arrays that pin a version for whatever else requires the package, without requiring it.
_PIN_KEYS = {"tool.uv": {"override-dependencies", "constraint-dependencies", "build-constraint-dependencies"}}
_POETRY_DEPENDENCIES = re.compile(r"tool\.poetry\.(?:group\.[^.]+\.)?(?:dev-)?dependencies")
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.I | re.M)
_RUN = re.compile(r"^\s*RUN\s+", re.I | re.M)
# Instructions whose text runs on the image or sets its environment: where a CUDA-image step lives.
_STEP = re.compile(r"^\s*(?:RUN|ENV|ARG)\s+", re.I | re.M)
# What a step names of the CUDA stack: the toolkit's paths and tools, its libraries, CUDA-only packages
# (`/usr/local/cuda/bin/nsys`, `cudnn-local-repo`, `--with-cuda=`, `cd apex`); a user's own
# identifier that merely contains one (`CUDA_HOME`, `cuda_ext`) is not a name of it.
# `echo` / `printf` text is a message to whoever builds the image, not a step of the CUDA stack.
_MESSAGE = re.compile(r"(?<![\w-])(?:echo|printf)\s[^;&|\n]*")
_CUDA_WORD = re.compile(r"(?<![\w.-])(?:cuda(?:-[\d.]+)?|cudnn|nccl|nvcc|nvidia-smi|nsys(?:-ui)?|cupy|triton"
                        r"|flash[-_]attn|apex|xformers|bitsandbytes|pynvml)(?![\w-])", re.I)
_PIP_OPTIONS_WITH_VALUE = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
                           "-f", "--find-links", "--target", "-t", "--prefix", "--root", "--trusted-host",
                           "--platform", "--python-version", "--implementation", "--abi", "--cache-dir", "--src"}
_PIP_PROGRAMS = {"pip", "pip3", "uv", "python", "python3", "mim"}
_SYSTEM_INSTALLERS = {"apt-get", "apt", "yum", "dnf"}


class CudaOnlyDepsManifest(TextRule):
    """Reports dependencies with no Ascend build in requirements files, pyproject.toml, Dockerfiles and Makefiles.

    What it does:
        Reads `requirements*.txt` / `constraints*.txt` line by line, setup.cfg's `install_requires`,
        `setup_requires`, `tests_require` and `[options.extras_require]`, the requirement arrays of
        `pyproject.toml` (`[project] dependencies`, `[project.optional-dependencies]`,
        `[build-system] requires`, `[dependency-groups]`, Poetry's dependency tables, uv's
        `dev-dependencies` and PDM's; uv's `override-dependencies` and `constraint-dependencies`, which
        only pin what another dependency pulls in, are info), and in a
        Dockerfile each `pip install` and each `apt-get` / `yum` install of a `RUN` line (CUDA system
        packages: `cuda-*`, `libcudnn*`, `libnccl*`) and each `FROM` image; in a Makefile the same
        installs in its recipes (`uv pip install flash-attn`). Every requirement of a
        distribution with no Ascend build (`cupy-cuda*`, `flash-attn`, `bitsandbytes`, `xformers`,
        `apex`, `nvidia-*` wheels, `triton`, whose Ascend backend is `triton-ascend`, ...) and every
        CUDA base image (`nvidia/cuda`, NGC images, any image whose tag names a CUDA version:
        `-cu124-`, `cuda12.1`) is reported on its line. A requirement installed from its repository
        (`git+https://github.com/NVIDIA/apex`) is known by `#egg=` or else by the repository's name. A `pip uninstall` of
        such a package is info (it ports nothing and breaks nothing). In a Dockerfile built on a
        CUDA image, each `RUN` / `ENV` / `ARG` line that still names the CUDA stack
        (`/usr/local/cuda`, cuDNN and NCCL downloads, `nvcc`, `nsys`, an apex or triton build) is
        info too, so that the steps that change with the image are listed (`echo` text and
        comments are not steps). The table is codemods/data/<target>/cuda_only_packages.yaml.

    Why:
        `pip install -r requirements.txt` on an Ascend host fails on these (or installs CUDA
        libraries nothing can load), and an image built `FROM nvidia/cuda` has no CANN. The code that
        imported them is reported by `unsupported-cuda-libs`; the manifests are where the port has
        to drop or swap them, so they belong on the same list.

    Example:
        flash-attn>=2.5.0                        ->  unchanged; warning: no Ascend build
        triton==3.1.0                            ->  unchanged; warning: depend on triton-ascend instead
        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 ->  unchanged; warning: a CUDA base image
        ENV CUDA_HOME=/usr/local/cuda            ->  unchanged; info: a step of the CUDA image
        (a Makefile recipe) uv pip install flash-attn --no-build-isolation
                                                 ->  unchanged; warning: no Ascend build

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
        elif name == "setup.cfg":
            sites = self._setup_cfg(text)
        elif name.endswith(".txt"):
            sites = self._requirements(text)
        elif is_makefile(name):
            sites = self._makefile(text)
        else:
            sites = self._dockerfile(text)
        for offset, message_text, hint, severity in sites:
            line, col = self._lines.line_col(offset)
            self.ctx.add(self.ID, line, col, message_text, severity=severity, hint=hint)
        return text

    def _requirement(self, offset: int, requirement: str) -> Iterator[_Site]:
        found = match_requirement(self.ctx.target, requirement)
        if found is not None:
            _, row = found
            yield offset, message(row, requirement.strip()), row.hint, "warning"

    def _pin(self, offset: int, requirement: str) -> Iterator[_Site]:
        found = match_requirement(self.ctx.target, requirement)
        if found is not None:
            yield (offset, f"{found[1].what}: `{requirement.strip()}` pins a package with no Ascend build for the "
                           f"dependencies that pull it in", "it goes with the dependency that needs it: drop the pin "
                                                            "when that dependency is dropped or replaced", "info")

    # -- requirements*.txt ----------------------------------------------------------------------
    def _requirements(self, text: str) -> Iterator[_Site]:
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

    # -- setup.cfg ------------------------------------------------------------------------------
    def _setup_cfg(self, text: str) -> Iterator[_Site]:
        """setuptools' declarative config: `[options]` install_requires / setup_requires / tests_require and
        every key of `[options.extras_require]`, a requirement per line (the value after `=` and the
        indented lines that continue it)."""
        section, selected, offset = "", False, 0
        for line in text.splitlines(keepends=True):
            body = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].rstrip()  # `;` starts a marker
            header = re.match(r"\[([^\]]+)\]", body)
            if header:
                section, selected = header.group(1).strip(), False
            elif body and not body[0].isspace() and "=" in body:
                key, _, value = body.partition("=")
                selected = section == "options.extras_require" or (
                    section == "options" and key.strip() in _SETUP_CFG_KEYS)
                if selected and value.strip():
                    yield from self._requirement(offset + len(body) - len(value.lstrip()), value.strip())
            elif selected and body.strip():
                yield from self._requirement(offset + len(body) - len(body.lstrip()), body.strip())
            offset += len(line)

    # -- pyproject.toml -------------------------------------------------------------------------
    def _pyproject(self, text: str) -> Iterator[_Site]:
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
                pinned = key in _PIN_KEYS.get(table, ())
                if keys is None or key in (keys or ()) or pinned:
                    start = assigned.end() if assigned else 0
                    read = self._pin if pinned else self._requirement
                    for m in _TOML_STRING.finditer(line, start):
                        value = m.group(1) if m.group(1) is not None else m.group(2)
                        yield from read(offset + m.start() + 1, value)
            offset += len(line)

    # -- Makefile -------------------------------------------------------------------------------
    def _makefile(self, text: str) -> Iterator[_Site]:
        """Each recipe is run by the shell (text/make_recipes): its `pip` and `uv pip` installs are read as a
        Dockerfile's RUN lines are."""
        for start, code in recipes(text):
            yield from self._pip_installs(code, start)

    # -- Dockerfile -----------------------------------------------------------------------------
    def _dockerfile(self, text: str) -> Iterator[_Site]:
        cuda_image = False
        for m in _FROM.finditer(text):
            row = match_image(self.ctx.target, m.group(1))
            if row is not None:
                cuda_image = True
                yield m.start(1), f"{row.what}: `FROM {m.group(1)}` has no CANN (Ascend) runtime", row.hint, "warning"
        reported: set[int] = set()
        for m in _RUN.finditer(text):
            body_end = _instruction_end(text, m.end())
            for site in self._pip_installs(_without_comment_lines(text[m.end():body_end]), m.end()):
                reported.add(self._lines.line_col(site[0])[0])
                yield site
        if cuda_image:
            yield from self._cuda_steps(text, reported)

    def _cuda_steps(self, text: str, reported: set[int]) -> Iterator[_Site]:
        """In a Dockerfile built on a CUDA image, each step line that names the CUDA stack and has no
        finding yet: the FROM line says the image changes, these say which steps change with it."""
        for m in _STEP.finditer(text):
            offset = m.start()
            for line in text[offset:_instruction_end(text, m.end())].splitlines(keepends=True):
                code = _MESSAGE.sub("", re.split(r"(?:^|\s)#", line, maxsplit=1)[0])
                word = _CUDA_WORD.search(code)
                number = self._lines.line_col(offset)[0]
                if word is not None and number not in reported:
                    reported.add(number)
                    yield (offset + word.start(),
                           f"`{word.group(0)}` in a step of a Dockerfile built on a CUDA image: it serves the "
                           f"CUDA stack, which an Ascend (CANN) image does not have",
                           "drop or replace the step when the image moves to a CANN base: CUDA paths "
                           "(/usr/local/cuda) become CANN's (/usr/local/Ascend/ascend-toolkit, set_env.sh), and "
                           "CUDA-only packages have no Ascend build", "info")
                offset += len(line)

    def _pip_installs(self, body: str, base: int) -> Iterator[_Site]:
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
                            row.hint, "warning"
                continue
            if not values or values[0].rsplit("/", 1)[-1] not in _PIP_PROGRAMS:
                continue
            if "uninstall" in values and "install" not in values:
                yield from self._pip_uninstalls(words, values, base)
                continue
            if "install" not in values:
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

    def _pip_uninstalls(self, words, values: list[str], base: int) -> Iterator[_Site]:
        # Removing a CUDA-only wheel ports nothing and breaks nothing: on an Ascend image it is either
        # absent or a CUDA build a dependency pulled in (triton next to triton-ascend), so this is info.
        for word, value in zip(words[values.index("uninstall") + 1:], values[values.index("uninstall") + 1:]):
            if value.startswith("-"):
                continue
            found = match_requirement(self.ctx.target, value)
            if found is not None:
                yield (base + word.start, f"{found[1].what}: `pip uninstall {value}` removes a package with no "
                                          f"Ascend build", "nothing to port: on an Ascend image it removes at most a "
                                                           "CUDA build a dependency pulled in; keep it or drop it",
                       "info")


def _instruction_end(text: str, start: int) -> int:
    """Where a Dockerfile instruction that starts at `start` ends: the first line not continued by `\\`."""
    i = start
    while True:
        newline = text.find("\n", i)
        if newline < 0:
            return len(text)
        line = text[i:newline].strip()
        # Docker drops comment lines inside a continued instruction: they neither end nor break it.
        if line.endswith("\\") or (line.startswith("#") and i > start):
            i = newline + 1
            continue
        return newline


def _without_comment_lines(body: str) -> str:
    """The body with each whole-line comment turned into a continued blank line of the same length,
    as Docker reads it, so that offsets stay those of the file."""
    return re.sub(r"(?m)^([ \t]*#[^\n]*)$", lambda m: " " * (len(m.group(1)) - 1) + "\\", body)

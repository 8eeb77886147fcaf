"""The oldest release of a package that a project accepts, read from its requirement files as text.

`convert --keep-cuda` writes torch's device-agnostic API only where the project's torch has it, so it
needs the torch the project pins. The files are read, never run (setup.py is scanned for quoted
requirement strings): the tool never executes code of the tree it converts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from npu_port.transpiler.core.files import ReadError, read_text

# The files that name a project's dependencies, in the order they are believed.
_FILES = ("requirements*.txt", "requirements/*.txt", "pyproject.toml", "setup.py", "setup.cfg",
          "environment.yml", "environment.yaml")
# `torch==2.1.0`, `torch>=2.1,<2.4`, `torch~=2.6`, `torch-npu==2.1.0.post3` (torch_npu follows torch's
# numbers), `verl[vllm]>=0.6`, with or without extras, markers or quotes around it.
_REQUIREMENT = r"""(?:^|["'\s,\[])(?P<name>{names})\s*(?:\[[^\]]*\])?\s*(?P<spec>(?:(?:===?|>=|~=|<=?|>|!=)\s*""" \
               r"""[0-9][0-9a-z.*+]*\s*,?\s*)+)"""
_LOWER = re.compile(r"(===?|>=|~=)\s*([0-9]+(?:\.[0-9]+)+)")
TORCH = ("torch", "torch[-_]npu")


@dataclass(frozen=True)
class Pin:
    version: str  # "2.1.0": the oldest release the project accepts, as its pin writes it
    where: str  # "requirements.txt:3"


def lowest_torch(paths: Iterable[Path]) -> Optional[Pin]:
    """The oldest torch release any input's project accepts (a lower bound or exact pin of torch or
    torch-npu), or None when no requirement file near the inputs names one."""
    return lowest_pin(paths, TORCH)


def lowest_pin(paths: Iterable[Path], names: tuple[str, ...]) -> Optional[Pin]:
    """The oldest release of the package (distribution names as regular expressions) any input's
    project accepts, or None."""
    pattern = re.compile(_REQUIREMENT.format(names="|".join(names)), re.IGNORECASE | re.MULTILINE)
    found: list[Pin] = []
    seen: set[Path] = set()
    for path in paths:
        root = project_root(Path(path))
        if root is None or root in seen:
            continue
        seen.add(root)
        found.extend(_pins_in(root, pattern))
    return min(found, key=lambda p: tuple(int(x) for x in p.version.split(".")), default=None)


def project_root(path: Path) -> Optional[Path]:
    """The nearest folder at or above `path` holding a requirement file; the walk stops at a git root."""
    here = path if path.is_dir() else path.parent
    for folder in (here, *here.parents):
        if any(next(iter(folder.glob(files)), None) is not None for files in _FILES):
            return folder
        if (folder / ".git").exists():
            return None
    return None


def _pins_in(root: Path, requirement: re.Pattern) -> list[Pin]:
    out = []
    for files in _FILES:
        for file in sorted(root.glob(files)):
            if not file.is_file():
                continue
            try:
                text = read_text(file)
            except (ReadError, OSError):
                continue
            rel = file.relative_to(root).as_posix()
            for m in requirement.finditer(text):
                if text[:m.start("name")].rsplit("\n", 1)[-1].lstrip().startswith("#"):
                    continue
                low = _LOWER.search(m.group("spec"))
                if low:
                    line = text.count("\n", 0, m.start("name")) + 1
                    out.append(Pin(low.group(2), f"{rel}:{line}"))
    return out

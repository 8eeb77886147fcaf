"""Finds the source of a stripped package's modules on disk, the way Python's path finder would, without
importing anything: the script's folder, each --path, then the working directory, first match wins."""

from __future__ import annotations

import importlib.machinery
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

_EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES) + (".so", ".pyd")


@dataclass(frozen=True)
class ModuleSource:
    name: str  # absolute dotted name
    path: Path  # the .py file, the package's __init__.py, or the extension file
    is_package: bool
    is_extension: bool = False

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


def split_packages(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in values if v.strip()))


def under(module: str, packages: Iterable[str]) -> Optional[str]:
    """The stripped package `module` belongs to, if any."""
    for pkg in packages:
        if module == pkg or module.startswith(pkg + "."):
            return pkg
    return None


class SourceResolver:
    def __init__(self, roots: Iterable[Path], packages: Iterable[str]):
        self.roots = list(dict.fromkeys(Path(r).resolve() for r in roots))
        self.packages = tuple(packages)
        self._cache: dict[str, Optional[ModuleSource]] = {}

    def is_stripped(self, module: str) -> bool:
        return under(module, self.packages) is not None

    def searched(self) -> str:
        return ", ".join(str(r) for r in self.roots)

    def find(self, module: str) -> Optional[ModuleSource]:
        if module not in self._cache:
            self._cache[module] = self._find(module)
        return self._cache[module]

    def _find(self, module: str) -> Optional[ModuleSource]:
        parent, _, last = module.rpartition(".")
        if parent:
            owner = self.find(parent)
            if owner is None or not owner.is_package:
                return None
            dirs = self._package_dirs(parent)
        else:
            dirs = self.roots
        for folder in dirs:
            found = self._in_folder(module, folder, last)
            if found:
                return found
        return None

    def _package_dirs(self, package: str) -> list[Path]:
        """A regular package lives in one folder; a namespace package (no __init__.py) spans all roots."""
        src = self.find(package)
        if src is not None and src.path.name == "__init__.py":
            return [src.path.parent]
        parts = package.split(".")
        return [r.joinpath(*parts) for r in self.roots if r.joinpath(*parts).is_dir()]

    def _in_folder(self, module: str, folder: Path, last: str) -> Optional[ModuleSource]:
        pkg_dir = folder / last
        if (pkg_dir / "__init__.py").is_file():
            return ModuleSource(module, pkg_dir / "__init__.py", True)
        if (folder / f"{last}.py").is_file():
            return ModuleSource(module, folder / f"{last}.py", False)
        for suffix in _EXTENSION_SUFFIXES:
            if (folder / f"{last}{suffix}").is_file():
                return ModuleSource(module, folder / f"{last}{suffix}", False, is_extension=True)
        if pkg_dir.is_dir():
            # A namespace package: its path is the folder itself.
            return ModuleSource(module, pkg_dir, True)
        return None


def absolute_module(current_package: str, level: int, module: str) -> Optional[str]:
    """`from ..x import y` inside `current_package` -> the absolute module name (None: beyond the top)."""
    if level == 0:
        return module
    parts = current_package.split(".") if current_package else []
    if level - 1 > len(parts) or not parts:
        return None
    base = parts[: len(parts) - (level - 1)]
    if not base:
        return None
    return ".".join(base + ([module] if module else []))

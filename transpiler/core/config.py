"""Project configuration: `[tool.npu-port]` in pyproject.toml or a top-level `npu-port.toml`.

The file is found by walking up from the paths a command is given (npu-port.toml wins over a
pyproject.toml in the same folder); command-line flags override it. Every effective value keeps
where it came from, so `npu-port config` can say why a setting is what it is. Paths and globs in a
file are relative to the folder that holds it.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from npu_port.transpiler.core.files import ReadError, read_source, read_text
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.tables.mapping import available_targets


class ConfigError(ValueError):
    """A configuration file (or value) that cannot be used; the message names the file, key and line."""


def _str_list(value: Any) -> Optional[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "a list of strings"
    return None


def _bool(value: Any) -> Optional[str]:
    return None if isinstance(value, bool) else "true or false"


def _string(value: Any) -> Optional[str]:
    return None if isinstance(value, str) else "a string"


def _version(value: Any) -> Optional[str]:
    if not isinstance(value, str) or not re.fullmatch(r"\d+\.\d+(\.\d+)?", value):
        return 'a release number such as "2.6"'
    return None


def _target(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return "a string"
    if value not in available_targets():
        return f"one of {', '.join(available_targets())}"
    return None


def _per_file_ignores(value: Any) -> Optional[str]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and _str_list(v) is None for k, v in value.items()):
        return 'a table of glob = ["RULE", ...]'
    return None


@dataclass(frozen=True)
class Key:
    name: str
    check: Callable[[Any], Optional[str]]  # returns what was expected, or None when the value is fine
    default: Any
    help: str
    is_path: bool = False  # resolved against the config file's folder


KEYS: dict[str, Key] = {k.name: k for k in (
    Key("target", _target, "ascend", "accelerator to port to"),
    Key("select", _str_list, [], "only these rules, groups or id prefixes (empty: the default set)"),
    Key("ignore", _str_list, [], "leave these rules out"),
    Key("per-file-ignores", _per_file_ignores, {}, "glob -> rules left out for the files it matches"),
    Key("extras", _bool, False, "also apply the opt-in NPU additions"),
    Key("keep-cuda", _bool, False, "device-agnostic output: the code keeps running on NVIDIA GPUs too"),
    Key("torch-version", _version, None, "the oldest torch the --keep-cuda output must run on "
                                          "(default: the project's own pin)"),
    Key("runtime-env", _string, None, "YAML profile for the ray-runtime-env rule", is_path=True),
    Key("forbid", _str_list, [], "packages that must not be imported (check)"),
    Key("no-relative", _bool, False, "report relative imports (check)"),
    Key("exclude", _str_list, [], "globs of files and folders to skip"),
    Key("rules", _str_list, [], "custom mapping tables (YAML, the built-in tables' schema)", is_path=True),
    Key("strict", _bool, False, "warnings count as errors (check)"),
    Key("verl-version", _string, None, "VERL release to check config keys against (check; default: the project's pin)"),
)}


@dataclass(frozen=True)
class Source:
    """Where a value came from: 'default', 'command line' or 'FILE:LINE'."""

    where: str

    def __str__(self) -> str:
        return self.where


@dataclass
class ProjectConfig:
    """The effective settings of one run, each with its source."""

    values: dict[str, Any]
    sources: dict[str, Source]
    file: Optional[Path] = None  # the config file used, if any
    root: Path = field(default_factory=Path.cwd)  # globs are relative to this folder

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    # -- what a command needs --------------------------------------------------------------------
    def settings(self, *, jobs: int = 1, select: Sequence[str] = (),
                 extra_options: Sequence[tuple[str, tuple[str, ...]]] = ()) -> Settings:
        """The engine's Settings; `select` replaces the configured selection when given (check adds its
        rules); `extra_options` are rule options by name (Settings.options_extra), set before the config's."""
        options: list[tuple[str, tuple[str, ...]]] = list(extra_options)
        if self.values["forbid"]:
            options.append(("forbid", tuple(self.values["forbid"])))
        if self.values["rules"]:
            options.append(("rules_files", tuple(str(p) for p in self.values["rules"])))
        return Settings(
            target=self.values["target"],
            select=tuple(select) or tuple(self.values["select"]),
            ignore=tuple(self.values["ignore"]),
            extras=self.values["extras"],
            keep_cuda=self.values["keep-cuda"],
            torch_version=self.values["torch-version"],
            jobs=jobs,
            runtime_env_profile=str(self.values["runtime-env"]) if self.values["runtime-env"] else None,
            options_extra=tuple(options),
        )

    def _relative(self, path: Path) -> str:
        try:
            return Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return Path(path).as_posix()

    def ignored_rules_for(self, path: Path) -> tuple[str, ...]:
        if not self.values["per-file-ignores"]:
            return ()  # (asked of every file of a run: a tree's path arithmetic is not free)
        rel = self._relative(path)
        out: list[str] = []
        for glob, rules in self.values["per-file-ignores"].items():
            if _glob_matches(glob, rel):
                out.extend(rules)
        return tuple(out)

    def is_excluded(self, path: Path) -> bool:
        if not self.values["exclude"]:
            return False
        rel = self._relative(path)
        return any(_glob_matches(glob, rel) for glob in self.values["exclude"])


def _glob_matches(glob: str, rel: str) -> bool:
    """ruff-like: a glob with no '/' matches any path component sequence ending the path; else the path."""
    glob = glob.rstrip("/")
    if fnmatch.fnmatchcase(rel, glob) or fnmatch.fnmatchcase(rel, glob + "/*"):
        return True
    if "/" not in glob:
        parts = rel.split("/")
        return any(fnmatch.fnmatchcase(p, glob) for p in parts)
    return False


# -- finding and reading files -------------------------------------------------------------------

def find_config_file(paths: Iterable[Path]) -> Optional[Path]:
    """The nearest npu-port.toml, or pyproject.toml with a [tool.npu-port] table, above the paths."""
    paths = [Path(os.path.abspath(p)) for p in paths] or [Path.cwd()]
    start = Path(os.path.commonpath([str(p) for p in paths]))
    if not start.is_dir():
        start = start.parent
    for folder in (start, *start.parents):
        candidate = folder / "npu-port.toml"
        if candidate.is_file():
            return candidate
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _has_tool_table(candidate):
            return candidate
    return None


def _has_tool_table(path: Path) -> bool:
    # Bytes: a pyproject.toml with the table but not valid UTF-8 is reported by read_config_file, not skipped.
    try:
        data = read_source(path)
    except ReadError:
        return False
    return re.search(rb'^\s*\[\s*tool\s*\.\s*(npu-port|"npu-port")\s*[\].]', data, re.M) is not None


def _key_line(text: str, key: str, in_tool_table: bool) -> int:
    """The line where `key` is set; TOML parsers keep no positions, so find it in the text."""
    header = re.compile(r'^\s*\[\s*tool\s*\.\s*"?npu-port"?\s*(\.\s*"?([\w-]+)"?)?\s*\]')
    any_header = re.compile(r"^\s*\[")
    assign = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
    inside = not in_tool_table
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = header.match(line)
        if m:
            if m.group(2) == key:  # [tool.npu-port.per-file-ignores]
                return lineno
            inside = m.group(2) is None
            continue
        if any_header.match(line):
            if not in_tool_table and re.match(rf'^\s*\[\s*"?{re.escape(key)}"?\s*\]', line):
                return lineno
            inside = False if in_tool_table else inside
            continue
        if inside and assign.match(line):
            return lineno
    return 1


def read_config_file(path: Path) -> tuple[dict[str, Any], dict[str, Source]]:
    """Validated values of one file, keyed by the canonical (kebab-case) key, with their lines."""
    import tomllib  # only when a project file is found: most one-file runs have none

    try:
        text = read_text(path, bom=True)  # a BOM, as Windows editors write it, is no error
    except ReadError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except ValueError as exc:  # valid TOML Python cannot hold: an integer of thousands of digits
        raise ConfigError(f"{path}: cannot read: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise ConfigError(f"{path}: cannot read: nested too deeply") from None
    in_tool = path.name == "pyproject.toml"
    table: Any = doc
    if in_tool:
        tool = doc.get("tool")
        table = tool.get("npu-port", {}) if isinstance(tool, dict) else {}
    prefix = "[tool.npu-port] " if in_tool else ""
    if not isinstance(table, dict):  # `"npu-port" = 3` under [tool], or an array of tables
        raise ConfigError(f"{path}:{_key_line(text, 'npu-port', False)}: tool.npu-port must be a table "
                          f"([tool.npu-port]), got {type(table).__name__}")
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        line = _key_line(text, raw_key, in_tool)
        where = f"{path}:{line}"
        spec = KEYS.get(key)
        if spec is None:
            known = ", ".join(KEYS)
            raise ConfigError(f"{where}: {prefix}unknown key {raw_key!r} (known keys: {known})")
        expected = spec.check(value)
        if expected:
            raise ConfigError(f"{where}: {prefix}{raw_key}: expected {expected}, got {value!r}")
        if spec.is_path and isinstance(value, list) and "" in value:
            raise ConfigError(f"{where}: {prefix}{raw_key}: an empty file name")
        if spec.is_path and value:
            value = ([_resolve(path.parent, v) for v in value] if isinstance(value, list)
                     else _resolve(path.parent, value))
        values[key] = value
        sources[key] = Source(where)
    return values, sources


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def load_config(paths: Iterable[Path], cli: Optional[dict[str, Any]] = None,
                config_file: Optional[Path] = None, isolated: bool = False) -> ProjectConfig:
    """Defaults, then the project file, then the command line (`cli`: only the flags actually given)."""
    values = {k: spec.default for k, spec in KEYS.items()}
    sources = {k: Source("default") for k in KEYS}
    path = None if isolated else (config_file or find_config_file(paths))
    root = Path.cwd()
    if path is not None:
        path = Path(os.path.abspath(path))
        file_values, file_sources = read_config_file(path)
        values.update(file_values)
        sources.update(file_sources)
        root = path.parent
    for key, value in (cli or {}).items():
        spec = KEYS[key]
        if spec.is_path and value:
            value = [Path(v) for v in value] if isinstance(value, (list, tuple)) else Path(value)
        values[key] = list(value) if isinstance(value, tuple) else value
        sources[key] = Source("command line")
    return ProjectConfig(values, sources, path, root)

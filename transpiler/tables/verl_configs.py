"""The keys of the Hydra configs a VERL tree packages, read from its YAML and sources as text (never
imported or run): for a release's wheel (tools/release_snapshots.py writes them into the key snapshots)
and for a VERL checkout that `check` is given (its own config is the schema its launchers use).

A config is a top-level YAML file of verl/trainer/config; its keys come from the `_generated_<name>.yaml`
VERL writes from it where the tree has one, else from the file with its Hydra `defaults` composed
(`group@package: option` entries merged in, then the file itself). The entry points are the modules
whose `@hydra.main(config_path=..., config_name=...)` names one of those configs. A section with a
`_target_` is one VERL builds into that dataclass (`omega_conf_to_dataclass`): its fields are recorded
too, as the keys such a section accepts besides the YAML's.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable, Iterable
from typing import Any, Optional

CONFIG_DIR = "verl/trainer/config/"
Reader = Callable[[str], Optional[str]]  # path in the tree -> its text, None when absent


def value_type(value: object) -> str:
    """The type name a key snapshot records for a packaged default."""
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"),
                       (dict, "dict")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def flat_keys(mapping: dict, prefix: str = "") -> dict[str, str]:
    """Dotted key -> type of its default for every key of a nested mapping (dicts are keys too)."""
    out: dict[str, str] = {}
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        out[dotted] = value_type(value)
        if isinstance(value, dict):
            out.update(flat_keys(value, dotted + "."))
    return out


def _load(read: Reader, path: str) -> dict:
    import yaml  # only where a checkout's or a wheel's configs are read, not on every run

    # libyaml's parser where PyYAML has it (the same safe constructor and resolver, so the same values:
    # `check` reads a checkout's configs on every run, and the pure-Python parser was most of that).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(read(path) or "", Loader=loader) or {}
    return data if isinstance(data, dict) else {}


def _merge(into: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _placed(package: str, data: dict) -> dict:
    for part in reversed([p for p in package.split(".") if p and p != "_here_"]):
        data = {part: data}
    return data


def composed(read: Reader, name: str, package: str = "", depth: int = 0) -> dict:
    """Config `name` (relative to CONFIG_DIR, without .yaml) with its `defaults` list merged in."""
    raw = _load(read, CONFIG_DIR + name + ".yaml")
    result: dict = {}
    entries = raw.pop("defaults", None)
    for entry in entries if isinstance(entries, list) and depth < 16 else []:
        if isinstance(entry, dict):
            for group_key, option in entry.items():
                group, _, pkg = str(group_key).partition("@")
                if option is None or group.startswith("override ") or not isinstance(option, str):
                    continue
                sub = (pkg or group.split("/")[-1]).replace("_here_", "")
                _merge(result, _placed(".".join(p for p in (package, sub) if p),
                                       composed(read, f"{group}/{option}", "", depth + 1)))
        elif isinstance(entry, str) and entry != "_self_":
            _merge(result, _placed(package, composed(read, entry, "", depth + 1)))
    _merge(result, _placed(package, raw))
    return result


def _targets(mapping: dict, prefix: str = "") -> dict[str, str]:
    """Dotted section -> its `_target_` (the class VERL builds the section into), for every section that has one."""
    out: dict[str, str] = {}
    target = mapping.get("_target_")
    if isinstance(target, str) and prefix:
        out[prefix.rstrip(".")] = target
    for key, value in mapping.items():
        if isinstance(value, dict):
            out.update(_targets(value, f"{prefix}{key}."))
    return out


def config_keys(read: Reader, files: Iterable[str]) -> tuple[dict[str, dict[str, str]], dict[str, str],
                                                              dict[str, dict[str, str]]]:
    """({config name: {dotted key: type}}, {config name: where its keys came from}, {config name: {section:
    `_target_`}}) for the top-level configs among `files` (paths relative to CONFIG_DIR)."""
    files = sorted(files)
    keys, sources, targets = {}, {}, {}
    for name in sorted(f[:-5] for f in files if "/" not in f and f.endswith(".yaml") and not f.startswith("_")):
        generated = f"_generated_{name}.yaml"
        if generated in files:
            data = _load(read, CONFIG_DIR + generated)
            data.pop("defaults", None)  # Hydra's composition list, not a key
            sources[name] = CONFIG_DIR + generated
        else:
            data = composed(read, name)
            sources[name] = CONFIG_DIR + f"{name}.yaml (defaults composed)"
        keys[name], targets[name] = dict(sorted(flat_keys(data).items())), dict(sorted(_targets(data).items()))
    return keys, sources, targets


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        func = deco.func if isinstance(deco, ast.Call) else deco
        if ast.unparse(func).rsplit(".", 1)[-1] == "dataclass":
            return True
    return False


# Where a class statement may start: a logical line begins with it (a compound statement never follows
# `;` or a colon on its line). Over-inclusive (a `class` in a string matches too), never short.
_CLASS_STATEMENT = re.compile(r"(?:^|(?<=\r))[ \t\f]*class[ \t\f\\]+(\w+)", re.MULTILINE)


def dataclass_fields(read: Reader, python_files: Iterable[str], targets: Iterable[str]) -> dict[str, list[str]]:
    """`_target_` -> the fields of that dataclass, its bases' included, for the targets found among the
    sources (classes are matched by name: a name two modules define gets the fields of both)."""
    own: dict[str, set[str]] = {}
    bases: dict[str, set[str]] = {}
    wanted = {t.rsplit(".", 1)[-1] for t in targets}
    # Only the files that define a wanted class, or a base of one, are parsed: `check` reads a VERL
    # checkout on every run, and parsing each of its sources that mentions `dataclass` was most of that.
    defines: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    for path in sorted(python_files):
        source = read(path) or ""
        if "dataclass" not in source:
            continue
        sources[path] = source
        for name in set(_CLASS_STATEMENT.findall(source)):
            defines.setdefault(name, []).append(path)
    parsed: set[str] = set()
    todo = sorted(wanted)
    while todo:
        for path in defines.get(todo.pop(), ()):
            if path in parsed:
                continue
            parsed.add(path)
            try:
                tree = ast.parse(sources[path])
            except (SyntaxError, ValueError, RecursionError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and _is_dataclass(node):
                    own.setdefault(node.name, set()).update(
                        s.target.id for s in node.body
                        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
                    names = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                    bases.setdefault(node.name, set()).update(names)
                    todo += sorted(names)

    def fields(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        out = set(own.get(name, ()))
        for base in bases.get(name, ()):
            if base not in seen:
                out |= fields(base, seen | {name})
        return out

    return {t: sorted(fields(t.rsplit(".", 1)[-1])) for t in sorted(set(targets))
            if t.rsplit(".", 1)[-1] in wanted and t.rsplit(".", 1)[-1] in own}


def hydra_config_name(source: str, path: str) -> Optional[str]:
    """The config an `@hydra.main(config_path=..., config_name=...)` in `path` composes, when its
    config_path is VERL's config folder."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "hydra.main"):
            continue
        kw: dict[str, Any] = {k.arg: k.value.value for k in node.keywords
                              if k.arg and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
        folder = posixpath.normpath(posixpath.join(posixpath.dirname(path), kw.get("config_path", "")))
        name = str(kw.get("config_name", "")).removesuffix(".yaml")
        if name and folder + "/" == CONFIG_DIR:
            return name
    return None


def entry_configs(read: Reader, python_files: Iterable[str], configs: Iterable[str]) -> dict[str, str]:
    """{entry-point module: config name} for the modules among `python_files` that compose one of `configs`."""
    known = set(configs)
    out = {}
    for path in sorted(python_files):
        source = read(path) or ""
        if "hydra.main" not in source:
            continue
        name = hydra_config_name(source, path)
        if name in known:
            out[path[:-3].replace("/", ".").removesuffix(".__init__")] = name
    return out


def packaged(paths: Iterable[str], read: Reader) -> dict:
    """The key-snapshot fields of a VERL tree whose files are `paths` (posix, relative to its root)."""
    paths = list(paths)
    files = sorted(p[len(CONFIG_DIR):] for p in paths if p.startswith(CONFIG_DIR) and p.endswith(".yaml"))
    keys, sources, targets = config_keys(read, files)
    python = [p for p in paths if p.startswith("verl/") and p.endswith(".py")]
    used = {t for by_section in targets.values() for t in by_section.values()}
    return {"config_keys": keys, "config_sources": sources, "config_files": files,
            "entry_configs": entry_configs(read, python, keys), "config_targets": targets,
            "dataclass_fields": dataclass_fields(read, python, used)}

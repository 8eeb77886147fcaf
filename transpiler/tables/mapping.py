"""Loads the YAML mapping tables of a target (codemods/data/<target>/<table>.yaml).

Tables are data reviewed like code; each row names a CUDA-side form, its target form or why there
is none. A new accelerator is a new folder of tables, not new code.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml


class MappingError(ValueError):
    pass


def available_targets() -> list[str]:
    root = resources.files("npu_port.codemods") / "data"
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "api")))


@cache
def load_table(target: str, name: str) -> Any:
    path = resources.files("npu_port.codemods") / "data" / target / f"{name}.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MappingError(f"target {target!r} has no table {name!r} ({path})") from None
    # libyaml's loader where it is installed: the same data, about ten times faster to load (the
    # tables are read at the start of every run and of every worker).
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))

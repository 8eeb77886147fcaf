"""What the converted project itself defines: a fork of a framework (a VERL fork, an old VERL release) may lack
a helper module that upstream has, and a name the output imports from it must exist in the tree being
converted, not only in the upstream snapshot.

Read from the project's files (never imported or run): a module is found beside the package the converted
file belongs to, and a name counts as defined where that module binds it at its top level (a def, a class,
an assignment or an import).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Optional

from npu_port.transpiler.core.files import ReadError, read_text

# A top-level binding of a name: `def name`, `class name`, `name =`, `name: T =`, or an import that binds it.
_BINDING = r"^(?:(?:async\s+)?def\s+{0}\b|class\s+{0}\b|{0}\s*[:=]|(?:from\s+\S+\s+)?import\b[^\n#]*\b{0}\b)"


@lru_cache(maxsize=64)
def _package_root(folder: str, top: str) -> Optional[str]:
    """The folder holding the outermost package named `top` that `folder` lies in, or None."""
    found = None
    here = folder
    while True:
        if os.path.basename(here) == top and os.path.isfile(os.path.join(here, "__init__.py")):
            found = os.path.dirname(here)
        parent = os.path.dirname(here)
        if parent == here:
            return found
        here = parent


@lru_cache(maxsize=64)
def _module_text(root: str, module: str) -> Optional[str]:
    base = os.path.join(root, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        try:
            return read_text(candidate)  # type: ignore[arg-type]
        except (ReadError, OSError):
            continue
    return None


def project_defines(path: str, module: str, names: tuple[str, ...]) -> Optional[bool]:
    """Whether the project that the file `path` belongs to defines `module` with every one of `names`.
    None where the file is not part of a package named like the module's top (`verl` for verl.utils.device):
    the project then uses the installed framework, whose version decides (its pin)."""
    if not path or path.startswith("<"):
        return None
    root = _package_root(os.path.dirname(os.path.abspath(path)), module.split(".", 1)[0])
    if root is None:
        return None
    text = _module_text(root, module)
    if text is None:
        return False
    return all(re.search(_BINDING.format(re.escape(name)), text, re.M) for name in names)

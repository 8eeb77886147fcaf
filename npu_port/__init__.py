"""npu-port's one import namespace: `npu_port.transpiler` (the engine and the CLI), `npu_port.codemods`
(the rules and their data) and `npu_port.skeletons` (the generator's templates).

In the wheel the three live inside this package. In a checkout they are the top-level folders beside
this one (the build maps them in, see pyproject.toml); the path below lets a checkout import the same
names without an install, as `python -m pytest` there does.
"""

import os as _os

_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "transpiler")) \
        and _os.path.isfile(_os.path.join(_checkout, "transpiler", "cli.py")):
    __path__.append(_checkout)  # type: ignore[name-defined]  # noqa: F821

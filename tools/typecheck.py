"""Type-check npu_port as it installs: mypy cannot follow the build's folder mapping (the checkout's
transpiler/, codemods/ and skeletons/ become npu_port.*), so the package is staged with links in a
temporary folder and checked there with the settings of pyproject.toml.

    python tools/typecheck.py          # exit status of mypy
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="npu-port-typecheck-") as tmp:
        package = Path(tmp) / "npu_port"
        package.mkdir()
        shutil.copy(ROOT / "npu_port" / "__init__.py", package / "__init__.py")
        for folder in ("transpiler", "codemods", "skeletons"):
            os.symlink(ROOT / folder, package / folder)
        proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                               "-p", "npu_port"], cwd=tmp)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())

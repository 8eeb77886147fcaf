"""The --keep-cuda outputs of the Python fixtures still run where their inputs run: on this CPU-only
machine, with the CPU build of torch and no torch_npu. Whatever part of a fixture runs here (importing it,
and its `__main__` block) must run the same after conversion: the CUDA/CPU path still works.

Needs torch (`pip install 'npu-port[cpu-torch]'`, the CPU wheel); skipped without it. Our own fixtures
run in one child process, each in a fresh namespace; the tool itself never runs the code it converts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from fixture_cases import all_cases

pytest.importorskip("torch")

_RUNNER = textwrap.dedent("""
    import io, json, os, runpy, sys, contextlib, warnings
    warnings.simplefilter("ignore")
    out = {}
    for path in json.loads(sys.argv[1]):
        for run_name in ("fixture", "__main__"):
            env = dict(os.environ)
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    runpy.run_path(path, run_name=run_name)
                result = "ok"
            except BaseException as exc:  # SystemExit too: a fixture's own exit is an outcome
                result = f"{type(exc).__name__}: {exc}"[:300]
            finally:
                os.environ.clear()
                os.environ.update(env)
            out[f"{path}::{run_name}"] = result
    print(json.dumps(out))
""")


def _run(paths: list[str], tmp_path) -> dict[str, str]:
    proc = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(paths)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                          "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_keep_cuda_outputs_run_where_their_inputs_run(tmp_path):
    cases = [c for c in all_cases() if c.input.suffix == ".py" and c.keep_cuda_expected.exists()]
    assert cases, "no --keep-cuda Python fixture found"
    paths = [str(p) for c in cases for p in (c.input, c.keep_cuda_expected)]
    results = _run(paths, tmp_path)
    ran = broke = 0
    problems = []
    for case in cases:
        for run_name in ("fixture", "__main__"):
            before = results[f"{case.input}::{run_name}"]
            after = results[f"{case.keep_cuda_expected}::{run_name}"]
            if before == "ok":
                ran += 1
                if after != "ok":
                    broke += 1
                    problems.append(f"{case.id} ({run_name}): {after}")
    assert not problems, "\n".join(problems)
    assert ran, "no fixture input runs on this machine: the test would prove nothing"

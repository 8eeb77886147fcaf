"""Hostile input through every command that reads it: a clear one-line error (or success) and an exit code of
the documented set (README 'Exit codes': 0, 1, 2, and 3 for `convert --check`); never a traceback, a crash
of the process or a hang.

Each command's cases run in one child process, `npu-port` invoked in it as a user types it (click's
CliRunner, so an exception no command turned into a message fails the case even where the console
script's last-resort handler would have hidden it). A crash (LibCST's native parser kills the process on
deep nesting) or a hang shows as the child's death or its timeout, after the cases it finished.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXIT_CODES = {0, 1, 2, 3}
pytestmark = pytest.mark.slow  # each test runs a batch of cases in a child process
BATCH_TIMEOUT_S = 600  # a hang detector only: the slowest batch takes seconds

BILLION_LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}' if prev else 'lol'] * 9)}]\n"
    for prev, name in zip([None, *"abcdefgh"], "abcdefghi"))


def python_cases() -> dict[str, bytes]:
    deep = 10_000
    return {
        "empty.py": b"",
        "garbage.py": bytes(range(256)) * 4,
        "nul_bytes.py": b"import torch\nx = 1\x00\ny = torch.cuda\n",
        "invalid_utf8.py": b"import torch\ns = '\xff\xfe cuda'\n",
        "latin1_cookie.py": "# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\n"
                            "x = torch.zeros(1).cuda()\n".encode("latin-1"),
        "unknown_cookie.py": b"# -*- coding: no-such-codec -*-\nimport torch\nx = torch.zeros(1).cuda()\n",
        "bom.py": b"\xef\xbb\xbfimport torch\nx = torch.zeros(1).cuda()\n",
        "bom_with_latin1_cookie.py": b"\xef\xbb\xbf# coding: latin-1\nimport torch\nx = torch.cuda\n",
        "utf16.py": "import torch\nx = torch.cuda\n".encode("utf-16"),
        "deep_parentheses.py": b"import torch\nx = " + b"(" * deep + b"torch.cuda" + b")" * deep + b"\n",
        "deep_lists.py": b"x = " + b"[" * deep + b"]" * deep + b"\n",
        "deep_dicts.py": b"x = " + b"{1:" * deep + b"1" + b"}" * deep + b"\n",
        "deep_unclosed.py": b"import torch\nx = torch.cuda\ny = " + b"(" * deep + b"\n",
        "deep_unary.py": b"import torch\nx = " + b"-" * 50_000 + b"torch.cuda.device_count()\n",
        "deep_not.py": b"import torch\nx = " + b"not " * 30_000 + b"torch.cuda\n",
        "deep_attribute_chain.py": b"import torch\nx = torch" + b".a" * 50_000 + b".cuda()\n",
        "deep_calls.py": b"import torch\nx = torch.cuda" + b"()" * 50_000 + b"\n",
        "long_operator_chain.py": b"import torch\nx = torch.cuda.device_count()" + b" + 1" * 100_000 + b"\n",
        "deep_lambdas.py": b"import torch\nf = " + b"lambda: " * 20_000 + b"torch.cuda\n",
        "deep_indentation.py": b"import torch\n" + b"".join(b" " * i + b"if x:\n" for i in range(200))
                               + b" " * 200 + b"torch.cuda.synchronize()\n",
        "deep_fstrings.py": b"import torch\nx = " + b"f'{" * 200 + b"torch.cuda" + b"}'" * 200 + b"\n",
        "syntax_error_then_deep.py": b"import torch\ndef f(:\n    x = " + b"-" * 50_000 + b"torch.cuda\n",
        "huge_line.py": b"import torch\nx = '" + b"a" * 1_500_000 + b"'\ny = torch.cuda.current_device()\n",
        "python2_print.py": b"import torch\nprint 'cuda', torch.cuda.is_available()\n",
        "python2_except.py": b"import torch\ntry:\n    pass\nexcept Exception, e:\n    torch.cuda.synchronize()\n",
        "missing_colon.py": b"import torch\nx = 1\ndef f()\n    torch.cuda.synchronize()\n",
        "bad_indent.py": b"import torch\ndef f():\n  x = 1\n    torch.cuda()\n",
        "unclosed_bracket.py": b"import torch\nx = (torch.cuda\n",
        "unterminated_string.py": b"import torch\nx = 'cuda\n",
        "tabs_and_spaces.py": b"import torch\nif x:\n\tif y:\n        torch.cuda.synchronize()\n",
        "cr_only.py": b"import torch\rx = torch.zeros(1).cuda()\r",
        "mixed_line_ends.py": b"import torch\r\nx = 1\ry = torch.cuda\n",
        "form_feeds.py": b"\x0cimport torch\n\x0cx = torch.cuda\n",
        "surrogate_bytes.py": b"import torch\nx = '\xed\xa0\x80'\ny = torch.cuda\n",
        "million_char_name.py": b"import torch\n" + b"a" * 1_000_000 + b" = torch.cuda\n",
        "many_statements.py": b"import torch\n" + b"x = torch.cuda.current_device()\n" * 300,
        "backslash_at_eof.py": b"import torch\nx = torch.cuda \\",
        "match_statement.py": b"import torch\nmatch x:\n    case {'a': [1, *r]}:\n        torch.cuda.synchronize()\n",
        "many_decorators.py": b"import torch\n" + b"@d\n" * 1000 + b"def f(): torch.cuda.synchronize()\n",
        "deep_classes.py": b"import torch\n" + b"".join(b"    " * i + b"class C:\n" for i in range(99))
                           + b"    " * 99 + b"x = torch.cuda\n",
        "python312_syntax.py": b"import torch\ntype Alias = list[int]\ndef f[T](x: T) -> T:\n    return torch.cuda\n",
        "comment_only.py": b"# torch.cuda everywhere\n",
    }


def spec_cases() -> dict[str, bytes]:
    deep = 10_000
    return {
        "null_key.yaml": b"~: 1\nmodel-path: m\n",
        "null_word_key.yaml": b"null: 1\n",
        "int_key.yaml": b"1: 2\n",
        "list_key.yaml": b"? [a, b]\n: 1\n",
        "null_key.json": b'{"model-path": "m", "x": null}',
        "deep.json": b"[" * deep + b"]" * deep,
        "deep_objects.json": b'{"a":' * deep + b"1" + b"}" * deep,
        "deep_flow.yaml": b"[" * deep + b"]" * deep,
        "deep_block.yaml": "".join(" " * i + "a:\n" for i in range(3000)).encode(),
        "billion_laughs.yaml": BILLION_LAUGHS.encode(),
        "billion_laughs_value.yaml": (BILLION_LAUGHS + "model-path: *i\n").encode(),
        "billion_laughs_kind.yaml": (BILLION_LAUGHS + "kind: *i\n").encode(),
        "list_root.yaml": b"- 1\n- 2\n",
        "scalar_root.json": b"3",
        "string_root.yaml": b"hello",
        "wrong_types.yaml": b"model-path: [1, 2]\ntensor-parallel-size: abc\ntemperature: .nan\n",
        "nested_value.yaml": b"model-path: " + b"[" * 80 + b"]" * 80 + b"\n",
        "python_tag.yaml": b"model-path: !!python/object/apply:os.system ['echo hi']\n",
        "binary.yaml": b"\x00\xff\xfe",
        "invalid_utf8.json": b'{"model-path": "\xff"}',
        "bom.json": b'\xef\xbb\xbf{"model-path": "m"}',
        "empty.json": b"",
        "huge_int.yaml": b"tensor-parallel-size: 1" + b"0" * 5000 + b"\n",
    }


def config_cases() -> dict[str, tuple[str, bytes]]:
    """name -> (file name, content) of a project configuration file next to the checked script."""
    deep = 10_000
    return {
        "empty": ("npu-port.toml", b""),
        "binary": ("npu-port.toml", b"\x00\xff\xfe"),
        "invalid_utf8": ("npu-port.toml", b'target = "\xff"\n'),
        "bom": ("npu-port.toml", b'\xef\xbb\xbftarget = "ascend"\n'),
        "invalid_toml": ("npu-port.toml", b"target = \n"),
        "deep_arrays": ("npu-port.toml", b"select = " + b"[" * deep + b"]" * deep + b"\n"),
        "deep_inline_tables": ("npu-port.toml", b"x = " + b"{a=" * deep + b"1" + b"}" * deep + b"\n"),
        "huge_int": ("npu-port.toml", b"target = " + b"1" * 5000 + b"\n"),
        "wrong_types": ("npu-port.toml", b'select = "abc"\nextras = 1\n'),
        "unknown_key": ("npu-port.toml", b"foo = 1\n"),
        "empty_rules_name": ("npu-port.toml", b'rules = [""]\n'),
        "missing_runtime_env": ("npu-port.toml", b'runtime-env = "no-such.yaml"\n'),
        "deep_runtime_env": ("npu-port.toml", b'runtime-env = "deep.yaml"\n'),
        "billion_laughs_runtime_env": ("npu-port.toml", b'runtime-env = "laughs.yaml"\n'),
        "pyproject_invalid_utf8": ("pyproject.toml", b'[tool.npu-port]\ntarget = "\xff"\n'),
        "pyproject_deep": ("pyproject.toml", b"[tool.npu-port]\nselect = " + b"[" * deep + b"]" * deep + b"\n"),
        "pyproject_wrong_types": ("pyproject.toml", b"[tool.npu-port]\nper-file-ignores = 3\nstrict = []\n"),
        "pyproject_not_a_table": ("pyproject.toml", b'[tool]\n"npu-port" = 3\n[tool.npu-port.x]\n'),
        "pyproject_array_of_tables": ("pyproject.toml", b'[[tool.npu-port]]\ntarget = "ascend"\n'),
        "pyproject_tool_not_a_table": ("pyproject.toml", b"tool = 1\n"),
    }


# Runs in the child: every case of one batch, one JSON line each, flushed, so that a crash or a hang
# still tells which cases passed. A file with a main guard: convert's worker processes import it.
DRIVER = r"""
import json, sys

from click.testing import CliRunner

from npu_port.transpiler.cli import cli


def main():
    for case in json.load(open(sys.argv[1])):
        stdin = bytes.fromhex(case["stdin"]) if case["stdin"] is not None else None
        print(json.dumps({"name": case["name"], "started": True}), flush=True)
        result = CliRunner().invoke(cli, case["args"], input=stdin)
        exc = result.exception
        escaped = None if exc is None or isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"
        print(json.dumps({"name": case["name"], "code": result.exit_code, "stderr": result.stderr[-3000:],
                          "stdout": result.stdout[:2000] + result.stdout[-2000:], "escaped": escaped}),
              flush=True)


if __name__ == "__main__":
    main()
"""


def _run_batch(tmp_path: Path, label: str, cases: list[dict]) -> list[tuple[dict, dict]]:
    spec = tmp_path / f"{label}.cases.json"
    spec.write_text(json.dumps(cases))
    driver = tmp_path / "hostile_driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("NPU_PORT_TRACEBACK", None)
    try:
        proc = subprocess.run([sys.executable, str(driver), str(spec)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=BATCH_TIMEOUT_S)
        stdout, stderr, returncode = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        def text(out):
            return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")
        stdout, stderr, returncode = text(exc.stdout), text(exc.stderr), "timeout"
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    done = {r["name"]: r for r in lines if "code" in r}
    started = [r["name"] for r in lines if r.get("started")]
    unfinished = [n for n in started if n not in done]
    assert returncode == 0 and not unfinished, (
        f"{label}: the process ended ({returncode}) during {unfinished or 'start-up'}; stderr: {stderr[-2000:]}")
    return [(case, done[case["name"]]) for case in cases]


def _assert_clean(label: str, case: dict, result: dict, *mentions: str) -> None:
    """No escaped exception, no traceback, a documented exit code; a failure says why in short lines
    that name the input (on stderr, or on stdout for `check`, whose findings are its report)."""
    name, stderr = case["name"], result["stderr"]
    where = f"{label} {name}: exit {result['code']}, stderr:\n{stderr}"
    assert result["escaped"] is None, f"{label} {name}: {result['escaped']} escaped the command"
    assert result["code"] in EXIT_CODES, where
    assert "Traceback" not in stderr and "internal error" not in stderr, where
    if result["code"] != 0:
        said = stderr + (result["stdout"] if case["args"][0] == "check" else "")
        lines = [line for line in said.splitlines() if line.strip()]
        assert lines, f"{label} {name}: exit {result['code']} without a word"
        assert any(m in line for line in lines for m in mentions), f"{where}\n(no line names {mentions})"
        assert all(len(line) < 2000 for line in stderr.splitlines()), where


def _case(name: str, args: list[str], stdin: bytes | None = None) -> dict:
    return {"name": name, "args": args, "stdin": stdin.hex() if stdin is not None else None}


def _python_inputs(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "inputs"
    folder.mkdir()
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("def helper():\n    return 1\n")
    paths = {}
    for name, data in python_cases().items():
        paths[name] = folder / name
        paths[name].write_bytes(data)
    (folder / "directory.py").mkdir()
    paths["directory.py"] = folder / "directory.py"
    paths["missing.py"] = folder / "missing.py"
    os.symlink("loop.py", folder / "loop.py")
    paths["loop.py"] = folder / "loop.py"
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "fifo.py")
        paths["fifo.py"] = folder / "fifo.py"
    return paths


COMMANDS = {
    "pipeline": lambda p, out: ["pipeline", str(p), "--strip", "proj", "--path", str(p.parents[1]),
                                "-o", str(out)],
    "standalone": lambda p, out: ["standalone", str(p), "--strip", "proj", "--path", str(p.parents[1]),
                                  "--convert", "-o", str(out)],
    "weave": lambda p, out: ["weave", str(p), "-o", str(out)],
    "check": lambda p, out: ["check", str(p), "--isolated"],
}
# `convert FILE` parses in isolated worker processes (tests/test_bad_input.py); `convert -` parses here.


@pytest.mark.parametrize("command", sorted(COMMANDS) + ["convert-stdin"])
def test_hostile_python_files(tmp_path, command):
    paths = _python_inputs(tmp_path)
    assert len(paths) >= 40
    cases = []
    for name, path in paths.items():
        if command == "convert-stdin":
            if path.is_file() and not path.is_symlink():
                cases.append(_case(name, ["convert", "-", "--isolated"], path.read_bytes()))
            continue
        cases.append(_case(name, COMMANDS[command](path, tmp_path / "out" / command / name)))
    for case, result in _run_batch(tmp_path, command, cases):
        _assert_clean(command, case, result, "<stdin>" if command == "convert-stdin" else case["name"])


def test_hostile_specs_for_generate_and_weave(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("def main():\n    pass\n\n\nif __name__ == '__main__':\n    main()\n")
    folder = tmp_path / "specs"
    folder.mkdir()
    names = []
    for name, data in spec_cases().items():
        (folder / name).write_bytes(data)
        names.append(name)
    (folder / "directory.yaml").mkdir()
    names += ["directory.yaml", "missing.yaml"]
    cases = []
    for name in names:
        spec = str(folder / name)
        cases.append(_case(f"generate {name}", ["generate", "vllm-infer", "--from", spec, "-o",
                                                str(tmp_path / "out" / f"{name}.py"), "--force"]))
        cases.append(_case(f"show-options {name}", ["generate", "vllm-infer", "--from", spec, "--show-options"]))
        cases.append(_case(f"weave {name}", ["weave", str(script), "--from", spec, "-o",
                                             str(tmp_path / "out" / f"woven-{name}.py")]))
    for case, result in _run_batch(tmp_path, "specs", cases):
        # Values are named by option (the command line may have set them too); the rest by file.
        _assert_clean("spec", case, result, case["name"].split()[1], "invalid options:")
        if "billion" in case["name"]:  # refused without being expanded
            assert result["code"] == 2 and "more than" in result["stderr"], result


def test_hostile_config_files(tmp_path):
    cases = []
    for name, (file_name, data) in config_cases().items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / file_name).write_bytes(data)
        (folder / "deep.yaml").write_text("[" * 10_000 + "]" * 10_000)
        (folder / "laughs.yaml").write_text(BILLION_LAUGHS + "env_vars: *i\n")
        script = folder / "a.py"
        script.write_text("import torch\nx = torch.zeros(1).cuda()\n")
        cases.append(_case(f"config {name}", ["config", str(script)]))
        cases.append(_case(f"config --config {name}", ["config", "--config", str(folder / file_name), str(script)]))
        cases.append(_case(f"check {name}", ["check", str(script)]))
        cases.append(_case(f"convert {name}", ["convert", str(script), "--out", str(tmp_path / "out" / name)]))
    for case, result in _run_batch(tmp_path, "config", cases):
        _assert_clean("config", case, result, case["name"].split()[-1])
        if result["code"] == 2:  # a bad configuration: the file (and where known, the line) is named
            assert case["name"].split()[-1] in result["stderr"]


def test_unwritable_outputs(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.zeros(1).cuda()\n\n\ndef main():\n    pass\n\n\n"
                      "if __name__ == '__main__':\n    main()\n")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "a_file").write_text("not a folder\n")
    targets = {"parent_is_a_file": tmp_path / "a_file" / "out.py",
               "grandparent_is_a_file": tmp_path / "a_file" / "sub" / "out.py"}
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        targets["no_permission"] = locked / "out.py"
    cases = []
    for why, dest in targets.items():
        d = str(dest)
        for label, args in {
            "convert": ["convert", str(script), "--out", d],
            "convert --report": ["convert", str(script), "--report", d],
            "weave": ["weave", str(script), "-o", d],
            "standalone": ["standalone", str(script), "--strip", "proj", "-o", d],
            "pipeline": ["pipeline", str(script), "--strip", "proj", "-o", d],
            "pipeline --report": ["pipeline", str(script), "--strip", "proj", "-o", str(tmp_path / "p.py"),
                                  "--report", d],
            "generate": ["generate", "vllm-infer", "-o", d],
            "generate --config-out": ["generate", "msrl-train", "-o", str(tmp_path / "launch.sh"),
                                      "--config-out", str(dest.with_suffix(".yaml")), "--force"],
            "check -o": ["check", str(script), "--isolated", "-o", d],
            "check --summary": ["check", str(script), "--isolated", "--summary", str(dest.with_suffix(".md"))],
        }.items():
            cases.append(_case(f"{label} {why}", args))
    # Missing folders are made, as for any compiler's -o.
    cases.append(_case("weave missing_folders", ["weave", str(script), "-o", str(tmp_path / "new" / "dir" / "w.py")]))
    for case, result in _run_batch(tmp_path, "outputs", cases):
        # convert names the input whose output failed (the output is its mirror under --out).
        named = ("a_file", "cannot write the output") if case["args"][0] == "convert" else ("a_file",)
        _assert_clean("output", case, result, *(named if "file" in case["name"] else ("out",)))
        if "missing_folders" in case["name"]:
            assert result["code"] == 0 and (tmp_path / "new" / "dir" / "w.py").is_file()
        else:
            assert result["code"] in (1, 2), (case["name"], result)

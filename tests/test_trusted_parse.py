"""core/trusted_parse.py: LibCST's parse without its node validation gives the validated parse's tree,
errors and exceptions, and turns validation off for nothing but the parse."""

from __future__ import annotations

import threading
from pathlib import Path

import libcst as cst
import pytest

from npu_port.transpiler.core import python_source, trusted_parse

ROOT = Path(__file__).resolve().parent.parent
# The fixtures' Python inputs: not the expected outputs nor the generated skeletons, which are outputs
# (the tool parses them only to check idempotence) and would triple the cost of the test.
FIXTURES = sorted(p for p in (ROOT / "fixtures").rglob("*.py")
                  if ".expected." not in p.name and "expected" not in p.relative_to(ROOT).parts
                  and "skeletons" not in p.relative_to(ROOT).parts)

ODD_SOURCES = {
    "bom": b"\xef\xbb\xbfimport torch\nx = torch.cuda.is_available()\n",
    "crlf": b"import torch\r\nif x:\r\n    y = 1\r\n",
    "tabs": b"def f():\n\tif x:\n\t\treturn 1\n\treturn 2\n",
    "form feed": b"import os\n\x0c\ndef f():\n    \x0cpass\n",
    "continuations": b"x = 1 + \\\n    2\nif a and \\\n   b:\n    pass\n",
    "no final newline": b"import torch\nx = torch.device('cuda')",
    "no final newline, comment": b"x = 1\n# done",
    "decorators with comments": b"@a  # one\n# between\n@b(\n    1,  # arg\n)\ndef f(): ...\n",
    "nested f-strings": b"x = f\"{a!r:>{w}} {f'{b}'} {c=}\"\n",
    "walrus": b"if (n := len(a)) > 10:\n    print(f'{n}')\n",
    "match": b"match cmd:\n    case ['go', d] if d:\n        pass\n    case {'k': v, **rest}:\n        pass\n"
             b"    case Point(x=0) | None:\n        pass\n    case _:\n        pass\n",
    "async": b"async def f():\n    async with a as b:\n        async for c in b:\n            await c\n"
             b"    return [x async for x in y]\n",
    "coding line": b"# -*- coding: latin-1 -*-\ns = '\xe9'\n",
    "semicolons and tight keywords": b"x=1if y else(2);del(z)\nassert(x),'m'\nraise(E)from(e)\n",
    "empty": b"",
    "only comments": b"# a\n\n# b\n",
    "str source": "def f(x: int = 1, /, *a, k, **kw) -> None:\n    return (yield)\n",
}

SYNTAX_ERRORS = [b"def f(:\n    pass\n", b"x = (1,\n", b"if x\n    y\n", b"  x = 1\n", b"s = 'open\n",
                 b"import a.b as(c)\n"]


def _outcome(parse, source: bytes | str):
    try:
        return parse(source)
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return exc


def _difference(source: bytes | str) -> str | None:
    """Where trusted_parse.parse_module departs from cst.parse_module on `source`; None if nowhere."""
    validated = _outcome(cst.parse_module, source)
    trusted = _outcome(trusted_parse.parse_module, source)
    if isinstance(validated, Exception) or isinstance(trusted, Exception):
        if type(validated) is not type(trusted) or str(validated) != str(trusted):
            return f"{validated!r} against {trusted!r}"
        return None
    if not trusted.deep_equals(validated):
        return "trees differ"
    printed = trusted.code if isinstance(source, str) else trusted.bytes
    if printed != source:
        return "no byte-for-byte round trip"
    return None


def _validates() -> bool:
    try:
        cst.SimpleWhitespace("not whitespace")
    except cst.CSTValidationError:
        return True
    return False


def test_the_installed_libcst_has_the_hook():
    # Without it every parse would silently be the slow one; a libcst where this fails needs a look.
    assert trusted_parse._VALIDATE is not None


def test_every_fixture_parses_to_the_validated_tree_and_round_trips():
    assert len(FIXTURES) > 100
    differences = [f"{p.relative_to(ROOT)}: {d}" for p in FIXTURES if (d := _difference(p.read_bytes()))]
    assert differences == []
    assert _validates()


@pytest.mark.parametrize("name", ODD_SOURCES)
def test_odd_sources_parse_to_the_validated_tree_and_round_trip(name):
    assert _difference(ODD_SOURCES[name]) is None
    assert _validates()


@pytest.mark.parametrize("source", SYNTAX_ERRORS)
def test_syntax_errors_are_raised_as_before_and_validation_comes_back(source):
    assert _difference(source) is None
    with pytest.raises(cst.ParserSyntaxError):
        trusted_parse.parse_module(source)
    assert cst.CSTNode.__post_init__ is trusted_parse._VALIDATE
    assert _validates()


def test_the_engine_reports_a_syntax_error_the_same_way():
    source = b"def f(:\n    pass\n"
    with pytest.raises(cst.ParserSyntaxError) as validated:
        cst.parse_module(source)
    with pytest.raises(python_source.SourceError) as engine:
        python_source.parse(source, "f.py")
    assert str(engine.value) == python_source.syntax_error_message(source, validated.value)


def test_nodes_built_after_a_parse_are_validated():
    module = trusted_parse.parse_module(b"x = 1\n")
    assert cst.CSTNode.__post_init__ is trusted_parse._VALIDATE
    with pytest.raises(cst.CSTValidationError):
        module.body[0].with_changes(leading_lines=[cst.EmptyLine(whitespace=cst.SimpleWhitespace("x"))])
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_inside_a_parse_only_the_parsing_thread_skips_validation(monkeypatch):
    real_parse = cst.parse_module
    seen: dict[str, object] = {}

    def other_thread():
        seen["other thread validates"] = _validates()

    def parse_with_probes(source):
        # Runs where LibCST's parser would: inside the trusted window of the outer call.
        seen["parsing thread validates"] = _validates()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        if source == b"outer\n":
            seen["nested"] = trusted_parse.parse_module(b"inner\n")
            seen["parsing thread validates after the nested parse"] = _validates()
        return real_parse(source.replace(b"outer", b"x = 1").replace(b"inner", b"y = 2"))

    monkeypatch.setattr(cst, "parse_module", parse_with_probes)
    module = trusted_parse.parse_module(b"outer\n")
    monkeypatch.undo()

    assert module.code == "x = 1\n" and seen["nested"].code == "y = 2\n"
    assert seen["parsing thread validates"] is False
    assert seen["other thread validates"] is True
    assert seen["parsing thread validates after the nested parse"] is False
    assert cst.CSTNode.__post_init__ is trusted_parse._VALIDATE and trusted_parse._depth == {}
    assert _validates()


def test_an_exception_inside_the_parse_restores_validation(monkeypatch):
    def failing(source):
        raise RecursionError("too deep")

    monkeypatch.setattr(cst, "parse_module", failing)
    with pytest.raises(RecursionError):
        trusted_parse.parse_module(b"x = 1\n")
    monkeypatch.undo()
    assert cst.CSTNode.__post_init__ is trusted_parse._VALIDATE and trusted_parse._depth == {}
    assert _validates()


def test_a_libcst_without_the_hook_gets_a_plain_parse(monkeypatch):
    monkeypatch.setattr(trusted_parse, "_VALIDATE", None)
    hook = cst.CSTNode.__post_init__
    assert trusted_parse.parse_module(b"x = 1\n").code == "x = 1\n"
    assert cst.CSTNode.__post_init__ is hook


def test_a_hook_that_does_more_than_validate_is_left_alone(monkeypatch):
    def post_init_with_more(self):
        self._validate()
        self._cache = None

    monkeypatch.setattr(cst.CSTNode, "__post_init__", post_init_with_more)
    assert trusted_parse._validating_hook() is None
    monkeypatch.delattr(cst.CSTNode, "__post_init__")
    assert trusted_parse._validating_hook() is None
    monkeypatch.undo()
    assert trusted_parse._validating_hook() is trusted_parse._VALIDATE

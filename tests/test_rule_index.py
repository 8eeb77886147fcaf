"""The rule index (core/rule_index.py, read by core/rule_catalog.py): the registry's metadata of every rule
without importing it, so that a run imports only the rules its files' triggers call for.
tests/test_docs_current.py holds the checked-in file current; this holds what it says and how it is used."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest

from npu_port.transpiler.core import registry, rule_catalog
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.rule_catalog import RuleSpec, index_source
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def _index_module(text: str) -> types.ModuleType:
    module = types.ModuleType("npu_port.transpiler.core.rule_index")
    exec(compile(text, "rule_index.py", "exec"), module.__dict__)
    return module


def test_the_index_says_what_each_rule_class_says():
    rules = registry.all_rules()
    module = _index_module(index_source(rules))
    assert module.DIGEST == rule_catalog.source_digest()
    specs = {row["ID"]: RuleSpec(**row) for row in module.RULES}
    assert list(specs) == list(rules)
    for rule_id, rule in rules.items():
        assert specs[rule_id] == RuleSpec.of(rule), rule_id
        assert specs[rule_id].load() is rule
        assert (specs[rule_id].description(), specs[rule_id].summary()) == (rule.description(), rule.summary())


@pytest.fixture
def fresh_index(monkeypatch):
    """The index as it would be generated now, installed: the tests do not depend on the checked-in one."""
    module = _index_module(index_source(registry.all_rules()))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    import npu_port.transpiler.core as core

    monkeypatch.setattr(core, "rule_index", module, raising=False)
    rule_catalog.indexed.cache_clear()
    registry._IMPORT_ALL.cache_clear()  # imported rules are what the specs follow: as if none were yet
    yield module
    rule_catalog.indexed.cache_clear()
    registry._IMPORT_ALL.cache_clear()


def test_specs_come_from_the_index_without_their_classes(fresh_index):
    specs = registry.rule_specs()
    assert list(specs) == list(registry.all_rules())
    assert all(spec.loaded is None for spec in specs.values())  # nothing imported for them yet


def test_an_index_of_other_sources_is_not_used(fresh_index, monkeypatch):
    monkeypatch.setattr(rule_catalog, "source_digest", lambda: "0" * 32)  # a rule edited since
    rule_catalog.indexed.cache_clear()
    assert rule_catalog.indexed() is None
    specs = registry.rule_specs()
    assert list(specs) == list(registry.all_rules())
    assert all(spec.loaded is registry.all_rules()[i] for i, spec in specs.items())


class _ExtraRule(PythonRule):
    """A rule only this test knows."""

    ID = "test-extra-rule"
    SAFETY = "report-only"
    TRIGGERS = ("EXTRA_HERE",)


def test_a_replaced_all_rules_is_what_the_specs_follow(fresh_index, monkeypatch):
    real = registry.all_rules()
    monkeypatch.setattr(registry, "all_rules", lambda: {**real, _ExtraRule.ID: _ExtraRule})
    assert registry.rule_specs()[_ExtraRule.ID].load() is _ExtraRule
    assert [s.ID for s in registry.select_specs([_ExtraRule.ID])] == [_ExtraRule.ID]


def test_rules_added_to_the_imported_ones_are_heard(fresh_index, monkeypatch):
    monkeypatch.setitem(registry.all_rules(), _ExtraRule.ID, _ExtraRule)  # as tests/check_fakes.py does
    assert registry.rule_specs()[_ExtraRule.ID].load() is _ExtraRule


def test_a_spec_travels_by_value_and_loads_its_class(fresh_index):
    spec = registry.rule_specs()["tensor-cuda-method"]
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and again.load() is registry.all_rules()["tensor-cuda-method"]


def test_a_spec_that_names_another_class_is_refused():
    spec = RuleSpec.of(registry.all_rules()["tensor-cuda-method"])
    wrong = RuleSpec(**{**{f: getattr(spec, f) for f in rule_catalog._INDEXED}, "ID": "device-string"})
    with pytest.raises(RuntimeError, match="tools.docgen"):
        wrong.load()


def test_an_engine_of_specs_converts_as_one_of_classes(fresh_index):
    """Every fixture input, with the default selection: the same output and findings whether the engine
    starts from the index's specs (importing rules as files call for them) or from the classes."""
    settings = Settings()
    lazy = Engine(settings)
    eager = Engine(settings, registry.select_rules())
    changed = 0
    for path in sorted((ROOT / "fixtures" / "rules").glob("*/*.input.*")):
        data = path.read_bytes()
        name = path.name.replace(".input", "")
        a, b = lazy.convert(data, name), eager.convert(data, name)
        assert (a.output, a.outcome) == (b.output, b.outcome), path
        changed += a.output is not None
    assert changed > 50


# A process that converts one small Python file with the index installed, then says which rule modules
# it imported: those of the rules the file's triggers call for, no shell, YAML or CUDA rule.
_PROBE = r"""
import json, sys, types
text = sys.stdin.read()
module = types.ModuleType("npu_port.transpiler.core.rule_index")
exec(compile(text, "rule_index.py", "exec"), module.__dict__)
sys.modules[module.__name__] = module
from npu_port.transpiler.core import rule_catalog
rule_catalog.source_digest = lambda: module.DIGEST
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
engine = Engine(Settings())
seen = {}
for name, data in (("plain.py", b"x = 1\n"), ("tiny.py", b"import torch\nx = torch.zeros(2).cuda()\n")):
    out = engine.convert(data, name)
    seen[name] = [sorted(m for m in sys.modules if m.startswith("npu_port.codemods.")), out.output is not None]
print(json.dumps(seen))
"""


def test_a_run_imports_only_the_rules_its_files_call_for():
    rules = registry.all_rules()
    proc = subprocess.run([sys.executable, "-c", _PROBE], input=index_source(rules), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["plain.py"] == [[], False]  # no trigger: no rule imported
    imported, changed = seen["tiny.py"]
    assert changed
    module_of = {rule.__module__: rule for rule in rules.values()}
    loaded = [module_of[m] for m in imported if m in module_of]
    assert loaded and all(r.LANGUAGE == "python" for r in loaded)
    assert len(loaded) < len([r for r in rules.values() if r.LANGUAGE == "python"])

"""The built-in tables are read from transpiler/tables/builtin_tables.py (generated from the YAML, which
stays the reviewed source): the same data the YAML holds, and never a table its file no longer says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from npu_port.transpiler.tables import builtin_tables, mapping


@pytest.fixture
def fresh_tables():
    mapping.load_table.cache_clear()
    yield
    mapping.load_table.cache_clear()


def test_every_table_is_generated_from_its_yaml_as_it_is_now():
    on_disk = {(t, n) for t in mapping.available_targets() for n in mapping.table_names(t)}
    assert set(builtin_tables.TABLES) == on_disk, "run `python -m tools.docgen`"
    for (target, name), (digest, table) in builtin_tables.TABLES.items():
        data = (Path(mapping._data_dir()) / target / f"{name}.yaml").read_bytes()
        assert digest == mapping._digest(data), f"{target}/{name}.yaml changed: run `python -m tools.docgen`"
        assert table == yaml.safe_load(data.decode("utf-8")), (target, name)


def test_load_table_gives_the_generated_table(fresh_tables):
    table = mapping.load_table("ascend", "torch_cuda")
    assert table is builtin_tables.TABLES[("ascend", "torch_cuda")][1]


def test_a_table_edited_since_generation_is_read_from_its_yaml(tmp_path, monkeypatch, fresh_tables):
    data = tmp_path / "data"
    shutil.copytree(mapping._data_dir(), data)
    edited = data / "ascend" / "smi.yaml"
    edited.write_text(edited.read_text(encoding="utf-8") + "\nadded_since: yes\n", encoding="utf-8")
    monkeypatch.setattr(mapping, "_data_dir", lambda: str(data))
    smi = mapping.load_table("ascend", "smi")
    assert smi["added_since"] is True
    assert smi is not builtin_tables.TABLES[("ascend", "smi")][1]
    assert mapping.load_table("ascend", "shell") is builtin_tables.TABLES[("ascend", "shell")][1]  # unchanged


def test_a_table_the_snapshot_lacks_is_read_from_its_yaml(tmp_path, monkeypatch, fresh_tables):
    data = tmp_path / "data"
    (data / "other").mkdir(parents=True)
    (data / "other" / "extra.yaml").write_text("rows:\n  - {cuda: A, npu: B, status: rename}\n", encoding="utf-8")
    monkeypatch.setattr(mapping, "_data_dir", lambda: str(data))
    assert mapping.available_targets() == ["other"]
    assert mapping.load_table("other", "extra") == {"rows": [{"cuda": "A", "npu": "B", "status": "rename"}]}
    with pytest.raises(mapping.MappingError, match="has no table 'missing'"):
        mapping.load_table("other", "missing")

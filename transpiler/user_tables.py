"""Custom mapping rows (`--rules my_rules.yaml`, or `rules = [...]` in the config).

The file has the built-in tables' schema: a top-level key per table (`torch_cuda`, `env_vars`, ...),
each holding `rows:` (or directly a list) of rows such as `{cuda: MY_CUDA_VAR, npu: MY_NPU_VAR,
status: rename}`. What a valid row is comes from the built-in table itself (its keys, its status
values, which statuses always carry an `npu` name), so a new table or status needs no change here.
Errors name the file, the line, the table and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError

from transpiler.mapping import MappingError, load_table


class TableError(ValueError):
    """A custom rules file that cannot be used; the message is `FILE:LINE: what is wrong`."""


@dataclass(frozen=True)
class TableSchema:
    name: str
    keys: frozenset[str]
    statuses: frozenset[str]
    needs_npu: frozenset[str]  # statuses whose rows always name the NPU form


def builtin_table_names(target: str) -> list[str]:
    root = resources.files("codemods") / "data" / target
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


@lru_cache(maxsize=None)
def table_schema(target: str, name: str) -> TableSchema:
    try:
        doc = load_table(target, name)
    except MappingError as exc:
        raise TableError(str(exc)) from None
    rows = doc.get("rows", []) if isinstance(doc, dict) else []
    rows = [r for r in rows if isinstance(r, dict) and "cuda" in r]
    keys = {"cuda", "status", "npu", "hint", "note"} | {k for r in rows for k in r}
    statuses = {r["status"] for r in rows if "status" in r}
    needs_npu = {s for s in statuses if all("npu" in r for r in rows if r.get("status") == s)}
    return TableSchema(name, frozenset(keys), frozenset(statuses), frozenset(needs_npu))


def mapping_tables(target: str) -> list[str]:
    """The built-in tables that are CUDA-name mappings (their rows have a `cuda` key)."""
    out = []
    for name in builtin_table_names(target):
        doc = load_table(target, name)
        rows = doc.get("rows") if isinstance(doc, dict) else None
        if isinstance(rows, list) and any(isinstance(r, dict) and "cuda" in r for r in rows):
            out.append(name)
    return out


def _line(node: Any, key: Any = None, index: int | None = None) -> int:
    try:
        if index is not None:
            return node.lc.item(index)[0] + 1
        if key is not None:
            return node.lc.key(key)[0] + 1
        return node.lc.line + 1
    except (AttributeError, KeyError, TypeError):
        return 1


def load_user_tables(path: Path, target: str) -> dict[str, list[dict[str, str]]]:
    """Validated rows per table; raises TableError naming the file, line and key of the first problem."""
    return _load(str(Path(path).resolve()), target)


@lru_cache(maxsize=None)
def _load(path: str, target: str) -> dict[str, list[dict[str, str]]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TableError(f"{path}: cannot read: {exc}") from None
    try:
        doc = YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise TableError(f"{path}:{line}: not valid YAML: {exc.problem or exc.context}") from None
    if doc is None:
        return {}
    if not isinstance(doc, CommentedMap):
        raise TableError(f"{path}:1: expected a mapping of table names (e.g. env_vars:) to rows")
    known = mapping_tables(target)
    out: dict[str, list[dict[str, str]]] = {}
    for table in doc:
        where = f"{path}:{_line(doc, key=table)}"
        if table not in known:
            raise TableError(f"{where}: unknown table {table!r} for target {target!r} "
                             f"(tables: {', '.join(known)})")
        body = doc[table]
        if isinstance(body, CommentedMap):
            extra = [k for k in body if k != "rows"]
            if extra:
                raise TableError(f"{path}:{_line(body, key=extra[0])}: {table}: unknown key {extra[0]!r} "
                                 "(a table holds `rows:`)")
            rows_node = body.get("rows")
            where = f"{path}:{_line(body, key='rows')}" if "rows" in body else where
        else:
            rows_node = body
        if not isinstance(rows_node, CommentedSeq):
            raise TableError(f"{where}: {table}: expected a list of rows")
        out[table] = [_check_row(path, table, rows_node, i, table_schema(target, table))
                      for i in range(len(rows_node))]
    return out


def _check_row(path: str, table: str, seq: CommentedSeq, i: int, schema: TableSchema) -> dict[str, str]:
    row = seq[i]
    here = f"{path}:{_line(seq, index=i)}: {table} row {i + 1}"
    if not isinstance(row, CommentedMap):
        raise TableError(f"{here}: expected a mapping such as {{cuda: ..., npu: ..., status: ...}}")
    for key in row:
        at = f"{path}:{_line(row, key=key)}: {table} row {i + 1}"
        if key not in schema.keys:
            raise TableError(f"{at}: unknown key {key!r} (allowed: {', '.join(sorted(schema.keys))})")
        if not isinstance(row[key], str) or not row[key].strip():
            raise TableError(f"{at}: {key}: expected a non-empty string, got {row[key]!r}")
    for key in ("cuda", "status"):
        if key not in row:
            raise TableError(f"{here}: missing key {key!r}")
    status = row["status"]
    if schema.statuses and status not in schema.statuses:
        raise TableError(f"{path}:{_line(row, key='status')}: {table} row {i + 1}: status: {status!r} is not one "
                         f"of {', '.join(sorted(schema.statuses))}")
    if status in schema.needs_npu and "npu" not in row:
        raise TableError(f"{here}: status {status!r} needs an 'npu' name")
    npu = row.get("npu", "")
    if npu.startswith(("torch.npu.", "torch_npu.")):
        from codemods.check_npu_api import missing_npu_name  # the same facts `check` judges ports by

        missing = missing_npu_name(npu)
        if missing is not None:
            raise TableError(f"{path}:{_line(row, key='npu')}: {table} row {i + 1}: npu: {npu!r} does not exist "
                             f"in torch_npu ({missing[0]} has no {missing[1]!r})")
    return {str(k): str(v) for k, v in row.items()}

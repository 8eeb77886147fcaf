"""Custom mapping rows (`--rules my_rules.yaml`, or `rules = [...]` in the config).

The file has the built-in tables' schema: a top-level key per table (`torch_cuda`, `env_vars`, ...),
each holding `rows:` (or directly a list) of rows such as `{cuda: MY_CUDA_VAR, npu: MY_NPU_VAR,
status: rename}`. What a valid row is comes from the built-in table itself (its keys, its status
values, which statuses always carry an `npu` name), so a new table or status needs no change here.
Errors name the file, the line, the table and the key.

A user value lands in converted files, so each one must be valid where it lands: a table's `cuda` and
`npu` values have the kind its built-in rows have (an environment-variable name, which reaches Python
strings and keywords, shell and YAML; a dotted Python name, which reaches Python code), and free text
(`hint`, `note`, ...) reaches reports and terminals, so it holds no control characters.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npu_port.transpiler.core.files import DecodeError, ReadError, read_text, yaml_too_deep
from npu_port.transpiler.tables.mapping import MappingError, load_table, table_names

MAX_RULES_BYTES = 5 * 1024 * 1024
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_KEYS = ("cuda", "npu")  # the keys whose values are names that land in converted code

if TYPE_CHECKING:
    from ruamel.yaml.comments import CommentedSeq


class TableError(ValueError):
    """A custom rules file that cannot be used; the message is `FILE:LINE: what is wrong`."""


@dataclass(frozen=True)
class TableSchema:
    name: str
    keys: frozenset[str]
    statuses: frozenset[str]
    needs_npu: frozenset[str]  # statuses whose rows always name the NPU form
    kinds: tuple[tuple[str, str, bool], ...] = ()  # (key, "env" | "dotted" | "text", wildcard suffix allowed)

    def kind_of(self, key: str) -> tuple[str, bool]:
        return next(((k, w) for name, k, w in self.kinds if name == key), ("text", False))


def env_name_problem(value: str, wildcard: bool = False) -> str | None:
    """Why `value` cannot be an environment-variable name (None: it can). With `wildcard`, a trailing
    `*` makes it a prefix."""
    name = value[:-1] if wildcard and value.endswith("*") else value
    if not _ENV_NAME.fullmatch(name):
        return (f"{_short(value)} is not an environment-variable name ([A-Za-z_][A-Za-z0-9_]*"
                f"{', or a prefix ending in *' if wildcard else ''})")
    if keyword.iskeyword(name):
        return f"{_short(value)} is a Python keyword, which cannot be a keyword argument (env.update({name}=...))"
    return None


def dotted_name_problem(value: str, wildcard: bool = False) -> str | None:
    """Why `value` cannot be a dotted Python name such as torch.npu.synchronize (None: it can)."""
    name = value[:-2] if wildcard and value.endswith(".*") else value
    for part in name.split("."):
        if not part.isidentifier():
            return (f"{_short(value)} is not a dotted Python name (identifiers joined by dots"
                    f"{', or a prefix ending in .*' if wildcard else ''})")
        if keyword.iskeyword(part):
            return f"{_short(value)} is not a dotted Python name ({part!r} is a keyword)"
    return None


def text_problem(value: str) -> str | None:
    """Free text goes to reports and terminals: no control characters (escape sequences, bidi overrides)."""
    bad = next((c for c in value if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        return f"contains the control character U+{ord(bad):04X}"
    return None


def _kind(values: list[str]) -> tuple[str, bool]:
    """The narrowest kind every built-in value of a key fits, and whether any is a wildcard prefix."""
    if values and all(env_name_problem(v, True) is None for v in values):
        return "env", any(v.endswith("*") for v in values)
    if values and all(dotted_name_problem(v, True) is None for v in values):
        return "dotted", any(v.endswith(".*") for v in values)
    return "text", False


def value_problem(schema: TableSchema, key: str, value: str) -> str | None:
    kind, wildcard = schema.kind_of(key)
    if kind == "env":
        return env_name_problem(value, wildcard)
    if kind == "dotted":
        return dotted_name_problem(value, wildcard)
    return text_problem(value)


def builtin_table_names(target: str) -> list[str]:
    return table_names(target)


@cache
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
    kinds = tuple((key, *_kind([r[key] for r in rows if isinstance(r.get(key), str)])) for key in NAME_KEYS)
    return TableSchema(name, frozenset(keys), frozenset(statuses), frozenset(needs_npu), kinds)


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


@cache
def _constructor() -> type:
    """A scalar no Python type can hold (2020-13-45, a 5000-digit int) is an error at its line.

    Defined on first use: ruamel costs every run about 25 ms to import, and only a rules file needs it
    (the built-in tables are read with PyYAML)."""
    from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor

    class _Constructor(RoundTripConstructor):
        def construct_object(self, node, deep=False):
            try:
                return super().construct_object(node, deep)
            except (ValueError, TypeError, OverflowError) as exc:
                raise ConstructorError(None, None, _first_line(exc), node.start_mark) from None

    return _Constructor


def _parse(text: str) -> Any:
    from ruamel.yaml import YAML

    if yaml_too_deep(text):  # what ruamel's parser finds only after seconds
        raise RecursionError
    yaml = YAML(typ="rt")
    yaml.Constructor = _constructor()
    return yaml.load(text)


def table_rows(target: str, name: str, rules_files: tuple[str, ...] = ()) -> list[dict]:
    """A built-in table's rows with the user's custom rows (`--rules FILE`, validated) first; a user row
    replaces the built-in row for the same `cuda` name. Rules pass the run's rules files (RunOptions)."""
    doc = load_table(target, name)
    rows = list(doc.get("rows", [])) if isinstance(doc, dict) else []
    if not rules_files:
        return rows
    user = [r for f in rules_files for r in load_user_tables(f, target).get(name, [])]
    names = {r["cuda"] for r in user}
    return user + [r for r in rows if r.get("cuda") not in names]


def load_user_tables(path: str | Path, target: str) -> dict[str, list[dict[str, str]]]:
    """Validated rows per table; raises TableError naming the file, line and key of the first problem."""
    return _load(str(Path(path).resolve()), target)


@cache
def _load(path: str, target: str) -> dict[str, list[dict[str, str]]]:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq  # only a rules file needs ruamel
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        text = read_text(Path(path), MAX_RULES_BYTES, flag=None)  # no FIFO or device: they would block
    except DecodeError as exc:
        raise TableError(f"{path}:{exc.line}: {exc}") from None
    except ReadError as exc:
        raise TableError(f"{path}: {exc}") from None
    try:
        doc = _parse(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise TableError(f"{path}:{line}: not valid YAML: {exc.problem or exc.context}") from None
    except YAMLError as exc:  # the reader's errors (control characters) carry a position, not a mark
        position = getattr(exc, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else 1
        raise TableError(f"{path}:{line}: not valid YAML: {_first_line(exc)}") from None
    except RecursionError:
        raise TableError(f"{path}: nested too deeply for a rules file") from None
    if doc is None:
        return {}
    if not isinstance(doc, CommentedMap):
        raise TableError(f"{path}:1: expected a mapping of table names (e.g. env_vars:) to rows")
    known = mapping_tables(target)
    out: dict[str, list[dict[str, str]]] = {}
    for table in doc:
        where = f"{path}:{_line(doc, key=table)}"
        if table not in known:
            raise TableError(f"{where}: unknown table {_short(table)} for target {target!r} "
                             f"(tables: {', '.join(known)})")
        body = doc[table]
        if isinstance(body, CommentedMap):
            extra = [k for k in body if k != "rows"]
            if extra:
                raise TableError(f"{path}:{_line(body, key=extra[0])}: {table}: unknown key {_short(extra[0])} "
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


def _short(value: Any, limit: int = 80) -> str:
    """A user value in a message: its repr, cut short (a value may be a whole nested document)."""
    try:
        text = repr(value)
    except RecursionError:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_row(path: str, table: str, seq: CommentedSeq, i: int, schema: TableSchema) -> dict[str, str]:
    from ruamel.yaml.comments import CommentedMap

    row = seq[i]
    here = f"{path}:{_line(seq, index=i)}: {table} row {i + 1}"
    if not isinstance(row, CommentedMap):
        raise TableError(f"{here}: expected a mapping such as {{cuda: ..., npu: ..., status: ...}}")
    for key in row:
        at = f"{path}:{_line(row, key=key)}: {table} row {i + 1}"
        if key not in schema.keys:
            raise TableError(f"{at}: unknown key {_short(key)} (allowed: {', '.join(sorted(schema.keys))})")
        if not isinstance(row[key], str) or not row[key].strip():
            raise TableError(f"{at}: {key}: expected a non-empty string, got {_short(row[key])}")
        problem = value_problem(schema, key, row[key]) if key in NAME_KEYS else text_problem(row[key])
        if problem is not None:
            raise TableError(f"{at}: {key}: {problem}")
    for key in ("cuda", "status"):
        if key not in row:
            raise TableError(f"{here}: missing key {key!r}")
    status = row["status"]
    if schema.statuses and status not in schema.statuses:
        raise TableError(f"{path}:{_line(row, key='status')}: {table} row {i + 1}: status: {_short(status)} is not one "
                         f"of {', '.join(sorted(schema.statuses))}")
    if status in schema.needs_npu and "npu" not in row:
        raise TableError(f"{here}: status {status!r} needs an 'npu' name")
    npu = row.get("npu", "")
    if npu.startswith(("torch.npu.", "torch_npu.")):
        from npu_port.transpiler.tables.api_facts import missing_npu_name  # the same facts `check` judges ports by

        missing = missing_npu_name(npu)
        if missing is not None:
            raise TableError(f"{path}:{_line(row, key='npu')}: {table} row {i + 1}: npu: {npu!r} does not exist "
                             f"in torch_npu ({missing[0]} has no {missing[1]!r})")
    return {str(k): str(v) for k, v in row.items()}

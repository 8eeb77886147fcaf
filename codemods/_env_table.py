"""The environment-variable table (codemods/data/<target>/env_vars.yaml), shared by the Python, shell
and YAML rules. Shell launchers also read shell.yaml's `env_vars` rows (e.g. VLLM_ATTENTION_BACKEND,
which matters only for some values)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Optional

from npu_port.transpiler.tables.mapping import MappingError, available_targets, load_table
from npu_port.transpiler.tables.user_tables import table_rows

STATUSES = ("rename", "keep", "unsupported")


@dataclass(frozen=True)
class EnvVarRow:
    cuda: str  # a name, or a prefix ending in `*`
    status: str  # rename | keep | unsupported
    npu: Optional[str] = None
    hint: str = ""
    note: str = ""
    values: tuple[str, ...] = ()  # when set, the row applies only to these assigned values
    # An unsupported row's Ascend counterpart that is not a rename: it reads other values (or only some of them).
    counterpart: str = ""

    def left(self, shown: str, target: str = "Ascend") -> str:
        """The finding of an unsupported row: `shown` (the name, or NAME=value) is left as is, and why."""
        if self.counterpart:
            return (f"{shown} is not read on {target}; left as is (its counterpart {self.counterpart} takes only "
                    f"some of its values)")
        return f"{shown} has no {target} equivalent; left as is"

    def matches(self, name: str) -> bool:
        return name.startswith(self.cuda[:-1]) if self.cuda.endswith("*") else name == self.cuda


class EnvVarTable:
    def __init__(self, rows: list[EnvVarRow]):
        # Exact names win over prefixes, longer prefixes over shorter ones.
        self.rows = sorted(rows, key=lambda r: (r.cuda.endswith("*"), -len(r.cuda)))
        # `lookup` runs for every variable of every script (11k calls on converted verl): exact names are
        # indexed, only the few prefix rows are scanned. Both keep `rows`' order, exact rows first.
        self._exact: dict[str, list[EnvVarRow]] = {}
        for r in self.rows:
            if not r.cuda.endswith("*"):
                self._exact.setdefault(r.cuda, []).append(r)
        self._prefixes = [(r.cuda[:-1], r) for r in self.rows if r.cuda.endswith("*")]

    @classmethod
    @cache
    def for_target(cls, target: str, with_shell: bool = False, rules_files: tuple[str, ...] = ()) -> EnvVarTable:
        raw_rows = list(table_rows(target, "env_vars", rules_files))
        if with_shell:
            raw_rows += list(load_table(target, "shell").get("env_vars", []))
        rows = []
        for raw in raw_rows:
            row = EnvVarRow(cuda=raw["cuda"], status=raw["status"], npu=raw.get("npu"), hint=raw.get("hint", ""),
                            note=raw.get("note", ""), values=tuple(raw.get("values", ())),
                            counterpart=raw.get("counterpart", ""))
            if row.status not in STATUSES or (row.status == "rename") != bool(row.npu):
                raise MappingError(f"{target}/env_vars: bad row {raw!r}")
            rows.append(row)
        return cls(rows)

    @classmethod
    def for_options(cls, options, with_shell: bool = False) -> EnvVarTable:
        """The table a run uses: the target's rows with the user's `--rules` rows first."""
        return cls.for_target(options.target, with_shell, options.rules_files)

    def lookup(self, name: str, value: Optional[str] = None) -> Optional[EnvVarRow]:
        """The row for `name`; a value-limited row applies only when `value` is one of its values."""
        for r in self._exact.get(name, ()):
            if not r.values or value in r.values:
                return r
        for prefix, r in self._prefixes:
            if name.startswith(prefix) and (not r.values or value in r.values):
                return r
        return None

    def renamed_for_values(self, name: str) -> bool:
        """Whether a row renames `name` for some values only (the others, and its reads, have another row)."""
        return any(r.values and r.status == "rename" for r in self._exact.get(name, ()))

    def target_name(self, name: str) -> str:
        """The name the target reads for `name` (itself unless the row renames it)."""
        row = self.lookup(name)
        return row.npu if row is not None and row.status == "rename" and row.npu else name

    def trigger_tokens(self) -> tuple[str, ...]:
        return tuple(sorted({r.cuda.rstrip("*") for r in self.rows if r.status != "keep"}))


def env_triggers(with_shell: bool = False) -> tuple[str, ...]:
    """Trigger tokens over every target, for a rule's TRIGGERS."""
    return tuple(sorted({t for target in available_targets()
                         for t in EnvVarTable.for_target(target, with_shell).trigger_tokens()}))

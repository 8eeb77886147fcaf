"""EnvVarTable.lookup indexes exact names: it must pick the row the ordered scan of `rows` picks."""

from npu_port.codemods._env_table import EnvVarRow, EnvVarTable
from npu_port.transpiler.tables.mapping import available_targets


def _scan(table: EnvVarTable, name: str, value):
    return next((r for r in table.rows if r.matches(name) and (not r.values or value in r.values)), None)


def test_lookup_agrees_with_the_ordered_scan_on_every_table():
    for target in available_targets():
        for with_shell in (False, True):
            table = EnvVarTable.for_target(target, with_shell)
            names = {r.cuda.rstrip("*") for r in table.rows} | {r.cuda.rstrip("*") + "_X" for r in table.rows}
            values = {None, "", *(v for r in table.rows for v in r.values)}
            for name in names | {"UNRELATED", ""}:
                for value in values:
                    assert table.lookup(name, value) is _scan(table, name, value), (target, name, value)


def test_an_exact_row_wins_over_a_prefix_and_a_value_row_applies_to_its_values_only():
    table = EnvVarTable([EnvVarRow("NCCL_*", "unsupported"), EnvVarRow("NCCL_X", "rename", "HCCL_X", values=("1",)),
                         EnvVarRow("NCCL_X", "keep")])
    assert table.lookup("NCCL_X", "1").status == "rename"
    assert table.lookup("NCCL_X", "2").status == "keep"
    assert table.lookup("NCCL_Y").status == "unsupported"
    assert table.lookup("HCCL_X") is None

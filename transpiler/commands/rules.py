"""`npu-port rules`: every rule with its id, language, group, fix safety and summary."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from npu_port.transpiler.core.rule_catalog import rule_infos


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def rules(as_json: bool) -> None:
    """List every rule with its id, description and fix safety."""
    rows = [
        {"id": r.ID, "language": r.LANGUAGE, "group": r.GROUP, "safety": r.SAFETY, "summary": r.summary()}
        for r in rule_infos().values()  # read from the rules' source: no LibCST import
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    # An id is what `explain`, --select and `# npu-port: ignore[...]` take: never cut or wrapped, whatever
    # the width; the summary wraps instead.
    table = Table(header_style="bold")
    table.add_column("id", no_wrap=True, min_width=max(len(row["id"]) for row in rows))
    for name in ("language", "group", "safety"):
        table.add_column(name, no_wrap=True)
    table.add_column("what it does", ratio=1, overflow="fold")
    for row in rows:
        table.add_row(row["id"], row["language"], row["group"], row["safety"], row["summary"])
    Console().print(table)

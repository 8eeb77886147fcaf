"""`npu-port explain RULE`: what a rule does, why, an example and its fix safety, from its docstring."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markdown import Markdown

from npu_port.transpiler.core.rule_catalog import rule_infos
from npu_port.transpiler.output.rule_docs import rule_markdown, rule_sections


@click.command()
@click.argument("rule_id", metavar="RULE")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def explain(rule_id: str, as_json: bool) -> None:
    """Explain RULE: what it does, why, an example before and after, and its fix safety."""
    rules = rule_infos()  # read from the rules' source: no LibCST import
    rule = rules.get(rule_id)
    if rule is None:
        close = [r for r in rules if rule_id in r or r.startswith(rule_id.split("-")[0])]
        hint = f" (did you mean: {', '.join(close[:5])}?)" if close else ""
        raise click.UsageError(f"unknown rule {rule_id!r}{hint}; `npu-port rules` lists them")
    if as_json:
        data = {"id": rule.ID, "language": rule.LANGUAGE, "group": rule.GROUP, "safety": rule.SAFETY,
                **{k.lower().replace(" ", "_"): v for k, v in rule_sections(rule).items()}}
        click.echo(json.dumps(data, indent=2))
        return
    Console().print(Markdown(rule_markdown(rule, level=1)))

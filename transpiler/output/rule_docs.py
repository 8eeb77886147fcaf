"""A rule's documentation from its docstring: the summary and the sections What it does, Why, Example,
With --keep-cuda (the device-agnostic output, where the rule has one) and Fix safety (`npu-port explain`, and docs/rules.md through tools/docgen.py)."""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `explain` passes the catalog's RuleInfo, read without importing LibCST
    from npu_port.transpiler.core.rules import Rule

SECTIONS = ("What it does", "Why", "Example", "With --keep-cuda", "Fix safety")
_HEADING = re.compile(r"^(?:#+\s*)?(What it does|Why(?: is this bad\?)?|Example|With --keep-cuda|Fix safety)\s*:?\s*$")
# What a rule that changes code and documents no device-agnostic form does with --keep-cuda.
_NO_PORTABLE_FORM = ("No device-agnostic form: with `--keep-cuda` the line stays as it is, with a warning "
                     "`kept for CUDA (--keep-cuda)` (docs/keep-cuda.md).")


def rule_sections(rule: type[Rule]) -> dict[str, str]:
    """The docstring split into summary and the sections What it does / Why / Example / Fix safety."""
    lines = rule.description().splitlines()
    out: dict[str, list[str]] = {"summary": []}
    current = "summary"
    for line in lines:
        m = _HEADING.match(line.strip())
        if m and not line.startswith((" ", "\t")):
            current = "Why" if m.group(1).startswith("Why") else m.group(1)
            out[current] = []
            continue
        out.setdefault(current, []).append(line)
    return {k: textwrap.dedent("\n".join(v)).strip("\n") for k, v in out.items()}


def md_cell(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ").strip()


def rule_markdown(rule: type[Rule], level: int = 2) -> str:
    s = rule_sections(rule)
    h = "#" * level
    out = [f"{h} `{rule.ID}`", "", s.get("summary", "").strip(), "",
           f"language: {rule.LANGUAGE} · group: {rule.GROUP} · fix safety: {rule.SAFETY}", ""]
    for name in SECTIONS:
        body = s.get(name)
        if not body and name == "With --keep-cuda" and rule.GROUP in ("default", "extras") \
                and rule.SAFETY != "report-only":
            out += [f"{h}# {name}", "", _NO_PORTABLE_FORM, ""]
        if not body:
            continue
        out += [f"{h}# {name}", ""]
        if name in ("Example", "With --keep-cuda"):
            out += ["```", textwrap.dedent(body).strip("\n"), "```", ""]
        else:
            out += [body.strip(), ""]
    return "\n".join(out)

"""YAML that is a Go template (Helm charts' `templates/*.yaml`): read through a mask of the same length.

`{{ ... }}` makes a chart's templates YAML only once rendered, so they do not parse as they are. Masked,
they do: a line that holds nothing but actions (`{{- if .Values.gpu }}`, `{{- toYaml . | nindent 8 }}`)
becomes a comment, and an action inside a line (`image: "{{ .Values.image }}"`) becomes a run of `_`
that reads as part of the scalar. Every character keeps its offset, so the spans found in the mask are
the spans of the template: rules edit the real text, and never an action, which no rule's token matches.
"""

from __future__ import annotations

import re
from typing import Optional

# An action, `{{` to the next `}}` on the same line (a multi-line action is not masked: the text then
# stays a parse error, as it was).
_ACTION = re.compile(r"\{\{.*?\}\}")


def is_go_template(text: str) -> bool:
    return "{{" in text


def mask(text: str) -> Optional[str]:
    """The text with its actions masked, or None when an action spans lines or nothing is masked."""
    out: list[str] = []
    masked = False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if "{{" not in body:
            out.append(line)
            continue
        rest = _ACTION.sub(lambda m: " " * len(m.group()), body)
        if "{{" in rest:
            return None
        masked = True
        if not rest.strip() or rest.strip().startswith("#"):
            # Only actions: a comment line, at the column of its first action.
            start = body.index("{{")
            out.append(body[:start] + "#" + body[start + 1:] + line[len(body):])
        else:
            out.append(_ACTION.sub(lambda m: "_" * len(m.group()), body) + line[len(body):])
    return "".join(out) if masked else None

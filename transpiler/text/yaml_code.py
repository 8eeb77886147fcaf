"""A YAML text without its comments, for the prefilter: what the YAML rules' triggers are looked for in.

The YAML rules read keys and values that ruamel's round-trip loader finds, and ruamel's loader is pure
Python: loading a file costs about fifty times what libyaml's C parser takes to list its events. Many
configs name CUDA only in comments (verl's `# device: cuda` notes, LLaMA-Factory's commented-out
options), and a trigger there used to cost that load for nothing. libyaml's events cover every key,
value, anchor, tag and flow bracket of the text; between them lie only whitespace, the `:`/`-`/`,`
indicators, document markers, directives and comments. A comment is a `#` there that starts a line
or follows whitespace (YAML's own rule), up to the end of its line.

Where libyaml is not installed, refuses the text (a syntax error, a Helm template, too deep a nesting)
or meets an alias (an alias bomb is refused by the loader's own guard, which must go on reporting it),
there is no answer and the caller loads the file as before.
"""

from __future__ import annotations

import re
from typing import Optional

_COMMENT = re.compile(r"(?:^|(?<=[ \t\r\n]))#[^\r\n]*")


def without_comments(text: str) -> Optional[str]:
    """`text` with every comment removed (line ends kept), or None where libyaml cannot tell."""
    try:
        import yaml

        loader = yaml.CSafeLoader
    except (ImportError, AttributeError):
        return None
    if "#" not in text:
        return text
    pieces: list[str] = []
    pos = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent):
                return None
            if event.start_mark is None or event.end_mark is None:
                return None  # libyaml gives every event its marks: not libyaml
            start, end = event.start_mark.index, event.end_mark.index
            if start < pos:  # an event overlapping one already kept: keep the rest of it as it is
                if end > pos:
                    pieces.append(text[pos:end])
                    pos = end
                continue
            gap = text[pos:start]
            pieces.append(_COMMENT.sub("", gap) if "#" in gap else gap)
            pieces.append(text[start:end])
            pos = end
    except yaml.YAMLError:
        return None
    gap = text[pos:]
    pieces.append(_COMMENT.sub("", gap) if "#" in gap else gap)
    return "".join(pieces)

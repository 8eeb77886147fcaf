"""The shell code of a Makefile's recipes: what the shell rules, and the install lines read by the manifest
rules, see of a Makefile.

A recipe line (tab-indented, with the lines its `\\` continues) is run by the shell, one shell per line.
Both views keep the file's offsets: make's own lines (rules, variables, directives) are left out, and the
recipe prefixes `@`, `-`, `+` and each line's leading tab become blanks (a continuation's `\\` stays: the
shell joins the lines as make does). Make's `$$` (a `$` for the shell) reads as ` $`; `$(VAR)` stays and
reads as a command substitution, as make's variables are expanded before the shell runs (a value that
names CUDA there is make's, not the recipe's).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_ESCAPED_DOLLAR = re.compile(r"\$\$")
_BLANK = re.compile(r"[^\r\n]")  # what is not a line break becomes a blank


def recipes(text: str) -> Iterator[tuple[int, str]]:
    """(offset, shell code) of each recipe of the Makefile `text`, the code as long as the recipe's text."""
    offset, start, code = 0, -1, ""
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if start >= 0 or line.startswith("\t"):
            lead = len(body) - len(body.lstrip("\t"))
            if start < 0:  # the first line of a recipe: make's prefixes too
                lead = len(body) - len(body[lead:].lstrip("@-+ \t"))
                start = offset
            code += " " * lead + _ESCAPED_DOLLAR.sub(" $", body[lead:]) + line[len(body):]
            if not body.endswith("\\"):  # make passes `\`-newline on to the shell, which joins the lines
                yield start, code
                start, code = -1, ""
        offset += len(line)
    if start >= 0:
        yield start, code


def recipe_view(text: str) -> str:
    """`text` with everything but its recipes' shell code blanked (line breaks kept)."""
    out, end = [], 0
    for start, code in recipes(text):
        out += [_BLANK.sub(" ", text[end:start]), code]
        end = start + len(code)
    out.append(_BLANK.sub(" ", text[end:]))
    return "".join(out)

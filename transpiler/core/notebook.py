"""Jupyter notebooks (.ipynb, nbformat 4): the code cells converted as Python, every other byte kept.

A notebook is read as JSON, and its code cells are converted together as one Python module (a
kernel runs them in one namespace): each cell starts with marker lines that no rule touches, the
module goes through the engine's Python conversion with the run's rules, and the output is split
back at the markers. So `import torch_npu` is added once, after the first cell's `import torch`, and
a name a cell defines is known to the cells after it. Where the module as a whole cannot be
converted (a `from __future__` import in a later cell, a marker a rule took away), each cell is
converted on its own.

IPython syntax (`%magic`, `!shell`, `obj?`, `x = !cmd`) is masked before parsing: each such line
becomes a `pass` with a marker (the same number of lines) and comes back as it was. A cell whose
first line is a cell magic other than those that run Python (`%%bash`, `%%writefile`) is not Python
and is left alone; a cell that still does not parse is left as it is, with a finding, and the other
cells are converted.

Only the `source` values of changed cells are rewritten, in place in the file's text: outputs,
metadata, markdown cells, key order, indentation and escapes stay byte for byte (a notebook with no
change is the same bytes). A changed list keeps its unchanged lines' text and the file's separators.

Positions: a finding's line and column are those of the notebook file itself, where its source line
sits (nbformat writes each line of a cell as one element of a list, on its own line of the file), so
editors, `check`'s fixes and SARIF point at the right place; the message ends with `[cell N, line M]`
(N counts every cell of the notebook from 1, as they appear; M is the line in that cell).
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, Optional

from npu_port.transpiler.core.files import parse_refusal, parsed_tree
from npu_port.transpiler.core.python_source import SourceError, convert_python, python_syntax_error
from npu_port.transpiler.core.report import Finding
from npu_port.transpiler.core.rules import PythonRule, RunOptions

# JSON nested deeper than this is refused before anything loads it (json.loads recurses in C: a file of
# 100,000 '[' raises RecursionError). nbformat's own structure is five levels; outputs and metadata
# (widget state, JSON outputs) add some, never hundreds.
MAX_JSON_DEPTH = 200
NOTEBOOK_RULE = "notebook-cell"  # the findings about a cell left as it is (no rule of the registry)

# Cell magics whose body is Python (run, timed, captured or profiled): the magic line is masked and the
# body converted. Any other cell magic (%%bash, %%writefile, %%html) holds no Python and is left alone.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit", "python", "python3",
                                 "pypy", "px", "autopx"})
# A line IPython reads, not Python: a line magic or shell escape, help (`?obj`, `obj?`, `obj??`), or an
# assignment from a magic or shell escape (`files = !ls`, `t = %timeit -o f()`).
_IPYTHON_LINE = re.compile(r"[ \t]*(?:[%!?]|[\w.\[\]]+[ \t]*\?\??[ \t]*\r?$|[\w., \t\[\]]+=[ \t]*[%!])")
_CELL_MAGIC = re.compile(r"[ \t]*%%(\w+)")


class NotebookError(SourceError):
    """A file that is not a notebook this converter reads (not JSON, not nbformat 4, nested too deeply)."""


@dataclass
class _Element:
    start: int  # offset of the opening quote in the file's text
    end: int  # offset after the closing quote
    offset: int  # where its text starts in the cell's source


@dataclass
class _SourceValue:
    start: int = -1  # the `source` value's span in the file's text
    end: int = -1
    is_list: bool = False
    elements: list[_Element] = field(default_factory=list)
    length: int = 0  # of the text of the elements scanned so far


@dataclass
class _Cell:
    number: int  # 1-based, counting every cell of the notebook
    index: int  # in the `cells` list
    source: str
    value: _SourceValue
    code: str = ""  # the Python converted: magics masked, a final newline
    masks: dict[int, tuple[str, str]] = field(default_factory=dict)  # mask number -> (line, magic): _mask
    added_newline: bool = False
    shifts: dict[int, int] = field(default_factory=dict)  # line -> columns a timing magic adds before its code


@dataclass
class _Notebook:
    text: str  # the file's text without a byte-order mark
    bom: bool
    doc: dict
    cells: list[_Cell]  # the code cells to convert (once prepared: those with Python to convert)
    left: list[Finding]  # the cells left as they are, and why
    nonce: str
    ready: bool = False  # the cells prepared (_prepared)
    unread: list[_Cell] = field(default_factory=list)  # the cells left as they are


def _json_error(text: str, pos: int, what: str) -> NotebookError:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return NotebookError(f"not a notebook: not valid JSON ({what} at line {line}, column {col})")


_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null|NaN|-?Infinity")


def _skip(text: str, pos: int) -> int:
    """The offset of the first byte at or after `pos` that is no JSON whitespace."""
    m = _WS.match(text, pos)
    return m.end() if m else pos


def _source_values(text: str) -> dict[int, _SourceValue]:
    """The spans of `cells[i].source` in the JSON `text` (its list elements too), by one iterative scan
    that also bounds the nesting (MAX_JSON_DEPTH) before json.loads sees the text. Raises NotebookError
    for text that is no JSON."""
    found: dict[int, _SourceValue] = {}
    keys: list[Any] = []  # per open container: its current key (object) or index (array)
    objects: list[bool] = []
    pos = _skip(text, 0)
    state = "value"
    n = len(text)
    while True:
        if state == "value":
            if pos >= n:
                raise _json_error(text, pos, "unexpected end")
            c = text[pos]
            at_source = len(keys) == 3 and keys[2] == "source" and keys[0] == "cells" and objects[2] \
                and not objects[1] and objects[0]
            if c == "{" or c == "[":
                if len(keys) >= MAX_JSON_DEPTH:
                    raise NotebookError(f"not a notebook: JSON nested more than {MAX_JSON_DEPTH} levels deep")
                if at_source:
                    found[keys[1]] = _SourceValue(pos, -1, c == "[")
                objects.append(c == "{")
                keys.append(None if c == "{" else 0)
                pos = _skip(text, pos + 1)
                if pos < n and text[pos] == ("}" if c == "{" else "]"):
                    pos += 1
                    keys.pop()
                    objects.pop()
                    state = "after"
                else:
                    state = "key" if c == "{" else "value"
                continue
            if c == '"':
                try:
                    value, end = scanstring(text, pos + 1, True)
                except ValueError as exc:
                    raise _json_error(text, pos, str(exc).split(":")[0]) from None
                if at_source:
                    found[keys[1]] = _SourceValue(pos, end, False, [_Element(pos, end, 0)])
                elif len(keys) == 4 and keys[2] == "source" and keys[0] == "cells" and not objects[3]:
                    source = found.get(keys[1])
                    if source is not None and source.is_list:
                        source.elements.append(_Element(pos, end, source.length))
                        source.length += len(value)
                pos = end
            else:
                m = _SCALAR.match(text, pos)
                if m is None:
                    raise _json_error(text, pos, "a value expected")
                pos = m.end()
            state = "after"
        elif state == "key":
            if pos >= n or text[pos] != '"':
                raise _json_error(text, pos, "a key expected")
            try:
                key, pos = scanstring(text, pos + 1, True)
            except ValueError as exc:
                raise _json_error(text, pos, str(exc).split(":")[0]) from None
            pos = _skip(text, pos)
            if pos >= n or text[pos] != ":":
                raise _json_error(text, pos, "':' expected")
            keys[-1] = key
            pos = _skip(text, pos + 1)
            state = "value"
        else:  # after a value
            if len(keys) == 3 and keys[2] == "source" and keys[0] == "cells" and objects[2] and not objects[1]:
                source = found.get(keys[1])
                if source is not None and source.end < 0:
                    source.end = pos
            pos = _skip(text, pos)
            if not keys:
                if pos != n:
                    raise _json_error(text, pos, "extra data")
                return found
            c = text[pos] if pos < n else ""
            if c == ",":
                pos = _skip(text, pos + 1)
                if objects[-1]:
                    state = "key"
                else:
                    keys[-1] += 1
                    state = "value"
            elif c == ("}" if objects[-1] else "]"):
                pos += 1
                keys.pop()
                objects.pop()
            else:
                raise _json_error(text, pos, "',' or a closing bracket expected")


def _lines(text: str) -> list[str]:
    """The lines of `text`, each with its "\\n" (Python's line ends; a form feed is no line end)."""
    return re.findall(r"[^\n]*\n|[^\n]+", text)


def _python_problem(code: str) -> tuple[Optional[tuple[int, int, str]], Optional[ast.Module]]:
    """(where and why `code` cannot be converted, or None; its `ast` when it parses)."""
    data = code.encode("utf-8")
    refusal = parse_refusal(data)
    if refusal is not None:
        return (1, 1, refusal), None
    tree = parsed_tree(data)
    if tree is not None:
        return None, tree
    found = python_syntax_error(data)
    return (found or (1, 1, "not valid Python")), None


# A line magic that runs one Python statement (`%time f(x.cuda())`, `%timeit -n 10 g()`): the statement is
# converted, the magic kept in front of it.
_TIMED = re.compile(r"[ \t]*%(?:time|timeit|prun|memit)[ \t]")


def _timed_statement(line: str) -> Optional[int]:
    """Where the Python statement of a timing magic's line starts, after the magic and its options
    (`-n 10`, `-s cumulative`): the first word from which on the rest parses; None if none does."""
    if _TIMED.match(line) is None or line.rstrip("\r\n").endswith("\\"):
        return None
    body = line.rstrip("\r\n")
    for m in re.finditer(r"[ \t]+(?=[^ \t])", body):
        if body[m.end()] == "-":
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(body[m.end():], "<magic>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        return m.end()
    return None


def _mask(lines: list[str], nonce: str, first: int, timed: bool) -> tuple[list[str], dict[int, tuple[str, str]]]:
    """The IPython lines of a cell replaced by numbered markers (numbers from `first`): a `pass`, or with
    `timed`, the statement of a timing magic. Each mask: (the line it stands for, the magic kept in front
    of a statement, or "" for a whole line)."""
    out, masks = list(lines), {}
    k, i = first, 0
    while i < len(lines):
        line = lines[i]
        if not _IPYTHON_LINE.match(line) or line.lstrip().startswith("#"):
            i += 1
            continue
        indent = line[:len(line) - len(line.lstrip(" \t"))]
        start = _timed_statement(line) if timed else None
        if start is not None:
            statement = line[start:].rstrip("\r\n")
            masks[k] = (line, line[:start])
            out[i] = f"{indent}{statement}  # npu-port-ipython {nonce} {k}\n"
            k += 1
            i += 1
            continue
        while True:  # a magic continued with a backslash goes on in the next line
            masks[k] = (lines[i], "")
            out[i] = f"{indent}pass  # npu-port-ipython {nonce} {k}\n"
            k += 1
            i += 1
            if not lines[i - 1].rstrip("\r\n").endswith("\\") or i >= len(lines):
                break
    return out, masks


def _unmask(line: str, nonce: str, k: int, mask: tuple[str, str]) -> str:
    """The line a marker stands for; for a timing magic, its magic in front of the statement as converted."""
    original, magic = mask
    if not magic:
        return original
    body = line.rstrip("\r\n")
    body = body[:len(body) - len(f"  # npu-port-ipython {nonce} {k}")]
    indent = original[:len(original) - len(original.lstrip(" \t"))]
    body = body[len(indent):] if body.startswith(indent) else body.lstrip(" \t")
    return magic + body + original[len(original.rstrip("\r\n")):]


def _prepare(cell: _Cell, nonce: str, first_mask: int, path: str, text: str, starts: list[int]) -> Optional[Finding]:
    """Fill in the Python of `cell` (None returned), or say why it is left as it is (a Finding)."""
    source = cell.source
    cell.added_newline = not source.endswith("\n")
    code = source + "\n" if cell.added_newline else source
    problem, _ = _python_problem(code)
    if problem is not None:
        lines = _lines(code)
        first_problem = problem
        for timed in (True, False):  # a timed statement that does not parse: the whole line set aside
            masked, masks = _mask(lines, nonce, first_mask, timed)
            if not masks:
                break
            problem, tree = _python_problem("".join(masked))
            if problem is None and tree is not None:
                # A mask inside a string (a line of a docstring that starts with '%') is no statement: put back.
                statements = {node.lineno for node in ast.walk(tree) if isinstance(node, ast.stmt)}
                inside = [i for i, line in enumerate(masked) if line != lines[i] and i + 1 not in statements]
                for i in inside:
                    masked[i] = lines[i]
                kept = "".join(masked)
                masks = {k: v for k, v in masks.items() if f" {nonce} {k}\n" in kept}
                if inside:
                    problem, _ = _python_problem(kept)
                if problem is None:
                    cell.code, cell.masks = kept, masks
                    for i, line in enumerate(masked):  # a timed statement: its columns shift by the magic's width
                        k = next((k for k in masks if line.endswith(f" {nonce} {k}\n")), None)
                        if k is not None and masks[k][1]:
                            indent = len(line) - len(line.lstrip(" \t"))
                            cell.shifts[i + 1] = len(masks[k][1]) - indent
                    return None
        at_line, col, why = problem or first_problem
        where = _position(cell, text, starts, at_line, col)
        return Finding(path, where[0], where[1], NOTEBOOK_RULE, "warning",
                       f"cell {cell.number} left as it is: {why} [cell {cell.number}, line {at_line}]",
                       hint="fix the cell so that Python can parse it (IPython magics are fine), then convert again")
    cell.code = code
    return None


def _raw_offset(token: str, k: int) -> int:
    """The offset in a JSON string token (quotes included) of its decoded character `k`."""
    if "\\" not in token:
        return min(1 + k, len(token) - 1)
    i, count, last = 1, 0, len(token) - 1
    while count < k and i < last:
        if token[i] == "\\":
            if token[i + 1] == "u":
                code = int(token[i + 2:i + 6], 16)
                i += 6
                if 0xD800 <= code < 0xDC00 and token.startswith("\\u", i):
                    i += 6  # a surrogate pair is one character
            else:
                i += 2
        else:
            i += 1
        count += 1
    return i


def _position(cell: _Cell, text: str, starts: list[int], line: int, col: int) -> tuple[int, int]:
    """The notebook file's (line, column) of the cell's line `line`, column `col` (both 1-based)."""
    lines = _lines(cell.source) or [""]
    line = min(max(line, 1), len(lines))
    offset = sum(len(s) for s in lines[:line - 1]) + min(max(col, 1) - 1, len(lines[line - 1].rstrip("\n")))
    elements = cell.value.elements
    if not elements:
        at = cell.value.start
    else:
        i = max(bisect.bisect_right([e.offset for e in elements], offset) - 1, 0)
        e = elements[i]
        at = e.start + _raw_offset(text[e.start:e.end], offset - e.offset)
    file_line = bisect.bisect_right(starts, at)
    return file_line, at - starts[file_line - 1] + 1


def _read(data: bytes, path: str) -> _Notebook:
    if b"\x00" in data:
        raise NotebookError("binary file (contains NUL bytes), not a notebook")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not a notebook: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    values = _source_values(text)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise NotebookError(f"not a notebook: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or "nbformat" not in doc:
        raise NotebookError("not a notebook: a JSON document without `nbformat` and `cells`")
    if doc["nbformat"] != 4 or isinstance(doc["nbformat"], bool):
        raise NotebookError(f"not a notebook this tool reads: nbformat {doc['nbformat']!r} (only nbformat 4 is "
                            "converted; upgrade it with `jupyter nbconvert --to notebook`)")
    if "cells" not in doc:
        raise NotebookError("not a notebook: a JSON document without `nbformat` and `cells`")
    cells = doc["cells"]
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise NotebookError("not a notebook: `cells` is not a list of cells")
    nonce = hashlib.blake2b(data, digest_size=6).hexdigest()
    while nonce in text:
        nonce = hashlib.blake2b(nonce.encode(), digest_size=6).hexdigest()
    found: list[_Cell] = []
    for index, raw in enumerate(cells):
        if raw.get("cell_type") != "code":
            continue
        source = raw.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"not a notebook: cell {index + 1}'s `source` is neither text nor a list of lines")
        value = values.get(index)
        if not source.strip() or value is None or value.end < 0:
            continue
        magic = _CELL_MAGIC.match(source.lstrip("\n"))
        if magic is not None and magic.group(1) not in _PYTHON_CELL_MAGICS:
            continue  # %%bash, %%writefile, %%html: not Python
        found.append(_Cell(index + 1, index, source, value))
    return _Notebook(text, bom, doc, found, [], nonce)


def _prepared(nb: _Notebook, path: str) -> _Notebook:
    """`nb` with the Python of its cells worked out (IPython lines masked), and the cells that have none
    left out, each with a finding that says why."""
    if nb.ready:
        return nb
    starts = [0, *(m.end() for m in re.finditer("\n", nb.text))]
    cells, masks = [], 0
    for cell in nb.cells:
        problem = _prepare(cell, nb.nonce, masks, path, nb.text, starts)
        if problem is not None:
            nb.left.append(problem)
            nb.unread.append(cell)
            continue
        masks += len(cell.masks)
        cells.append(cell)
    nb.cells, nb.ready = cells, True
    return nb


# The last notebook read, for the conversion of the same bytes that follows its prefilter.
_last: list = [None, None]


def _notebook(data: bytes, path: str) -> _Notebook:
    if _last[0] is data and _last[1] is not None:
        return _last[1]
    nb = _read(data, path)
    _last[:] = [data, nb]
    return nb


def notebook_code(data: bytes, path: str = "", which: str = "python") -> Optional[bytes]:
    """The code of a notebook's code cells, as the prefilter reads it: "python", their Python (IPython
    lines masked; the cells that have none left out); "text", their text as it is, read without parsing
    any cell; "left", the text of the cells left out. None where `data` is no notebook this converter
    reads (the conversion says why)."""
    try:
        nb = _notebook(data, path)
    except SourceError:
        return None
    if which == "text":
        return "\n".join(c.source for c in nb.cells).encode("utf-8")
    nb = _prepared(nb, path)
    if which == "left":
        return "\n".join(c.source for c in nb.unread).encode("utf-8")
    return "".join(c.code for c in nb.cells).encode("utf-8")


def _marker(nonce: str, k: int, nl: str = "\n") -> str:
    """The lines that open cell `k` in the module: a comment; after the first cell, with a `pass` for it
    to lead (a comment belongs to the statement below it, and goes with it should a rule remove that
    statement, an import it left unused; nothing removes a `pass`). The first cell's is the module's
    header comment, where added imports go below."""
    if k == 0:
        return f"# npu-port-cell {nonce} 0 -*- coding: utf-8 -*-{nl}"
    return f"# npu-port-cell {nonce} {k}{nl}pass  # npu-port-cell {nonce} {k}{nl}"


def _convert_cells(cells: Sequence[_Cell], nb: _Notebook, path: str, rule_classes: Sequence[type[PythonRule]],
                   options: RunOptions) -> Optional[tuple[dict[int, str], list[Finding]]]:
    """Convert `cells` as one module: (each changed cell's new source, by index; the findings, at the
    notebook's positions), or None where the module cannot be converted or split back."""
    parts: list[str] = []
    where: list[tuple[int, int]] = []  # per module line: (which of `cells`, its line in the cell; 0 for a marker)
    # The module's line ends are its first line's (LibCST writes the lines it adds with them): the cells'.
    first_end = re.search(r"\r?\n", "".join(c.code for c in cells))
    nl = first_end.group() if first_end else "\n"
    for k, cell in enumerate(cells):
        parts.append(_marker(nb.nonce, k, nl))
        where.extend((k, 0) for _ in range(1 if k == 0 else 2))
        parts.append(cell.code)
        where.extend((k, j + 1) for j in range(len(_lines(cell.code))))
    module = "".join(parts).encode("utf-8")
    if parse_refusal(module) is not None:
        return None
    try:
        out, findings = convert_python(module, path, rule_classes, options)
    except SourceError:
        return None
    new_code: list[list[str]] = [[] for _ in cells]
    current, seen = 0, 0
    marker = re.compile(rf"# npu-port-cell {re.escape(nb.nonce)} (\d+)\b")
    for line in _lines(out.decode("utf-8")):
        m = marker.search(line)
        if m is not None:
            if int(m.group(1)) == seen:
                current, seen = seen, seen + 1
            elif int(m.group(1)) != current or not line.startswith("pass"):
                return None
            continue
        new_code[current].append(line)
    if seen != len(cells):
        return None
    changed: dict[int, str] = {}
    mask = re.compile(rf"npu-port-ipython {re.escape(nb.nonce)} (\d+)$")
    for cell, lines in zip(cells, new_code):
        restored = 0
        for i, line in enumerate(lines):
            m = mask.search(line.rstrip("\r\n"))
            if m is not None and int(m.group(1)) in cell.masks:
                k = int(m.group(1))
                lines[i] = _unmask(line, nb.nonce, k, cell.masks[k])
                restored += 1
        if restored != len(cell.masks):
            return None
        new = "".join(lines)
        if cell.added_newline and new.endswith("\n"):
            new = new[:-1]
        if new != cell.source:
            changed[cell.index] = new
    starts = [0, *(m.end() for m in re.finditer("\n", nb.text))]
    placed = []
    for f in findings:
        k, cell_line = where[min(max(f.line, 1), len(where)) - 1]
        cell_line, col = (cell_line, f.col + cells[k].shifts.get(cell_line, 0)) if cell_line else (1, 1)
        file_line, file_col = _position(cells[k], nb.text, starts, cell_line, col)
        placed.append(replace(f, line=file_line, col=file_col,
                              message=f"{f.message} [cell {cells[k].number}, line {cell_line}]"))
    return changed, placed


def _encoder(text: str):
    # nbformat writes non-ASCII as it is; a file with \\u escapes for it and no raw non-ASCII was written
    # with ensure_ascii.
    escaped = text.isascii() and re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", text) is not None

    def encode(s: str) -> str:
        return json.dumps(s, ensure_ascii=escaped)
    return encode


def _new_value(value: _SourceValue, text: str, new: str, encode) -> str:
    """The JSON text of a `source` value holding `new`, in the form and layout of the old one."""
    if not value.is_list:
        return encode(new)
    import difflib  # only where a cell changed (a one-file convert imports it for --diff alone)

    old_tokens = [text[e.start:e.end] for e in value.elements]
    old = [json.loads(t) for t in old_tokens]
    lines = new.splitlines(True)  # as nbformat splits a cell
    tokens: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, lines, autojunk=False).get_opcodes():
        tokens.extend(old_tokens[i1:i2] if tag == "equal" else (encode(s) for s in lines[j1:j2]))
    if not tokens:
        return "[]"
    if not value.elements:  # an empty cell does not change; written as nbformat would, should one
        return "[" + ", ".join(tokens) + "]"
    lead = text[value.start + 1:value.elements[0].start]
    trail = text[value.elements[-1].end:value.end - 1]
    sep = text[value.elements[0].end:value.elements[1].start] if len(value.elements) > 1 else "," + lead
    return "[" + lead + sep.join(tokens) + trail + "]"


def convert_notebook(data: bytes, path: str, rule_classes: Sequence[type[PythonRule]],
                     options: RunOptions) -> tuple[bytes, list[Finding]]:
    """A notebook's code cells converted with `rule_classes` (see the module's docstring); NotebookError
    (a SourceError) for a file that is no nbformat 4 notebook."""
    nb = _prepared(_notebook(data, path), path)
    _last[:] = [None, None]
    findings = list(nb.left)
    changed: dict[int, str] = {}
    if nb.cells:
        whole = _convert_cells(nb.cells, nb, path, rule_classes, options)
        if whole is None:  # cell by cell, as far as each goes
            for cell in nb.cells:
                one = _convert_cells([cell], nb, path, rule_classes, options)
                if one is None:
                    starts = [0, *(m.end() for m in re.finditer("\n", nb.text))]
                    line, col = _position(cell, nb.text, starts, 1, 1)
                    findings.append(Finding(path, line, col, NOTEBOOK_RULE, "warning",
                                            f"cell {cell.number} left as it is: its Python cannot be converted "
                                            f"[cell {cell.number}, line 1]"))
                    continue
                changed.update(one[0])
                findings.extend(one[1])
        else:
            changed, more = whole
            findings.extend(more)
    if not changed:
        return data, findings
    encode = _encoder(nb.text)
    pieces, at = [], 0
    for cell in sorted((c for c in nb.cells if c.index in changed), key=lambda c: c.value.start):
        pieces += [nb.text[at:cell.value.start], _new_value(cell.value, nb.text, changed[cell.index], encode)]
        at = cell.value.end
    pieces.append(nb.text[at:])
    text = "".join(pieces)
    _verify(nb.doc, text, changed)
    return (("\ufeff" if nb.bom else "") + text).encode("utf-8"), findings


def _verify(doc: dict, text: str, changed: dict[int, str]) -> None:
    """The notebook written back loads as the old one with the changed sources (or this is a bug)."""
    new = json.loads(text)
    for index, source in changed.items():
        cell = new["cells"][index]
        got = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if got != source:
            raise SourceError(f"internal error: cell {index + 1} was not written back as converted")
        cell["source"] = doc["cells"][index]["source"]
    if json.dumps(new) != json.dumps(doc):  # (NaN in an output is not equal to itself)
        raise SourceError("internal error: the notebook written back differs outside the converted cells")

"""Small LibCST helpers for reading and editing literals: strings, dict displays and call arguments.

They keep the user's quoting and layout: a new key takes the quote style of its neighbours, an
element added to a multi-line dict follows that dict's line breaks, and removing an argument leaves
no dangling comma.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst


def string_value(node: Optional[cst.CSTNode]) -> Optional[str]:
    """The text of a plain (non-bytes, non-f) string literal, else None (also for no node)."""
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower():
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def with_string_value(node: cst.SimpleString, text: str) -> cst.SimpleString:
    """`node` holding `text` instead, same prefix and quotes. `text` must need no escaping."""
    return node.with_changes(value=f"{node.prefix}{node.quote}{text}{node.quote}")


def quote_like(nodes: Sequence[cst.CSTNode]) -> str:
    """The quote character the first string literal among `nodes` uses (double quotes if none)."""
    for node in nodes:
        if isinstance(node, cst.SimpleString) and len(node.quote) == 1:
            return node.quote
    return '"'


def new_string(text: str, quote: str = '"') -> cst.SimpleString:
    return cst.SimpleString(f"{quote}{text}{quote}")


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_args(call: cst.Call) -> bool:
    """True when `*args` or `**kwargs` may supply arguments we cannot see."""
    return any(arg.star for arg in call.args)


def dict_string_keys(node: cst.Dict) -> dict[str, cst.DictElement]:
    """Literal string keys of a dict display, first occurrence of each."""
    out: dict[str, cst.DictElement] = {}
    for el in node.elements:
        if isinstance(el, cst.DictElement):
            key = string_value(el.key)
            if key is not None:
                out.setdefault(key, el)
    return out


def element_keys(node: cst.Dict) -> list[cst.BaseExpression]:
    return [el.key for el in node.elements if isinstance(el, cst.DictElement)]


def remove_arg(args: Sequence[cst.Arg], index: int) -> list[cst.Arg]:
    """`args` without `args[index]` and its trailing comment; removing the last argument moves its
    trailing comma and the line break before `)` to the new last one, which keeps its own comment."""
    out = list(args)
    removed = out.pop(index)
    if index == len(out) and out:
        prev = out[-1]
        comma = prev.comma
        own = comma.whitespace_after if isinstance(comma, cst.Comma) else None
        gone = (removed.comma.whitespace_after if isinstance(removed.comma, cst.Comma)
                else removed.whitespace_after_arg)
        if isinstance(comma, cst.Comma) and isinstance(own, cst.ParenthesizedWhitespace) \
                and isinstance(gone, cst.ParenthesizedWhitespace):
            ws = own.with_changes(indent=gone.indent, last_line=gone.last_line)
            out[-1] = prev.with_changes(comma=comma.with_changes(whitespace_after=ws))
        else:
            out[-1] = prev.with_changes(comma=removed.comma, whitespace_after_arg=removed.whitespace_after_arg)
    return out


def _newline_then(indent: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=False,
                                       last_line=cst.SimpleWhitespace(indent))


def _is_multiline(node: cst.Dict) -> bool:
    spots = [node.lbrace.whitespace_after] + [
        el.comma.whitespace_after for el in node.elements if isinstance(el.comma, cst.Comma)]
    return any(isinstance(ws, cst.ParenthesizedWhitespace) for ws in spots)


def append_dict_elements(node: cst.Dict, new: Sequence[cst.DictElement], *, line_indent: str,
                         indent_unit: str = "    ", explode: bool = False) -> cst.Dict:
    """`node` with `new` elements appended.

    A multi-line dict gets one element per line in its own style. A one-line dict stays on one line
    unless `explode` is set; then it is laid out one element per line, the elements indented one
    `indent_unit` deeper than `line_indent` (the indentation of the line the dict starts on).
    """
    if not new:
        return node
    elements = list(node.elements)
    if _is_multiline(node) and elements:
        sep = (elements[-2].comma.whitespace_after if len(elements) >= 2 and isinstance(elements[-2].comma, cst.Comma)
               else node.lbrace.whitespace_after)
        last_comma = elements[-1].comma
        elements[-1] = elements[-1].with_changes(comma=cst.Comma(whitespace_after=sep))
        added = [el.with_changes(comma=cst.Comma(whitespace_after=sep)) for el in new]
        added[-1] = added[-1].with_changes(comma=last_comma)
        return node.with_changes(elements=elements + added)
    if explode:
        inner = _newline_then(line_indent + indent_unit)
        laid = [el.with_changes(comma=cst.Comma(whitespace_after=inner)) for el in elements + list(new)]
        laid[-1] = laid[-1].with_changes(comma=cst.Comma())
        return node.with_changes(elements=laid, lbrace=cst.LeftCurlyBrace(whitespace_after=inner),
                                 rbrace=cst.RightCurlyBrace(whitespace_before=_newline_then(line_indent)))
    inline = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    tail = elements[-1].comma if elements else cst.MaybeSentinel.DEFAULT
    if elements:
        elements[-1] = elements[-1].with_changes(comma=inline)
    added = [el.with_changes(comma=inline) for el in new]
    added[-1] = added[-1].with_changes(comma=tail)
    return node.with_changes(elements=elements + added)


def dict_element(key: str, value: cst.BaseExpression, quote: str = '"') -> cst.DictElement:
    return cst.DictElement(key=new_string(key, quote), value=value,
                           whitespace_after_colon=cst.SimpleWhitespace(" "))


def line_indent(text: str, line: int) -> str:
    """Leading whitespace of 1-based `line` of `text`."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    src = lines[line - 1]
    return src[: len(src) - len(src.lstrip(" \t"))]


def append_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """`call` with `arg` added last, on its own line when the arguments already are one per line."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)])
    seps = [a.comma.whitespace_after for a in args[:-1] if isinstance(a.comma, cst.Comma)]
    multiline = any(isinstance(ws, cst.ParenthesizedWhitespace) for ws in seps + [call.whitespace_before_args])
    sep = (seps[-1] if seps else call.whitespace_before_args) if multiline else cst.SimpleWhitespace(" ")
    last = args[-1]
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=sep), whitespace_after_arg=cst.SimpleWhitespace(""))
    # The old last argument's trailing comma and the space before `)` now follow the new one.
    return call.with_changes(args=args + [arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)])


def is_main_guard(stmt: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":` (either way round)."""
    if not isinstance(stmt, cst.If) or not isinstance(stmt.test, cst.Comparison):
        return False
    test = stmt.test
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s.value for s in sides if isinstance(s, cst.Name)]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]

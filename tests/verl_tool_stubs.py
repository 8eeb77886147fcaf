"""A stand-in for `verl.tools.function_tool` (its `@function_tool` decorator and registry), for the tests
that run generated agent code on CPU without VERL."""

from __future__ import annotations

import types


def function_tool_module() -> dict:
    """The module's attributes: `function_tool` registers a function under its name, with the tool schema
    VERL's agent loop reads (`tool_schema.model_dump()`)."""
    registry: dict = {}

    def function_tool(fn):
        schema = {"type": "function", "function": {"name": fn.__name__}}
        registry[fn.__name__] = types.SimpleNamespace(name=fn.__name__, fn=fn, tool_schema=types.SimpleNamespace(
            model_dump=lambda: schema))
        return fn

    return {"FUNCTION_TOOL_REGISTRY": registry, "function_tool": function_tool, "get_function_tool": registry.__getitem__}

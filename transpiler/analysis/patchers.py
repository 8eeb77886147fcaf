"""The calls that patch a name (`setattr`, `mock.patch`, ...) and what counts as naming torch.cuda: what
the LibCST walk (core/python_source) leaves as written where a shim points it at torch.cuda."""

from __future__ import annotations

PATCHERS = frozenset({"setattr", "delattr", "monkeypatch.setattr", "monkeypatch.delattr", "patch",
                      "mock.patch", "unittest.mock.patch", "patch.object", "mock.patch.object"})
# The last part of every patcher's name, `.patch` and `.patch.object` included: a call whose callee ends
# otherwise (nearly all of them) is told apart without building its dotted name.
PATCHER_ENDS = frozenset({"setattr", "delattr", "patch", "object"})


def is_patcher(name: str) -> bool:
    """Whether a call of the dotted name `name` patches its first argument."""
    return name in PATCHERS or name.endswith((".patch", ".patch.object"))


def names_torch_cuda(name: str) -> bool:
    return name == "torch.cuda" or name.startswith("torch.cuda.")

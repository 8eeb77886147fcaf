"""The strings an annotation holds (only a literal may replace them, --keep-cuda): the hand walk over
the common annotation shapes finds exactly what a full LibCST visit finds."""

from __future__ import annotations

import libcst as cst
import pytest

from npu_port.codemods._device_agnostic import _hold_strings, _Strings

ANNOTATIONS = [
    "int",
    "torch.Tensor",
    "Optional[dict[str, 'Tensor']]",
    'Literal["cuda", "npu"] | None',
    "x.y['cuda'].z",
    "Tuple[int, ...]",
    'Annotated[str, f"{d or "cuda"}"]',
    "Callable[[str], 'cuda']",
    "a[1:'b']",
    "'cuda' 'npu'",
    "list[(lambda: 'cuda')()]",
]


@pytest.mark.parametrize("annotation", ANNOTATIONS)
def test_the_hand_walk_holds_what_the_visitor_holds(annotation):
    module = cst.parse_module(f"x: {annotation}\n")
    node = module.body[0].body[0].annotation  # type: ignore[attr-defined]
    walked: set[int] = set()
    visited: set[int] = set()
    _hold_strings(node, walked)
    node.visit(_Strings(visited))
    assert walked == visited
    assert bool(walked) is ("'" in annotation or '"' in annotation)

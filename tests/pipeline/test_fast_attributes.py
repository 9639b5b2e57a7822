"""The objects a turn reads on every call keep their fields on CPython 3.11's fast path.

CPython 3.11 specializes `obj.field` to a direct read of the instance's inline values — until
the instance's `__dict__` is made as a dict, as `functools.cached_property` or a write through
`obj.__dict__` makes it. From then on every read of every field of that object takes the slow
path, about four times the cost; the prompt builder, the call plans and the change context
lost 4% of a chain's step that way (issue 26). A warm read's specialized instruction tells it:
LOAD_ATTR_INSTANCE_VALUE, not LOAD_ATTR_WITH_HINT or an unspecialized LOAD_ATTR.
"""

from __future__ import annotations

import dis
import sys
from pathlib import Path
from typing import Any

import pytest
from test_context_window import CHAINED

import soul
from soul.kinds.stepkind import ChangeContext
from soul.providers.scripted import ScriptedProvider

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="reads CPython 3.11's specialized instruction names")


def _read_path(obj: Any, field: str) -> str:
    """The instruction a warm `obj.field` read was specialized to."""
    space: dict[str, Any] = {}
    exec(f"def read(o):\n    return o.{field}\n", space)  # a fixed one-line function of a field name
    read = space["read"]
    for _ in range(200):
        read(obj)
    return next(i.opname for i in dis.get_instructions(read, adaptive=True) if i.opname.startswith("LOAD_ATTR"))


def test_the_objects_a_call_reads_keep_their_fields_on_the_fast_path(tmp_path: Path) -> None:
    path = tmp_path / "chained.yaml"
    path.write_text(CHAINED)
    replies = ["<mental_query>true</mental_query>"] * 3
    s = soul.load(path, provider=ScriptedProvider(replies), home=tmp_path / "home")
    try:
        result = s.session(user="ada").turn_sync("Is everything fine?")
        assert result.steps == {name: {"result": True} for name in "abc"}
        # after a turn: the persona was read, each call plan named, the gated units found
        scope = s.plan.turn
        call = scope.call_plan(scope.units[0], scope.units[0].steps)
        assert call.where.startswith("the call of step a on ")
        assert scope.gated == frozenset()
        builder = s.services.builder
        assert builder.persona
        for what, obj, field in (("the prompt builder", builder, "fitter"), ("a call plan", call, "steps"),
                                 ("the turn's scope plan", scope, "units"), ("a change context", ChangeContext({}, {}), "state")):
            assert _read_path(obj, field) == "LOAD_ATTR_INSTANCE_VALUE", f"{what} reads its fields by the slow path"
    finally:
        s.close()

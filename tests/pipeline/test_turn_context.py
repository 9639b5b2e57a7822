"""`TurnContext.changed`: what `dataclasses.replace` makes, at a fraction of its cost."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from soul.runtime.turn.context import TurnContext

_VALUES = {
    "text": st.text(max_size=5), "user": st.text(max_size=5), "number": st.integers(0, 9),
    "state": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    "persona": st.none() | st.text(max_size=5), "revise": st.none() | st.text(max_size=5),
    "chetana": st.none() | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    "steps": st.dictionaries(st.text(max_size=3), st.just({"result": True}), max_size=2),
}


@given(st.fixed_dictionaries({}, optional=_VALUES))
def test_a_changed_context_is_what_replace_makes_and_shares_its_turns_caches(changes: dict) -> None:  # type: ignore[type-arg]
    ctx = TurnContext("hello", "ada", number=3, state={"mood": "calm"})
    ctx.shared["memory"] = "the turn's views"
    made, expected = ctx.changed(**changes), replace(ctx, **changes)
    assert made == expected and type(made) is TurnContext
    assert all(getattr(made, f.name) is getattr(expected, f.name) for f in fields(TurnContext))
    assert made.shared is ctx.shared  # what the turn's calls work out stays with the turn
    assert ctx == TurnContext("hello", "ada", number=3, state={"mood": "calm"})  # the original is untouched


def test_an_unknown_field_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no field colour"):
        TurnContext("hello").changed(colour="blue")

"""All or nothing: a failure at any point of a turn leaves the session exactly as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from souls import claudius_reply

import soul
import soul.runtime.session
import soul.runtime.turn.calls
import soul.runtime.turn.prompting.prompt
import soul.runtime.turn.runner
import soul.steps.user_model
from soul.providers.scripted import ScriptedProvider


class Boom(Exception):
    pass


def _raise(*args: Any, **kwargs: Any) -> Any:
    raise Boom("injected")


POINTS = [
    ("the turn context", soul.runtime.turn.context, "context_for"),
    ("prompt assembly", soul.runtime.turn.prompting.prompt.PromptBuilder, "build"),
    ("the model call", ScriptedProvider, "_next"),
    ("parsing the reply", soul.runtime.turn.calls, "extract_sections"),
    ("typing the outputs", soul.runtime.turn.calls, "parse_step"),
    ("a step's changes", soul.steps.user_model.UserModelUpdate, "changes"),
    ("building the commit", soul.runtime.session, "build_commit"),
    ("the store's commit", None, "apply"),
]


@pytest.mark.parametrize(("where", "owner", "name"), POINTS, ids=[p[0] for p in POINTS])
@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
def test_a_failure_leaves_the_session_as_before(where: str, owner: Any, name: str, error: type[BaseException], soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply(), claudius_reply(model="# Ada v2")]), home=soul_home)
    session = s.session(user="ada")
    session.turn_sync("first")
    before = s.store.snapshot(session.id)
    messages_before = s.store.messages(session.id)
    model_before = s.store.user_model_history("claudius", "ada")

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error("injected")

    target = owner if owner is not None else type(s.store)
    monkeypatch.setattr(target, name, fail if not isinstance(getattr(target, name, None), classmethod) else classmethod(fail))
    with pytest.raises(error):
        session.turn_sync("second")
    monkeypatch.undo()
    assert s.store.snapshot(session.id) == before
    assert s.store.messages(session.id) == messages_before
    assert s.store.user_model_history("claudius", "ada") == model_before
    # and the session still works afterwards
    s2 = soul.load("claudius", provider=ScriptedProvider([claudius_reply(check="false")]), home=soul_home)
    assert s2.session(session.id).turn_sync("third").turn == 2

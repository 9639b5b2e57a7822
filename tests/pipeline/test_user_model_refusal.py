"""The user model never stores what is not a user model (issue 24, 15a): an update that holds
only `true`/`false` (a tiny model copying the check) or a copy of the reply is refused and
re-asked, like a missing section; when the re-ask is no better, the user model is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from souls import SAMANTHA_LEARNS, SAMANTHA_TURN, claudius_reply

import soul
from soul.providers import ScriptedProvider

REPLY = "Hello, Ada. Compilers, then — a noble way to suffer."
GOOD = "# Ada\n\n## Persona\nBuilds compilers."


def claudius(replies: list[str], home: Path) -> tuple[soul.Soul, ScriptedProvider]:
    provider = ScriptedProvider(replies)
    return soul.load("claudius", provider=provider, home=home), provider


@pytest.mark.parametrize("bad", ["true", "false", " **True.** ", REPLY, f"  {REPLY.upper()}\n"],
                         ids=["true", "false", "decorated", "the-reply", "the-reply-shouted"])
def test_an_update_that_is_not_a_user_model_is_re_asked(soul_home: Path, bad: str) -> None:
    s, provider = claudius([claudius_reply(REPLY, model=bad), claudius_reply("Another reply.", model=GOOD)], soul_home)
    result = s.session(user="ada").turn_sync("Hi, I'm Ada. I build compilers.")
    assert provider.calls == 2
    asked = provider.requests[1].messages[-1].content
    assert "<user_model_update>" in asked and "not a user model" in asked
    stored = s.store.user_model("claudius", "ada")
    assert stored is not None and stored.text == GOOD
    assert result.reply == REPLY  # what parsed the first time stands
    assert result.trace.calls[0].attempts == 2


def test_an_update_still_not_a_user_model_after_the_re_ask_leaves_it_unchanged(soul_home: Path) -> None:
    s, provider = claudius([claudius_reply(REPLY, model="true"), claudius_reply(REPLY, model="true")], soul_home)
    result = s.session(user="ada").turn_sync("Hi")
    assert provider.calls == 2
    assert s.store.user_model("claudius", "ada") is None
    assert result.steps["user_update"]["model"] is None
    flags = next(st.flags for st in result.trace.steps if st.step == "user_update")
    assert any("refused" in f and "not a user model" in f for f in flags), flags


def test_a_real_update_is_stored_at_once(soul_home: Path) -> None:
    s, provider = claudius([claudius_reply(REPLY, model=GOOD)], soul_home)
    s.session(user="ada").turn_sync("Hi")
    assert provider.calls == 1
    assert s.store.user_model("claudius", "ada").text == GOOD  # type: ignore[union-attr]


def test_a_chained_update_copying_the_reply_is_refused(soul_home: Path) -> None:
    copied = SAMANTHA_TURN[2].split(">", 1)[1].split("<", 1)[0]  # the reply's text
    bad = f"<user_model_update>{copied}</user_model_update><model_change_note>x</model_change_note>"
    provider = ScriptedProvider([*SAMANTHA_TURN, SAMANTHA_LEARNS[0], bad, SAMANTHA_LEARNS[1]])
    s = soul.load("samantha", provider=provider, home=soul_home)
    s.session(user="bo").turn_sync("I'm Bo, I write compilers.")
    assert provider.calls == 6
    model = s.store.user_model("samantha", "bo")
    assert model is not None and "Compilers." in model.text


def test_an_update_equal_to_the_current_user_model_is_no_copy(soul_home: Path) -> None:
    s, provider = claudius([claudius_reply(REPLY, model=GOOD), claudius_reply("Again.", model=GOOD)], soul_home)
    session = s.session(user="ada")
    session.turn_sync("Hi")
    session.turn_sync("more")
    assert provider.calls == 2  # the model, shown in the prompt, rewritten unchanged: nothing re-asked
    assert s.store.user_model("claudius", "ada").text == GOOD  # type: ignore[union-attr]

"""Streaming turns: only the streamed section's text reaches the caller, as it is written."""

from __future__ import annotations

import asyncio
from pathlib import Path

from souls import claudius_reply

import soul
from soul.providers.scripted import ScriptedProvider
from soul.runtime.events import Reply, StepFinished, StepStarted, Token, TurnCommitted


def collect(s: soul.Soul, text: str) -> list[object]:
    session = s.session(user="ada")

    async def go() -> list[object]:
        return [event async for event in session.stream(text)]

    return asyncio.run(go())


def test_tokens_come_only_from_the_reply_and_add_up_to_it(soul_home: Path) -> None:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply("Hello &amp; welcome, Ada.")]), home=soul_home)
    events = collect(s, "hi")
    tokens = [e for e in events if isinstance(e, Token)]
    assert len(tokens) > 1  # it really streamed
    assert {t.step for t in tokens} == {"reply"}
    assert "".join(t.text for t in tokens).strip() == "Hello & welcome, Ada."
    joined = "".join(t.text for t in tokens)
    assert "She builds compilers" not in joined and "true" not in joined and "# Ada" not in joined


def test_events_arrive_in_order(soul_home: Path) -> None:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply()]), home=soul_home)
    events = collect(s, "hi")
    kinds = [type(e).__name__ for e in events]
    assert kinds[:2] == ["StepStarted", "StepFinished"]  # memory recall, before the call
    assert kinds[2:6] == ["StepStarted"] * 4
    assert kinds[-2:] == ["Reply", "TurnCommitted"]
    first_token = kinds.index("Token")
    assert all(k == "Token" for k in kinds[first_token : kinds.index("StepFinished", first_token)])
    finished = [e.step for e in events if isinstance(e, StepFinished)]
    assert finished == ["recall", "think", "reply", "user_check", "user_update"]
    reply = next(e for e in events if isinstance(e, Reply))
    assert reply.text.startswith("Hello, Ada")
    assert isinstance(events[-1], TurnCommitted) and events[-1].turn == 1
    assert isinstance(events[0], StepStarted)


def test_a_reask_before_the_reply_opened_is_invisible(soul_home: Path) -> None:
    bad = '<internal_monologue verb="mused">Hm, secret thought.</internal_monologue> and then nothing'
    s = soul.load("claudius", provider=ScriptedProvider([bad, claudius_reply("Second try.")]), home=soul_home)
    events = collect(s, "hi")
    streamed = "".join(e.text for e in events if isinstance(e, Token))
    assert streamed.strip() == "Second try."
    assert "secret" not in streamed


def test_once_the_reply_has_streamed_it_stands_and_only_what_is_missing_is_reasked(soul_home: Path) -> None:
    cut = '<internal_monologue verb="mused">x</internal_monologue><external_dialogue verb="said">Seen already.</external_dialogue>'
    provider = ScriptedProvider([cut, claudius_reply("never used", check="false")])
    s = soul.load("claudius", provider=provider, home=soul_home)
    events = collect(s, "hi")
    # the check was missing: asked again (not streamed), as a turn nobody listens to would be
    assert provider.calls == 2
    assert "".join(e.text for e in events if isinstance(e, Token)) == "Seen already."
    assert next(e for e in events if isinstance(e, Reply)).text == "Seen already."


def test_a_fallback_reply_is_delivered_whole_not_streamed(soul_home: Path) -> None:
    s = soul.load("claudius", provider=ScriptedProvider(["plain words", "plain words again"]), home=soul_home)
    events = collect(s, "hi")
    assert not [e for e in events if isinstance(e, Token)]
    assert next(e for e in events if isinstance(e, Reply)).text == "plain words again"

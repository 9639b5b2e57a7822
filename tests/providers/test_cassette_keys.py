"""Only reply-changing parameters key a recorded call (issue 12.15): a cassette recorded with
`retries: 2` replays under `retries: 5`, and cassettes keyed the older way are still found."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from soul.errors import ReplayMiss
from soul.providers import Request
from soul.providers.cassette import Call, Cassette, key_of, old_key_of
from soul.providers.replay import ReplayProvider, recording
from soul.providers.scripted import ScriptedProvider
from soul.runtime.turn.prompting.prompt import Message

MESSAGES = (Message("system", "s"), Message("user", "hi"))
POLICY = {"timeout": 3.0, "retries": 2, "backoff": 0.5, "breaker_failures": 4, "breaker_cooldown": 9.0}


def request(**options: object) -> Request:
    return Request("anthropic/claude-x", MESSAGES, {"temperature": 0.5, "max_tokens": 10, **options})


@given(st.fixed_dictionaries({}, optional={
    "timeout": st.floats(0.1, 600), "retries": st.integers(0, 10), "backoff": st.floats(0, 5),
    "breaker_failures": st.integers(1, 50), "breaker_cooldown": st.floats(0, 600),
    "base_url": st.text(max_size=20), "n_threads": st.integers(1, 64),
}))
def test_policy_and_transport_options_never_change_the_key(options: dict[str, object]) -> None:
    assert key_of(request(**options)) == key_of(request()) == "793438f1c931d4cf"


@pytest.mark.parametrize("option", [{"temperature": 0.9}, {"max_tokens": 11}, {"top_p": 0.5}, {"seed": 1},
                                    {"grammar": False}, {"stop": ["x"]}, {"repeat_penalty": 1.2}, {"n_ctx": 512}])
def test_reply_changing_options_change_the_key(option: dict[str, object]) -> None:
    assert key_of(request(**option)) != key_of(request())


def test_a_recording_replays_when_only_retries_changed(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    provider = recording(path)(ScriptedProvider(["recorded reply"]))
    asyncio.run(provider.complete(request(**POLICY)))
    replay = ReplayProvider.from_file(path)
    got = asyncio.run(replay.complete(request(retries=5, timeout=30.0, breaker_cooldown=1.0)))
    assert got.text == "recorded reply"
    with pytest.raises(ReplayMiss):
        asyncio.run(replay.complete(request(temperature=0.9)))


def test_a_cassette_keyed_the_old_way_is_still_found(tmp_path: Path) -> None:
    old = request(retries=2)
    assert old_key_of(old) != key_of(old)  # the old key hashed retries
    cassette = Cassette(tmp_path / "old.yaml", [Call(
        old_key_of(old), "anthropic", "claude-x", {"max_tokens": 10, "retries": 2, "temperature": 0.5},
        [{"role": m.role, "content": m.content} for m in MESSAGES], "old reply", {},
    )])
    cassette.save()
    replay = ReplayProvider.from_file(cassette.path)
    assert asyncio.run(replay.complete(request(retries=2))).text == "old reply"

"""A real token off localhost (issue 24.10): `SOUL_SERVE_TOKEN` refuses tokens too short or too
plain to resist guessing, is compared in constant time, and repeated wrong tokens from one
address are slowed down (a growing lockout, 429 with Retry-After)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from serving import claudius_reply
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

import soul
from soul.cli.main import main
from soul.providers import ScriptedProvider
from soul.serve import Guard, ServeError, create_app
from soul.serve.guard import FREE_FAILURES, Lockout

GOOD = secrets.token_urlsafe(32)


@pytest.mark.parametrize("token", [
    "x", " ", "1234", "short-token", "1234567890123456", "aaaaaaaaaaaaaaaaaaaaaaaa",
    "abababababababababababab", "correct horse battery staple",
    # random tokens get fixed ids: pytest-xdist's workers must collect the same ids
    pytest.param(" " + GOOD, id="space+random"), pytest.param(GOOD + "\n", id="random+newline"),
])
def test_a_token_too_short_or_too_plain_is_refused(token: str) -> None:
    with pytest.raises(ServeError, match="SOUL_SERVE_TOKEN") as refused:
        Guard("0.0.0.0", token)
    assert "token_urlsafe" in str(refused.value)  # says how to make a good one
    assert token.strip() not in str(refused.value) or len(token.strip()) < 2  # and never echoes it


@pytest.mark.parametrize("token", [
    pytest.param(GOOD, id="urlsafe32"), pytest.param(secrets.token_hex(8), id="hex8"),
    pytest.param(secrets.token_hex(32), id="hex32"), "Tr0ub4dor-and-3-more-words",
])
def test_a_long_random_token_is_accepted(token: str) -> None:
    assert Guard("0.0.0.0", token).token == token
    assert Guard("127.0.0.1", token).token == token  # the same rule on localhost


def test_soul_serve_refuses_a_weak_token_before_listening(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SOUL_SERVE_TOKEN", "1234")
    assert main(["serve", "claudius", "--host", "0.0.0.0", "--port", "9"]) == 1
    err = capsys.readouterr().err
    assert "SOUL_SERVE_TOKEN" in err and "16" in err


def test_the_comparison_hides_the_token_length() -> None:
    guard = Guard("0.0.0.0", GOOD)
    assert guard.token_ok({"authorization": f"Bearer {GOOD}"}, {})
    assert guard.token_ok({}, {"token": GOOD})
    for wrong in ("", "x", GOOD[:-1], GOOD + "x", GOOD.upper()):
        assert not guard.token_ok({"authorization": f"Bearer {wrong}"}, {})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_repeated_wrong_tokens_lock_the_address_out_for_longer_each_time(soul_home: Path) -> None:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply("ok")]))
    app = create_app(s, lambda result, thoughts: result.to_json(), Guard("0.0.0.0", GOOD))
    clock = Clock()
    app.lockout.clock = clock  # type: ignore[attr-defined]
    right = {"authorization": f"Bearer {GOOD}"}
    with TestClient(app, base_url="http://192.0.2.10:8765") as api:
        for _ in range(FREE_FAILURES):
            assert api.get("/api/sessions", headers={"authorization": "Bearer guess"}).status_code == 401
        locked = api.get("/api/sessions", headers={"authorization": "Bearer guess"})
        assert locked.status_code == 429 and locked.headers["retry-after"] == "1"
        assert "too many wrong tokens" in locked.json()["error"]
        assert api.get("/api/sessions", headers=right).status_code == 429  # even the right one waits
        with pytest.raises(WebSocketDisconnect) as closed, api.websocket_connect(f"ws://192.0.2.10:8765/api/sessions/x/events?token={GOOD}"):
            pass
        assert closed.value.code == 1008
        clock.now += 1.01
        assert api.get("/api/sessions", headers={"authorization": "Bearer guess"}).status_code == 429
        assert api.get("/api/sessions", headers=right).status_code == 429  # the lock doubled: 2 s
        clock.now += 2.01
        assert api.get("/api/sessions", headers=right).status_code == 200  # a success clears it
        assert api.get("/api/sessions", headers={"authorization": "Bearer guess"}).status_code == 401
    s.close()


def test_the_lockout_is_per_address_capped_and_bounded_in_memory() -> None:
    clock = Clock()
    lockout = Lockout(clock=clock, addresses=3)
    waits = []
    for _ in range(FREE_FAILURES + 20):
        lockout.failed("10.0.0.1")
        waits.append(lockout.wait("10.0.0.1"))
        clock.now += waits[-1]  # the guesser waits out each lock
    assert waits[:FREE_FAILURES + 4] == [0.0] * FREE_FAILURES + [1.0, 2.0, 4.0, 8.0]
    assert max(waits) == waits[-1] == 300.0  # capped at five minutes
    assert lockout.wait("10.0.0.2") == 0  # another address is not slowed
    for n in range(10):
        lockout.failed(f"10.0.1.{n}")
    assert len(lockout) <= 3  # the oldest addresses are forgotten first

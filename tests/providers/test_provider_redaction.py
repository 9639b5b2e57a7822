"""API keys never appear in logs, traces, cassettes or error messages."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPLY, TEST_KEY
from wire_server import Fault, WireServer

import soul
from soul.errors import AuthError
from soul.providers.replay import recording
from soul.providers.secrets import redact

pytest.importorskip("anthropic")


def test_redact_blanks_known_keys_env_secrets_and_key_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-abcdefgh-1234")
    assert redact("a tok-abcdefgh-1234 b") == "a [redacted] b"
    assert redact("key sk-proj-ABCDEFGHIJKLMNOPQRSTUV here") == "key [redacted] here"
    assert redact("nothing secret here") == "nothing secret here"


def test_a_key_never_reaches_logs_traces_cassettes_or_errors(
    wire: WireServer, keys: str, wired_soul: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # the SDKs and httpx log requests at debug level
    cassette = tmp_path / "c.yaml"
    s = soul.load(wired_soul("anthropic/claude-test", wire.anthropic_url), home=tmp_path / "home", wrap=recording(cassette))
    session = s.session()
    wire.replies.append(REPLY)
    result = session.turn_sync("Hello")
    wire.faults.append(Fault(status=401))  # the server echoes the key it got
    with pytest.raises(AuthError) as caught:
        session.turn_sync("Again")
    trace = json.dumps(s.store.trace(session.id, result.turn), default=str)
    s.close()
    assert any(r.name.startswith(("anthropic", "httpx")) for r in caplog.records)  # logging was on
    assert TEST_KEY in json.dumps([r.headers for r in wire.requests])  # it was sent...
    for where, text in {
        "logs": caplog.text, "trace": trace, "cassette": cassette.read_text(), "error": str(caught.value),
        "result": json.dumps(result.to_json(), default=str),
    }.items():
        assert TEST_KEY not in text, where  # ...and written nowhere
        assert TEST_KEY[8:24] not in text, where

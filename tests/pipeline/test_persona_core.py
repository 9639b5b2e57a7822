"""The Persona Core a background process starts from: snapshotted once, verbatim, as a row and
as persona_core_snapshot.md in the session's log folder."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from store_backends import backend, store_url  # noqa: F401 - fixtures

from soul.errors import SessionNotFound, StoreError
from soul.store import PersonaCore, SessionStore
from soul.store.home import session_logs_dir

CORE = "# Persona Core\n\nYou are the undercurrent. Never speak aloud. — ü\n"


@pytest.fixture
def store(store_url: str | None) -> Iterator[SessionStore]:  # noqa: F811 - the fixture
    with SessionStore.open() as opened:
        yield opened


def test_the_first_snapshot_is_kept_as_row_and_file(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    assert store.persona_core(sid, "subconscious") is None
    core = store.snapshot_persona_core(sid, "subconscious", "/souls/persona_core.md", CORE)
    assert isinstance(core, PersonaCore)
    assert (core.process, core.path, core.text) == ("subconscious", "/souls/persona_core.md", CORE)
    assert core.sha256 == hashlib.sha256(CORE.encode("utf-8")).hexdigest()
    snapshot = session_logs_dir(sid) / "persona_core_snapshot.md"
    assert snapshot.read_text(encoding="utf-8") == CORE
    assert store.persona_core(sid, "subconscious") == core
    assert store.persona_core_file(sid, "subconscious") == snapshot


def test_a_second_snapshot_returns_the_first_unchanged(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    core = store.snapshot_persona_core(sid, "subconscious", "a.md", CORE)
    again = store.snapshot_persona_core(sid, "subconscious", "b.md", "# edited since")
    assert again == core
    assert (session_logs_dir(sid) / "persona_core_snapshot.md").read_text() == CORE
    assert store.connection.execute("SELECT count(*) FROM persona_cores").fetchone()[0] == 1


def test_a_missing_snapshot_file_is_written_again_from_the_row(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    store.snapshot_persona_core(sid, "subconscious", "a.md", CORE)
    snapshot = session_logs_dir(sid) / "persona_core_snapshot.md"
    snapshot.unlink()
    store.snapshot_persona_core(sid, "subconscious", "a.md", "# something else")
    assert snapshot.read_text() == CORE


def test_a_second_process_gets_its_own_file(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    store.snapshot_persona_core(sid, "subconscious", "a.md", CORE)
    other = store.snapshot_persona_core(sid, "dreamer", "d.md", "# Dreamer")
    folder = session_logs_dir(sid)
    assert (folder / "persona_core_snapshot.dreamer.md").read_text() == "# Dreamer"
    assert (folder / "persona_core_snapshot.md").read_text() == CORE
    assert store.persona_core(sid, "dreamer") == other


def test_the_core_is_stored_verbatim_even_with_secret_looking_text(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ant-abcdefghijklmnopqrstuvwx"
    monkeypatch.setenv("SOME_API_KEY", secret)
    sid = store.create_session("agentcsd", "ann").id
    text = f"# Core\nquote: {secret}\n"
    core = store.snapshot_persona_core(sid, "subconscious", "a.md", text)
    assert core.text == text and store.persona_core(sid, "subconscious") == core
    assert (session_logs_dir(sid) / "persona_core_snapshot.md").read_text() == text


def test_unknown_sessions_and_unsafe_process_names_are_refused(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.snapshot_persona_core("nobody", "subconscious", "a.md", CORE)
    with pytest.raises(SessionNotFound):
        store.persona_core("nobody", "subconscious")
    sid = store.create_session("agentcsd", "ann").id
    with pytest.raises(StoreError, match="invalid process name"):
        store.snapshot_persona_core(sid, "../escape", "a.md", CORE)
    assert not session_logs_dir(sid).exists() or not any(session_logs_dir(sid).glob("*.md"))


def test_deleting_the_session_deletes_its_cores(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    store.snapshot_persona_core(sid, "subconscious", "a.md", CORE)
    store.delete_session(sid)
    assert store.connection.execute("SELECT count(*) FROM persona_cores").fetchone()[0] == 0
    assert not session_logs_dir(sid).exists()


def test_export_holds_the_cores(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    core = store.snapshot_persona_core(sid, "subconscious", "a.md", CORE)
    (exported,) = store.export_session(sid)["persona_cores"]
    assert exported == {
        "process": "subconscious",
        "path": "a.md",
        "sha256": core.sha256,
        "time": core.time,
        "text": CORE,
    }

"""A key quoted in a message or a reply is written nowhere (issue 12.7): not in soul.db, not in
the JSONL logs, not in `--json`, not in a printed error or a `--debug` traceback."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from souls import claudius_reply

from soul.cli.main import _redacting_excepthook, main
from soul.errors import ProviderError
from soul.records import Commit, MemoryEntry, MessageRecord, UserModelChange
from soul.store import REDACTED, SessionStore, redact, redact_commit

KEY = "fake-anthropic-7d1c0e55b2a94f3f"  # not key-shaped: found because the variable names it


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    return KEY


def files_holding(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def talk_with_the_key(key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two turns of claudius (a memory soul) whose message, reply, thoughts and user model
    quote the key; `--json` and `sessions export` must not show it."""
    reply = claudius_reply(f"Your key is {key}.", model=f"# Ada\n\nKey: {key}", note=f"noted {key}")
    reply = reply.replace("She builds compilers", f"She pasted {key}")
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump([reply, reply]))
    for _ in range(2):  # the second turn resumes: snapshot, user model and state read back
        args = ["run", "claudius", "--script", str(script), "-m", f"my key is {key}", "--json", "--user", "ada"]
        sessions = SessionStore.open().sessions()
        if sessions:
            args += ["--session", sessions[0].id]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert key not in out and REDACTED in out
        assert json.loads(out)["reply"] == f"Your key is {REDACTED}."
    assert main(["sessions", "export", SessionStore.open().sessions()[0].id]) == 0
    assert key not in capsys.readouterr().out


def test_a_key_in_the_message_and_the_reply_is_stored_nowhere_by_the_store(
    key: str, soul_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    talk_with_the_key(key, tmp_path, capsys)
    store_files = [soul_home / "logs", *soul_home.glob("soul.db*")]
    assert list(soul_home.rglob("*.jsonl"))  # the logs were written...
    assert all(files_holding(p, key) == [] if p.is_dir() else key.encode() not in p.read_bytes() for p in store_files)
    assert files_holding(soul_home / "logs", REDACTED)


def test_a_key_in_the_message_and_the_reply_is_stored_nowhere_under_the_home(
    key: str, soul_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    talk_with_the_key(key, tmp_path, capsys)
    assert files_holding(soul_home, key) == []  # the memory field's WAL included


def test_a_printed_error_and_a_debug_traceback_redact_the_key(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        try:
            raise ValueError(f"401: the request sent x-api-key: {key}")  # an SDK echoing it
        except ValueError as sdk:
            raise ProviderError(f"anthropic: refused ({key})") from sdk
    except ProviderError as exc:
        _redacting_excepthook(type(exc), exc, exc.__traceback__)
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: 401" in err and "ProviderError" in err
    assert key not in err and err.count(REDACTED) == 2


def test_the_cli_installs_the_redacting_traceback_printer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    main(["schema"])
    assert sys.excepthook is _redacting_excepthook


def commit_with(text: str) -> Commit:
    return Commit(
        "s", 0,
        messages=(MessageRecord("external", "user", text, meta={"raw": text, text: [text]}),),
        state={"note": text, "nested": {"list": [text, 1, None]}},
        user_model=UserModelChange(text, text),
        memory=(MemoryEntry("r", "userMessage", text, meta={"q": text}),),
        chetana={"self": text},
        trace={"steps": [{"outputs": {"reply": text}}], "prompt": text},
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.text(max_size=40), after=st.text(max_size=40))
def test_every_field_of_a_commit_is_redacted(key: str, before: str, after: str) -> None:
    redacted = redact_commit(commit_with(before + key + after))
    assert key not in json.dumps(dataclasses.asdict(redacted), default=str)  # every field, records included
    assert redacted.session_id == "s" and redacted.messages[0].tag == "user"


@pytest.mark.parametrize("text", [
    "sk-ant-" + "A" * 40, "x" * 100_000 + "sk-" + "b" * 30, "sk-" * 50_000, "AKIA" + "Z" * 16,
    "xoxb-" + "1" * 10_000, "-" * 200_000,
])
def test_hostile_key_shapes_redact_in_linear_time(text: str) -> None:
    import time

    start = time.perf_counter()
    out = redact(" ".join([text] * 5))
    assert time.perf_counter() - start < 1.0
    assert "sk-ant-A" not in out and "AKIAZ" not in out


def test_a_secret_set_or_remembered_after_a_redaction_is_blanked_from_then_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from soul.store import remember

    value, remembered = "late-secret-0f3e9a71c2", "remembered-secret-4b8d2e6a"
    assert redact(f"a {value}") == f"a {value}"  # the list of secrets is read (and kept) now
    monkeypatch.setenv("LATE_SERVICE_TOKEN", value)
    assert redact(f"a {value}") == f"a {REDACTED}"  # the environment changed: read again
    monkeypatch.delenv("LATE_SERVICE_TOKEN")
    assert redact(f"a {value}") == f"a {value}"
    remember(remembered)
    assert redact(f"b {remembered}") == f"b {REDACTED}"


@pytest.mark.parametrize("secret", ["plain-secret-9c41d7e2", 'quo"ted\\secret-77', "tab\tsecret-1234"])
@pytest.mark.parametrize("where", ["content", "meta", "state", "memory meta", "trace", "trace key"])
def test_the_store_redacts_a_secret_wherever_the_commit_holds_it(
    secret: str, where: str, soul_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the store checks the commit's JSON before redacting field by field: a secret JSON writes
    # escaped (a quote, a backslash, a control character) must be found all the same
    monkeypatch.setenv("SERVICE_TOKEN", secret)
    store = SessionStore.open()
    info = store.create_session("claudius", "ann")
    text = f"it is {secret}!"
    fields = {
        "content": {"messages": (MessageRecord("external", "user", text),)},
        "meta": {"messages": (MessageRecord("external", "user", "hi", meta={"raw": text}),)},
        "state": {"state": {"note": text}},
        "memory meta": {"memory": (MemoryEntry("r", "userMessage", "hi", meta={"q": [text]}),)},
        "trace": {"trace": {"calls": [{"raw": text}]}},
        "trace key": {"trace": {text: 1}},
    }[where]
    store.commit(Commit(info.id, 0, **fields))
    store.close()
    escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
    for path in [*soul_home.glob("soul.db*"), *soul_home.rglob("*.jsonl")]:
        data = path.read_bytes()
        assert secret.encode() not in data and escaped.encode() not in data, path


def test_a_commit_with_no_secret_is_written_as_it_came(soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import soul.store.commits
    import soul.store.redaction

    monkeypatch.setenv("SERVICE_TOKEN", "unrelated-secret-5e2a")
    # only this test's secret: one an earlier test remembered (a key with a quote in it makes
    # every JSON field suspect) would otherwise decide the outcome
    monkeypatch.setattr(soul.store.redaction, "_known", set())
    monkeypatch.setattr(soul.store.redaction, "_version", soul.store.redaction._version + 1)
    calls: list[Commit] = []
    monkeypatch.setattr(soul.store.commits, "redact_commit", lambda c, known=None: calls.append(c) or c)
    store = SessionStore.open()
    info = store.create_session("claudius", "ann")
    store.commit(Commit(info.id, 0, messages=(MessageRecord("external", "user", "hello"),), trace={"raw": "hello"}))
    assert calls == []  # nothing to redact: no field-by-field copy
    store.commit(Commit(info.id, 1, messages=(MessageRecord("external", "user", "sk-not-really-a-key-but-shaped"),)))
    assert len(calls) == 1  # a key shape's opening: redacted field by field
    store.close()


NEAR_MISSES = "skxoapAKIzeyJghpusrtib_-BEGIN lvw"


@settings(max_examples=300)
@given(texts=st.lists(st.text(alphabet=NEAR_MISSES, max_size=300), max_size=8),
       json_texts=st.lists(st.text(alphabet=NEAR_MISSES + '{}":,', max_size=300), max_size=4))
def test_many_texts_could_hold_a_secret_exactly_when_one_of_them_could(texts: list[str], json_texts: list[str]) -> None:
    # The store asks once for all of a commit's texts (issue 26: one search of them joined):
    # the answer is the one each text alone would give, whatever sits next to it.
    from soul.store.redaction import could_hold_secrets

    secret = ["ape-secret-42"]
    one_by_one = any(could_hold_secrets([t], secret) for t in texts) or any(
        could_hold_secrets((), secret, json_texts=[t]) for t in json_texts
    )
    assert could_hold_secrets(texts, secret, json_texts=json_texts) == one_by_one
    for where in range(len(texts) + 1):  # a secret or a key shape in any one of them is found
        for planted in ("ape-secret-42", "sk-", "xox"):
            assert could_hold_secrets([*texts[:where], f"a {planted} b", *texts[where:]], secret, json_texts=json_texts)

"""Engine errors stop at the bridges: a broken memory field or Chetana state reaches the user
as a SoulError that says what failed, where, and how to fix it, with the engine's exception as
its cause; and steps get a read-only recall, not the field."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from souls import claudius_reply

import soul
from soul.cli.main import main
from soul.compiler import validate
from soul.engines.chetana import ConfigError as ChetanaConfigError
from soul.engines.chetana import StateError
from soul.errors import ChetanaError, MemoryFieldError
from soul.kinds.stepkind import Recall
from soul.providers.scripted import ScriptedProvider
from soul.runtime.bridges.chetana import Cognition
from soul.runtime.bridges.memory import MemoryBridge

MEMORY = """\
soul: rememberer
version: 1
memory: {{store: {{episodes: false}}{field}}}
steps:
  recall: {{uses: memory.recall, with: {{k: 3, mode: keyword}}}}
  reply: {{uses: external_dialogue, after: [recall]}}
"""


def _memory_extra() -> None:
    for module in ("numpy", "numba", "onnxruntime", "hnswlib"):
        pytest.importorskip(module)


def _blueprint(field: str | None) -> str:
    return MEMORY.format(field=f", field: {field}" if field else "")


def _bridge(write_blueprint, field: str | None, home: Path) -> MemoryBridge:  # type: ignore[no-untyped-def]
    checked = validate(write_blueprint(_blueprint(field)))
    assert checked.ok and checked.blueprint is not None
    return MemoryBridge(checked.blueprint, home)


def test_a_memory_field_that_is_a_file_fails_the_turn_with_the_fix(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    _memory_extra()
    path = write_blueprint(_blueprint("./m.md"), **{"m.md": "# notes\n"})
    s = soul.load(path, provider=ScriptedProvider(["<external_dialogue>hi</external_dialogue>"]), home=soul_home)
    with pytest.raises(MemoryFieldError) as caught:
        s.session().turn_sync("What is my cat called?")
    message = str(caught.value)
    assert "memory.field './m.md'" in message and str(path.parent / "m.md") in message  # where
    assert "is a file, not a folder" in message  # what happened
    assert "point memory.field at a folder" in message and "$SOUL_HOME/fields/rememberer" in message  # the fix
    assert isinstance(caught.value.__cause__, FileExistsError)
    s.close()


def test_a_damaged_field_names_the_file_and_the_check(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    _memory_extra()
    bridge = _bridge(write_blueprint, "field", soul_home)
    (bridge.path() / "wal").parent.mkdir(parents=True)
    (bridge.path() / "wal").write_text("not a folder")  # where the field keeps its log
    with pytest.raises(MemoryFieldError) as caught:
        bridge.reader().recall("cat", 3, mode="keyword")
    message = str(caught.value)
    assert f"memory.field 'field' ({bridge.path()})" in message and str(bridge.path() / "wal") in message
    assert "cannot open the field" in message and "damaged" in message
    assert f"soul memory check --field {bridge.path()}" in message and "move the folder away" in message
    assert isinstance(caught.value.__cause__, FileExistsError)


def test_an_engine_error_is_translated_too(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    _memory_extra()
    from soul.engines.resonance import ResonanceError

    bridge = _bridge(write_blueprint, "field", soul_home)
    bridge.field().close()  # the engine's field closed under the bridge: the engine refuses queries
    with pytest.raises(MemoryFieldError) as caught:
        bridge.reader().recall("cat", 3, mode="keyword")
    assert f"memory.field 'field' ({bridge.path()}): cannot recall from the field: the field is closed" in str(caught.value)
    assert isinstance(caught.value.__cause__, ResonanceError)


def test_remembering_into_a_file_says_so(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    _memory_extra()
    bridge = _bridge(write_blueprint, None, soul_home)  # no memory.field: $SOUL_HOME/fields/<soul>
    bridge.path().parent.mkdir(parents=True, exist_ok=True)
    bridge.path().write_text("in the way")
    with pytest.raises(MemoryFieldError) as caught:
        bridge.remember([{"text": "My cat is called Miso.", "kind": "episode"}], session="s1")
    message = str(caught.value)
    assert f"the memory field {bridge.path()} is a file, not a folder" in message
    assert f"move {bridge.path()} away" in message and "set memory.field to a folder" in message
    assert isinstance(caught.value.__cause__, FileExistsError)


def test_steps_get_a_read_only_recall(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    bridge = _bridge(write_blueprint, "field", soul_home)
    reader = bridge.reader()
    assert isinstance(reader, Recall)
    # the queries, and the same queries awaited (on the loop when quick, else in a worker thread)
    assert {name for name in dir(reader) if not name.startswith("_")} == {"recall", "resonate", "recall_soon", "resonate_soon"}
    assert not hasattr(reader, "__dict__")  # nothing can be hung on it either
    assert not bridge.path().exists()  # the field opens on the first query, not before


def test_the_reader_recalls_and_resonates(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    _memory_extra()
    bridge = _bridge(write_blueprint, "field", soul_home)
    reader = bridge.reader()
    bridge.remember([{"text": "My cat Miso is a tabby who sleeps on the piano.", "kind": "episode"}])
    hits = reader.recall("Miso", 3, mode="keyword")
    assert [h.text for h in hits] == ["My cat Miso is a tabby who sleeps on the piano."]
    assert reader.resonate("Miso", 3, affect={"valence": 0.5})[0].text == hits[0].text
    bridge.close()


def test_a_chetana_block_the_engine_refuses() -> None:
    with pytest.raises(ChetanaError) as caught:
        Cognition.begin({"config": {"attention_window": 5}}, None, "hello")
    message = str(caught.value)
    assert "Chetana refused the blueprint's `chetana:` block" in message  # what and where
    assert "no key 'attention_window'" in message and "attention_focus_window" in message  # the engine's detail
    assert "fix `chetana.config` or `chetana.priors`" in message  # the fix
    assert isinstance(caught.value.__cause__, ChetanaConfigError)


def test_a_corrupt_saved_chetana_state(soul_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = [claudius_reply(check="false")] * 2
    s = soul.load("claudius", provider=ScriptedProvider(replies), home=soul_home)
    session = s.session()
    session.turn_sync("Let's build a compiler.")
    with sqlite3.connect(soul_home / "soul.db") as db:
        db.execute("UPDATE chetana SET json = ? WHERE session_id = ?", ('{"version": 1, "turn": "three"}', session.id))
    with pytest.raises(ChetanaError) as caught:
        session.turn_sync("And a parser.")
    message = str(caught.value)
    assert "Chetana cannot restore the session's saved Chetana state" in message
    assert "start a new session" in message
    assert isinstance(caught.value.__cause__, StateError)
    s.close()
    capsys.readouterr()
    assert main(["chetana", session.id]) == 1  # `soul chetana` says the same, without a traceback
    err = capsys.readouterr().err
    assert f"session {session.id} (claudius)" in err and "start a new session" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("verb", [
    ["memory", "ingest", "notes.txt"],
    ["memory", "recall", "cats"],
    ["memory", "stats"],
    ["memory", "find-symbol", "main"],
    ["memory", "search-symbols", "main"],
    ["memory", "callers", "main"],
])
def test_the_memory_verbs_on_a_file_say_so(verb: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _memory_extra()
    monkeypatch.chdir(tmp_path)
    Path("notes.txt").write_text("My cat Miso is a tabby.\n")
    Path("m.md").write_text("# notes\n")
    assert main([*verb, "--field", "m.md"]) == 1
    err = capsys.readouterr().err
    assert "--field 'm.md' is a file, not a folder" in err and "pass" in err and "folder" in err
    assert "Traceback" not in err
    with pytest.raises(MemoryFieldError) as caught:  # --debug: the traceback, and the cause in it
        main(["--debug", *verb, "--field", "m.md"])
    assert isinstance(caught.value.__cause__, OSError)


def test_checking_a_file_or_a_missing_field_is_an_error_not_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _memory_extra()
    (tmp_path / "m.md").write_text("# notes\n")
    assert main(["memory", "check", "--field", str(tmp_path / "m.md")]) == 1
    assert f"--field '{tmp_path / 'm.md'}' is a file, not a folder: pass the folder of a memory field" in capsys.readouterr().err
    assert main(["memory", "check", "--field", str(tmp_path / "nowhere")]) == 1
    assert f"--field '{tmp_path / 'nowhere'}' names no folder: pass the folder of a memory field" in capsys.readouterr().err


def test_only_engine_and_file_errors_are_translated(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    # The bridge names the field only when something fails (issue 26); a bug of ours or an
    # interrupt still leaves as it was raised.
    bridge = _bridge(write_blueprint, "field", soul_home)
    for raised in (ValueError("a bug"), KeyboardInterrupt()):
        with pytest.raises(type(raised)) as caught, bridge.errors("recall from"):
            raise raised
        assert caught.value is raised
    with pytest.raises(MemoryFieldError, match=r"cannot recall from the field: .*denied") as translated, \
            bridge.errors("recall from"):
        raise PermissionError(13, "denied", str(bridge.path()))
    assert isinstance(translated.value.__cause__, PermissionError)

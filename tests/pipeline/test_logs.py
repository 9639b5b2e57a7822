"""The JSONL mirror: layout, and exact repair after a process dies between DB and logs."""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.records import Commit, MessageRecord, MoodRecord, SummaryRecord
from soul.store import logs
from soul.store.commits import Applied
from soul.store.home import session_logs_dir
from soul.store.sessions import SessionStore


def test_layer_and_tag_to_file() -> None:
    assert logs.file_for("external", "user") == "external_dialog"
    assert logs.file_for("internal", "internal_monologue") == "internal_dialog"
    assert logs.file_for("subconscious", "s_loud") == "subconscious"
    assert logs.file_for("system", "spontaneous") == "events"
    assert logs.file_for("subconscious", "mood_and_criteria") == "mood_and_criteria"
    assert set(logs.LAYER_FILES.values()) <= set(logs.LOG_FILES)


def test_line_format_and_encoding() -> None:
    data = logs.line(3, 2, 1.5, "user", "héllo\n", meta={"a": [1]})
    assert list(data) == ["commit", "turn", "time", "tag", "step", "verb", "content", "meta"]
    text = logs.encode(data)
    assert text.endswith("\n") and text.count("\n") == 1 and "héllo" in text
    assert json.loads(text) == data


def test_truncate_after_drops_the_tail_and_partial_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    good = "".join(logs.encode(logs.line(c, c, 0.0, "t", "x")) for c in (1, 2, 3))
    path.write_text(good + '{"commit": 4, "tu')
    with logs.locked(tmp_path) as writer:
        writer.truncate_after(3)
        assert path.read_text() == good
        writer.truncate_after(1)
        assert [x["commit"] for x in logs.read(tmp_path, "events")] == [1]
        writer.truncate_after(0)
    assert path.read_text() == ""


def test_dirty_mark_survives_the_writer(tmp_path: Path) -> None:
    with logs.locked(tmp_path) as writer:
        assert not writer.dirty
        writer.mark_dirty()
    with logs.locked(tmp_path) as writer:
        assert writer.dirty  # a writer that did not finish leaves its mark
        writer.mark_clean()
    with logs.locked(tmp_path) as writer:
        assert not writer.dirty


def test_the_mark_is_one_byte_rewritten_in_place(tmp_path: Path) -> None:
    # Setting and clearing the mark keep the lock file's size (issue 26: a size change waits
    # on the file system's journal); a lock file an older writer left (empty: clean, "1":
    # dirty) reads as it did.
    lock = tmp_path / logs.LOCK_NAME
    with logs.locked(tmp_path) as writer:
        writer.mark_dirty()
        assert lock.read_bytes() == b"1"
        writer.mark_clean()
    assert lock.read_bytes() == b"0"
    with logs.locked(tmp_path) as writer:
        assert not writer.dirty
    lock.write_bytes(b"")
    with logs.locked(tmp_path) as writer:
        assert not writer.dirty
    lock.write_bytes(b"1")
    with logs.locked(tmp_path) as writer:
        assert writer.dirty


def expected_logs(store: SessionStore, session_id: str) -> dict[str, str]:
    """What the files must hold: every commit's lines, rebuilt from the database."""
    lines, _ = logs.pending_lines(store.connection, session_id, 0)
    return {
        name: "".join(logs.encode(x.data) for x in lines if x.file == name)
        for name in logs.LOG_FILES
    }


def actual_logs(session_id: str) -> dict[str, str]:
    folder = session_logs_dir(session_id)
    return {
        name: (folder / f"{name}.jsonl").read_text() if (folder / f"{name}.jsonl").exists() else ""
        for name in logs.LOG_FILES
    }


def a_turn(session_id: str, base: int) -> Commit:
    return Commit(
        session_id,
        base,
        messages=(
            MessageRecord("external", "user", f"message {base}"),
            MessageRecord("internal", "internal_monologue", f"thought {base}", "t", "mused"),
            MessageRecord("external", "external_dialogue", f"reply {base}", "r", "said"),
            MessageRecord("subconscious", "mood_and_criteria", "calm", "m"),
        ),
        trace={"n": base},
    )


# Each crash point: what to patch in the child so it dies (os._exit, no cleanup) right there.
CRASHES = {
    "before the logs": "SessionStore._mirror = lambda *a, **k: os._exit(3)",
    "mid-append": textwrap.dedent(
        """
        def append(self, lines):
            name = lines[0].file
            with open(self.folder / f"{name}.jsonl", "a") as f:
                f.write(logs.encode(lines[0].data))
                f.write(logs.encode(lines[1].data)[:17])  # half a line
            os._exit(3)
        logs.Writer.append = append
        """
    ),
    "after the append, before the cursor": textwrap.dedent(
        """
        original = logs.Writer.append
        def append(self, lines):
            original(self, lines)
            os._exit(3)
        logs.Writer.append = append
        """
    ),
    "after the cursor, before clearing the mark": (
        "logs.Writer.mark_clean = lambda self: os._exit(3)"
    ),
}

CHILD = """
import os, sys
from soul.store import logs
from soul.records import Commit, MessageRecord
from soul.store import SessionStore
{patch}
store = SessionStore.open()
session_id, base = sys.argv[1], int(sys.argv[2])
store.commit(Commit(session_id, base, messages=(
    MessageRecord("external", "user", f"message {{base}}"),
    MessageRecord("internal", "internal_monologue", f"thought {{base}}", "t", "mused"),
    MessageRecord("external", "external_dialogue", f"reply {{base}}", "r", "said"),
    MessageRecord("subconscious", "mood_and_criteria", "calm", "m"),
), trace={{"n": base}}))
sys.exit(0)
"""


def commit_and_die(patch: str, session_id: str, base: int) -> None:
    script = CHILD.format(patch=patch)
    done = subprocess.run(
        [sys.executable, "-c", script, session_id, str(base)],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr


@pytest.mark.parametrize("crash", list(CRASHES))
@pytest.mark.parametrize("repair_by", ["open", "next commit"])
def test_a_crash_between_db_and_logs_is_repaired_exactly(
    crash: str, repair_by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SessionStore.open() as store:
        info = store.create_session("claudius", "ann")
        store.commit(a_turn(info.id, 0))
        store.commit(a_turn(info.id, 1))
    commit_and_die(CRASHES[crash], info.id, 2)
    if repair_by == "next commit":  # so only the commit path can repair
        monkeypatch.setattr(SessionStore, "repair_logs", lambda self, session_id=None: [])
    with SessionStore.open() as store:
        assert store.session(info.id).turns == 3  # the turn is in, whatever the logs say
        if repair_by == "open":
            assert actual_logs(info.id) == expected_logs(store, info.id)
        store.commit(a_turn(info.id, 3))
        assert actual_logs(info.id) == expected_logs(store, info.id)
        contents = [x["content"] for x in logs.read(session_logs_dir(info.id), "external_dialog")]
        assert len(contents) == len(set(contents)) == 8  # nothing twice, nothing lost
        assert len(logs.read(session_logs_dir(info.id), "mood_and_criteria")) == 4


def test_a_failing_log_write_does_not_fail_the_committed_turn(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with SessionStore.open() as store:
        info = store.create_session("claudius", "ann")

        def full_disk(self: logs.Writer, lines: object) -> None:
            raise OSError(28, "No space left on device")

        with monkeypatch.context() as patched:
            patched.setattr(logs.Writer, "append", full_disk)
            assert store.commit(a_turn(info.id, 0)) == 1
        assert "logs not written yet" in caplog.text
        assert store.repair_logs() == [info.id]
        assert actual_logs(info.id) == expected_logs(store, info.id)
        assert store.repair_logs() == []


def reference_line(data: dict[str, object]) -> str:
    """A log line as the mirror has always written it: the object through `json`'s encoder,
    compact, UTF-8 text (the byte format every older log file holds)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


def test_the_mirror_writes_each_line_byte_for_byte_as_the_reference_encoding() -> None:
    # The commit splices JSON it already made (each message's meta, the commit event) into the
    # lines; the files must not change by one byte for it: quotes, backslashes, control
    # characters, non-ASCII, floats, None, nested meta, a cycle, a mood and a summary.
    odd = 'say "hi"\\ \x00\x1f\u2028 é 😀 </script>'
    with SessionStore.open() as store:
        sid = store.create_session("claudius", "ann").id
        turn = Commit(
            sid,
            0,
            messages=(
                MessageRecord("external", "user", odd, meta={"user": "ann", "x": [1.5, None, True]}),
                MessageRecord("internal", "internal_monologue", "thought\n", "think", "mused"),
                MessageRecord("external", "external_dialogue", "", "reply", odd),
                MessageRecord("system", "chetana_event", "recall", meta={"calibration": 0.1 + 0.2, odd: {}}),
            ),
            trace={"n": 1},
            chetana={"v": 0.25000000000000006},
        )
        cycle = Commit(
            sid,
            1,
            kind="cycle",
            process="subconscious",
            cycle=7,
            messages=(MessageRecord("subconscious", "s_loud", odd, "loud"),),
            mood=MoodRecord(odd, "ask"),
            summaries=(SummaryRecord("S_loud_history", odd, 1, 6, digest=True),),
        )
        for commit in (turn, cycle):
            store.commit(commit)
        rows = store.connection.execute(
            "SELECT id, turn, time, meta, cycle, process FROM commits WHERE session_id = ? ORDER BY id",
            (sid,),
        ).fetchall()
    want: dict[str, str] = dict.fromkeys(logs.LOG_FILES, "")
    for (cid, turn_no, at, event, cycle_no, process), commit in zip(rows, (turn, cycle), strict=True):
        for m in commit.messages:
            data: dict[str, object] = {"commit": cid, "turn": turn_no}
            if cycle_no is not None:
                data["cycle"] = cycle_no
            data.update(time=at, tag=m.tag, step=m.step, verb=m.verb, content=m.content, meta=m.meta)
            want[logs.file_for(m.layer, m.tag)] += reference_line(data)
        head = {"commit": cid, "turn": turn_no, "cycle": cycle_no, "time": at, "process": process}
        if commit.mood is not None:
            want["mood_and_criteria"] += reference_line(
                {**head, "mood": commit.mood.mood, "criteria": commit.mood.criteria}
            )
        for s in commit.summaries:
            want["context_summaries"] += reference_line(
                {**head, "layer": s.layer, "summary": s.summary, "cycle_from": s.cycle_from,
                 "cycle_to": s.cycle_to, "digest": s.digest}
            )
        data = {"commit": cid, "turn": turn_no}
        if cycle_no is not None:
            data["cycle"] = cycle_no
        data.update(time=at, tag="commit", step=None, verb=None, content=commit.kind, meta=json.loads(event))
        want["events"] += reference_line(data)
    assert actual_logs(sid) == want
    # and a repair from the database writes the same bytes
    shutil.rmtree(session_logs_dir(sid))
    with SessionStore.open() as store:
        store.connection.execute("UPDATE sessions SET logged_commit = 0 WHERE id = ?", (sid,))
        assert store.repair_logs(sid) == [sid]
    assert actual_logs(sid) == want


scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
keys = st.text(max_size=6) | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none()
json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=30,
)


def _nulled(value: object) -> object:
    """`value` with each NaN and infinity (not in a key) None: what the store writes for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nulled(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nulled(v) for v in value]
    return value


def _small_floats(value: object) -> bool:
    """Whether `value` holds a float below 1e-4 (orjson may write it in another notation)."""
    if isinstance(value, float):
        return value != 0 and abs(value) < 1e-4
    if isinstance(value, dict):
        return any(_small_floats(k) or _small_floats(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_small_floats(v) for v in value)
    return False


@settings(max_examples=400)
@given(json_like)
def test_the_store_encodes_json_as_json_dumps_does_with_nan_and_infinities_null(value: object) -> None:
    # orjson writes it (issue 26), the standard library's encoder what orjson does not take
    # (non-string keys, ints past 64 bits): either way the data json.dumps would write, NaN and
    # the infinities as null (JSON has no number for them), the very text but for small floats
    text = logs.dumps(value)
    expected = json.dumps(_nulled(value), ensure_ascii=False, separators=(",", ":"))
    assert repr(json.loads(text)) == repr(json.loads(expected))  # repr: 1 / 1.0 / True, -0.0
    if not _small_floats(value):
        assert text == expected


@pytest.mark.parametrize(("value", "text"), [
    ({"a": float("nan"), "b": [float("inf"), -float("inf")]}, '{"a":null,"b":[null,null]}'),
    ({1: float("nan")}, '{"1":null}'),  # a non-string key: the standard library's path, the same rule
    ({float("inf"): 2 ** 70}, '{"Infinity":1180591620717411303424}'),  # a key is a string: named as json.dumps names it
    ("\ud800", '"\ud800"'),  # a lone surrogate: written as json.dumps writes it
])
def test_the_store_writes_non_finite_floats_as_null_on_either_encoder(value: object, text: str) -> None:
    assert logs.dumps(value) == text


def test_the_store_refuses_what_json_dumps_refuses_with_its_errors() -> None:
    circular: list[object] = [1]
    circular.append({"back": circular})
    with pytest.raises(ValueError, match="Circular reference"):
        logs.dumps(circular)
    with pytest.raises(TypeError, match="not JSON serializable"):
        logs.dumps({"when": object()})
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        json.dumps(deep)
    with pytest.raises(RecursionError):
        logs.dumps(deep)


def test_a_commit_to_no_session_makes_no_logs_folder() -> None:
    # The commit locks its session's logs folder before its transaction, when the folder is
    # there (issue 26): it must not make one for a session that may not exist.
    from soul.errors import SessionNotFound

    with SessionStore.open() as store:
        with pytest.raises(SessionNotFound):
            store.commit(a_turn("no-such-session", 0))
        assert not session_logs_dir("no-such-session").exists()
        sid = store.create_session("claudius", "ann").id
        store.commit(a_turn(sid, 0))  # the first commit makes it, after its transaction
        store.commit(a_turn(sid, 1))  # later ones lock it before theirs
        assert actual_logs(sid) == expected_logs(store, sid)


@settings(max_examples=300)
@given(json_like)
def test_the_store_reads_its_json_back_as_json_loads_does(value: object) -> None:
    # A snapshot decodes dozens of metas a turn with the C scanner directly (issue 26).
    from soul.store.reading import _decode

    text = logs.dumps(value)
    assert repr(_decode(text)) == repr(json.loads(text))  # repr: NaN != NaN
    assert repr(_decode(f" {text}\n")) == repr(json.loads(f" {text}\n"))


@pytest.mark.parametrize("text", ["", " ", "{", '{"a":1}x', "[1,]", "nan", '"\\ud800"x'])
def test_the_store_refuses_what_json_loads_refuses(text: str) -> None:
    from soul.store.reading import _decode

    with pytest.raises(json.JSONDecodeError) as refused:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as ours:
        _decode(text)
    assert str(ours.value) == str(refused.value)


# -- the descriptors a store keeps open between commits (soul.store.descriptors) ------------


def open_descriptors() -> set[str]:
    """What this process's descriptors point at (Linux: /proc/self/fd)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # (the listing's own descriptor, closed since)
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_a_logs_folder_deleted_between_commits_is_made_again_with_the_next_lines() -> None:
    # the store keeps a session's lock and log files open between commits: once the folder is
    # gone (deleted by hand, by another process), the next commit writes into a new one, not
    # into the files the kept descriptors still point at
    with SessionStore.open() as store:
        sid = store.create_session("claudius", "ann").id
        store.commit(a_turn(sid, 0))
        store.commit(a_turn(sid, 1))
        folder = session_logs_dir(sid)
        assert any(path.startswith(str(folder)) for path in open_descriptors())  # kept open
        shutil.rmtree(folder)
        store.commit(a_turn(sid, 2))
        assert [x["turn"] for x in logs.read(folder, "events")] == [3]
        assert not any(path.startswith(str(folder)) and path.endswith("(deleted)") for path in open_descriptors())


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_a_store_keeps_a_bounded_number_of_log_folders_open_and_closes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from soul.store.descriptors import LIMIT

    opened: list[Path] = []  # the folders whose lock file was opened, each time
    open_lock = logs.open_lock

    def counted(folder: Path, *, create: bool) -> int | None:
        fd = open_lock(folder, create=create)
        if fd is not None:
            opened.append(folder)
        return fd

    monkeypatch.setattr(logs, "open_lock", counted)
    home = session_logs_dir("x").parent
    with SessionStore.open() as store:
        sids = [store.create_session("claudius", "ann").id for _ in range(LIMIT + 8)]
        hot, turns = sids[0], 0  # a session that goes on talking while the others come and go
        for sid in sids:
            store.commit(a_turn(sid, 0))
            store.commit(a_turn(sid, 1))
            if sid != hot:
                store.commit(a_turn(hot, turns + 2))
                turns += 1
        kept = {p for p in open_descriptors() if p.startswith(str(home))}
        folders = {str(Path(p).parent) for p in kept}
        assert 0 < len(folders) <= LIMIT
        # the most recently used kept, the least recently used closed
        assert {str(session_logs_dir(sid)) for sid in (hot, sids[-1])} <= folders
        assert str(session_logs_dir(sids[1])) not in folders
        assert opened.count(session_logs_dir(hot)) == 1  # opened once, never closed meanwhile
        store.delete_session(sids[-1])
        assert not any(p.startswith(str(session_logs_dir(sids[-1]))) for p in open_descriptors())
        for sid in sids[:-1]:
            assert actual_logs(sid) == expected_logs(store, sid)
    assert not any(p.startswith(str(home)) for p in open_descriptors())


def test_threads_committing_to_one_session_write_each_commit_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # one store's kept lock descriptor is shared by its threads: flock alone would let them all
    # in at once; the mutex beside it keeps the folder's writers one at a time
    import threading
    import time

    lines = logs.commit_lines

    def slowly(*args: object, **kwargs: object) -> list[logs.LogLine]:
        time.sleep(0.001)  # between a commit's transaction and its lines: others get their turn
        return lines(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(logs, "commit_lines", slowly)
    with SessionStore.open() as store:
        sid = store.create_session("claudius", "ann").id
        store.commit(a_turn(sid, 0))
        errors: list[BaseException] = []

        def cycles(process: str) -> None:
            try:
                for n in range(15):
                    store.commit(Commit(sid, 0, kind="cycle", process=process, cycle=n,
                                        messages=(MessageRecord("subconscious", "thought", f"{process} {n}"),)))
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=cycles, args=(f"p{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert actual_logs(sid) == expected_logs(store, sid)
        thoughts = [x["content"] for x in logs.read(session_logs_dir(sid), "subconscious")]
        assert sorted(thoughts) == sorted(f"p{i} {n}" for i in range(4) for n in range(15))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_a_folder_forgotten_while_its_writer_holds_it_is_closed_when_the_writer_lets_go(tmp_path: Path) -> None:
    from soul.store.descriptors import Descriptors

    folder = tmp_path / "session"
    kept = Descriptors()
    writer = kept.hold(folder, create=True)
    assert writer is not None
    writer.append([logs.LogLine("events", '{"commit":1}\n')])
    kept.forget(folder)  # (delete_session, while a commit holds the folder)
    assert any(p.startswith(str(folder)) for p in open_descriptors())
    writer.release()
    assert not any(p.startswith(str(folder)) for p in open_descriptors())
    again = kept.hold(folder, create=True)  # opened afresh
    assert again is not None
    again.release()
    kept.close()
    assert not any(p.startswith(str(folder)) for p in open_descriptors())


def test_a_folder_opened_while_every_kept_one_is_in_use_is_held_not_closed_at_once(tmp_path: Path) -> None:
    # over the limit with every other folder held by a writer, the one just opened is the only
    # one that could be closed: it is kept (the limit waits), or its writer would open it forever
    import threading

    from soul.store.descriptors import Descriptors

    kept = Descriptors(limit=1)
    first = kept.hold(tmp_path / "a", create=True)
    got: list[logs.Writer | None] = []
    opener = threading.Thread(target=lambda: got.append(kept.hold(tmp_path / "b", create=True)), daemon=True)
    opener.start()
    opener.join(timeout=10)
    assert not opener.is_alive() and got and got[0] is not None
    got[0].release()
    assert first is not None
    first.release()
    third = kept.hold(tmp_path / "c", create=True)  # now the others are free: closed down to one
    assert third is not None
    third.release()
    kept.close()


def test_a_folder_two_threads_open_at_once_closes_the_spare_lock_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two threads opening one folder's lock at once (a turn's logs appended in the memory
    # worker while the next commit takes the folder): the one that lost keeps the other's and
    # closes its own. It closed the number twice (os.close, then its Kept's __del__ as `hold`
    # returned), the second time another file's by then: a memory field's write lock, in `soul run`.
    import fcntl
    import types

    from soul.store import descriptors
    from soul.store.descriptors import Descriptors

    kept = Descriptors()
    folder = tmp_path / "session"
    open_lock = logs.open_lock
    raced: list[logs.Writer | None] = []
    opened: list[int] = []
    lost: list[int] = []

    def racing(at: Path, *, create: bool) -> int | None:
        fd = open_lock(at, create=create)
        if not raced:  # the other thread opens and keeps the folder meanwhile
            assert fd is not None
            lost.append(fd)
            raced.append(None)
            other = threading.Thread(target=lambda: raced.append(kept.hold(at, create=True)))
            other.start()
            other.join(timeout=10)
            writer = raced[-1]
            assert writer is not None
            writer.release()
        return fd

    def flock(fd: int, how: int) -> None:
        # once the other thread has the folder: a file opened now takes the number the loser let go of
        if len(raced) > 1 and not opened:
            spare = os.open(tmp_path / "another", os.O_CREAT | os.O_RDWR)  # (the lowest number free)
            if spare != lost[0]:
                os.dup2(spare, lost[0])
                os.close(spare)
            opened.append(lost[0])
        fcntl.flock(fd, how)

    monkeypatch.setattr(descriptors.logs, "open_lock", racing)
    monkeypatch.setattr(descriptors, "fcntl", types.SimpleNamespace(flock=flock, LOCK_EX=fcntl.LOCK_EX, LOCK_UN=fcntl.LOCK_UN))
    writer = kept.hold(folder, create=True)  # lost the race: the other's descriptors, its own closed
    assert writer is not None
    writer.release()
    assert opened
    os.fstat(opened[0])  # still open: the lost lock was closed once
    os.close(opened[0])
    kept.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_a_store_dropped_without_close_leaves_no_log_descriptors_open() -> None:
    # as its connection's: a process that makes stores and drops them (tests, scripts) must not
    # run out of descriptors (the test suite reached 1,024 when kept ones outlived their store)
    import gc

    home = session_logs_dir("x").parent
    for _ in range(5):
        store = SessionStore.open()
        sid = store.create_session("claudius", "ann").id
        store.commit(a_turn(sid, 0))
        store.commit(a_turn(sid, 1))
        assert any(p.startswith(str(home)) for p in open_descriptors())
        del store
    gc.collect()
    assert not any(p.startswith(str(home)) for p in open_descriptors())


def test_logs_later_appends_a_commits_lines_only_when_asked_and_once(soul_home: Path) -> None:
    # a commit applied with logs_later leaves its lines to `append_logs` (a session calls it in
    # its memory writes' thread, after the reply); a commit of the session before that appends
    # them first, from the database, and the late call then adds nothing
    with SessionStore.open() as store:
        info = store.create_session("claudius", "ann")
        store.commit(a_turn(info.id, 0))
        first = store.apply(a_turn(info.id, 1), logs_later=True)
        assert actual_logs(info.id) != expected_logs(store, info.id)  # turn 1's lines wait
        first.append_logs()
        assert actual_logs(info.id) == expected_logs(store, info.id)
        first.append_logs()  # once only
        assert actual_logs(info.id) == expected_logs(store, info.id)
        late = store.apply(a_turn(info.id, 2), logs_later=True)
        store.commit(a_turn(info.id, 3))  # appends turn 2's lines with its own
        assert actual_logs(info.id) == expected_logs(store, info.id)
        late.append_logs()
        assert actual_logs(info.id) == expected_logs(store, info.id)
        assert store.commit(a_turn(info.id, 4)) == 5 and store.repair_logs() == []
        assert Applied(1, 1).append_logs() is None  # (a commit applied at once: nothing to do)


def test_a_sessions_turns_append_their_lines_after_the_reply_and_even_after_a_late_failure(
    soul_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a soul with a memory hands its turn's lines to the memory writes' thread: settled, the
    # files hold every commit's lines; an error after the commit still appends them
    from souls import claudius_reply

    import soul
    import soul.runtime.session
    from soul.providers.scripted import ScriptedProvider

    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply()] * 4), home=soul_home)
    session = s.session(user="ada")
    session.turn_sync("Hi, I'm Ada.")
    session.turn_sync("I build compilers.")
    assert s.store.session(session.id).turns == 2
    assert actual_logs(session.id) == expected_logs(s.store, session.id)

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("after the commit")

    monkeypatch.setattr(soul.runtime.session, "recall_use", fail)
    with pytest.raises(RuntimeError, match="after the commit"):
        session.turn_sync("And parsers.")
    assert s.store.session(session.id).turns == 3  # committed before the failure
    assert actual_logs(session.id) == expected_logs(s.store, session.id)
    s.close()


def test_a_trace_is_encoded_from_its_fields_as_from_its_dict() -> None:
    # a turn's commit carries its Trace, not `to_dict()`'s copy (issue 26): the store encodes
    # the fields as they stand, and what orjson does not take goes through the dict
    from soul.providers.base import Message
    from soul.runtime.events import CallTrace, StepTrace, Trace

    call = CallTrace(0, "local", ("think", "reply"), (Message("system", "Be brief."), Message("user", "hi")), "<reply>yo</reply>",
                     1, 12, 3, 0.25, budget={"window": 8000, "used": 12.5}, cut=({"part": "history", "turns": 2},))
    step = StepTrace("reply", "external_dialogue", "ran", {"reply": "yo", "verb": None, "score": float("nan")}, ("flag",), None, 1e-05)
    trace = Trace(3, "message", "hi", (step,), (call,), 1.5, 2.25, ({"event": "mood", "valence": 0.1},))
    assert logs.dumps_fields(trace) == logs.dumps(trace.to_dict())
    assert json.loads(logs.dumps_fields(trace))["steps"][0]["outputs"]["score"] is None
    odd = Trace(4, "message", "hi", (StepTrace("a", "k", "ran", {1: 2 ** 70}),))  # a key orjson refuses
    assert logs.dumps_fields(odd) == logs.dumps(odd.to_dict()) == json.dumps(odd.to_dict(), separators=(",", ":"))
    assert logs.dumps_fields({"a": 1}) == '{"a":1}'
    dated = Trace(5, "message", "hi", (StepTrace("a", "k", "ran", {"when": datetime.datetime(2026, 11, 29)}),))
    with pytest.raises(TypeError, match="not JSON serializable"):  # as `dumps` of its dict refuses it
        logs.dumps_fields(dated)

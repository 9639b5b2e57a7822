"""Triggers in `soul worker` (SOUL_RUNNER=dbos): the firing rules over the store's marks, and a
real worker (DBOS on a real PostgreSQL) that fires a spontaneous turn with no `soul run` or
`soul serve` open — once, even with two workers racing for it."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import postgres_server
import pytest
import yaml
from test_durable import CON, _cycles, _env, _pending, _worker

import soul
from soul.language.finding import builtin_folder
from soul.runtime.background.triggers import TriggerSpec
from soul.runtime.durable.triggers import answered, firing, run_spontaneous
from soul.store.due import Impulse, TriggerMarks

needs_server = pytest.mark.skipif(postgres_server.binaries() is None, reason=postgres_server.SKIP_REASON)
LOUD = ("<M_AND_C><mood>eager</mood><criteria>speak</criteria></M_AND_C>"
        "<S_loud>tell them about the sea</S_loud><S_quiet>a quiet note</S_quiet><trigger>true</trigger>")

S_LOUD = TriggerSpec("speak_up", "s_loud", "subconscious.impulse", batch_seconds=5, batch_max=3)
IDLE = TriggerSpec("nudge", "idle", idle_seconds=600)
EVERY = TriggerSpec("daily", "schedule", interval_seconds=100)


def marks(*pending: Impulse, last_turn: int = 0, message: int = 0, message_time: float = 0.0,
          spontaneous: float = 0.0, unanswered: int = 0) -> TriggerMarks:
    return TriggerMarks("s1", last_turn, message, message_time, spontaneous, tuple(pending), unanswered)


def impulse(commit: int, at: float, trigger: bool = False, process: str = "subconscious") -> Impulse:
    return Impulse(commit, at, process, trigger)


# -- the rules, over plain marks -------------------------------------------------------------


@pytest.mark.parametrize(("pending", "now", "reason", "key"), [
    ((), 100.0, None, None),  # nothing pending
    ((impulse(7, 100.0),), 101.0, None, None),  # one impulse, its batch still open
    ((impulse(7, 100.0),), 105.0, "batch_seconds", "speak_up:7"),  # the batch closed
    ((impulse(7, 100.0), impulse(9, 101.0, trigger=True)), 101.5, "trigger", "speak_up:9"),
    ((impulse(7, 100.0), impulse(8, 100.5), impulse(9, 101.0)), 101.5, "batch_max", "speak_up:9"),
    ((impulse(7, 100.0, process="other"),), 200.0, None, None),  # another process's impulse
    ((impulse(7, 100.0, trigger=True),), 1000.0, None, None),  # an old session's: it waits for a user turn
])
def test_s_loud_fires_on_trigger_batch_max_or_batch_seconds_keyed_by_its_last_impulse(
        pending: tuple[Impulse, ...], now: float, reason: str | None, key: str | None) -> None:
    found = firing(S_LOUD, marks(*pending), created=0.0, now=now)
    assert (found.reason if found else None, found.key if found else None) == (reason, key)


def test_idle_fires_once_per_silence_and_schedule_once_per_window() -> None:
    quiet = marks(message=4, message_time=1000.0)
    assert firing(IDLE, quiet, created=0.0, now=1599.0) is None
    due = firing(IDLE, quiet, created=0.0, now=1600.0)
    assert due is not None and due.key == "nudge:idle4" and due.since == 4 and due.due == 1600.0
    # a silence that became due long ago (an old session, a worker started later) is let go
    assert firing(IDLE, quiet, created=0.0, now=2201.0) is None
    # a spontaneous turn ran after it became due: this silence is answered
    assert firing(IDLE, marks(message=4, message_time=1000.0, spontaneous=1601.0), created=0.0, now=2000.0) is None
    assert answered(IDLE, marks(message=5, message_time=1700.0), since=4, due=1600.0)  # the user spoke
    assert firing(EVERY, marks(), created=50.0, now=149.0) is None  # the first window is not over
    window = firing(EVERY, marks(), created=50.0, now=260.0)
    assert window is not None and window.key == "daily:every2" and window.due == 250.0
    assert firing(EVERY, marks(spontaneous=255.0), created=50.0, now=260.0) is None


def test_an_s_loud_firing_is_answered_by_any_turn_after_its_impulse() -> None:
    assert not answered(S_LOUD, marks(impulse(9, 1.0), last_turn=3), since=9, due=0.0)
    assert answered(S_LOUD, marks(last_turn=10), since=9, due=0.0)


def test_s_loud_waits_for_the_user_once_it_spoke_unanswered_unanswered_max_times() -> None:
    now_due = (impulse(9, 100.0, trigger=True),)
    assert firing(S_LOUD, marks(*now_due, unanswered=1), created=0.0, now=100.5) is None  # the default: once
    twice = TriggerSpec("speak_up", "s_loud", "subconscious.impulse", unanswered_max=2)
    assert firing(twice, marks(*now_due, unanswered=1), created=0.0, now=100.5) is not None
    assert firing(twice, marks(*now_due, unanswered=2), created=0.0, now=100.5) is None


def test_the_store_counts_the_spontaneous_turns_that_spoke_since_the_user_did(tmp_path: Path, soul_home: Path) -> None:
    s = soul.load(_csd(tmp_path, [LOUD] * 3), home=soul_home)
    session = s.session()
    from soul.runtime.background.cycles import Background

    work = Background(s.plan, s.services, s.store, session.id, lambda e: None, lambda t, r: asyncio.sleep(0))
    asyncio.run(work.run_cycle("subconscious", 1))
    since = s.store.trigger_marks(session.id).pending[-1].commit_id
    assert s.store.trigger_marks(session.id).unanswered == 0
    assert asyncio.run(run_spontaneous(s, session.id, "speak_up", "trigger", since, 0.0)) is True
    assert s.store.trigger_marks(session.id).unanswered == 1
    asyncio.run(work.run_cycle("subconscious", 2))
    assert firing(TriggerSpec.all_of(s.blueprint)["speak_up"], s.store.trigger_marks(session.id), 0.0, time.time()) is None
    s.session(session.id).turn_sync("hello")  # the user answers
    assert s.store.trigger_marks(session.id).unanswered == 0
    s.close()


def test_a_spontaneous_turn_runs_once_for_a_firing_however_often_its_step_runs(
        tmp_path: Path, soul_home: Path) -> None:
    s = soul.load(_csd(tmp_path, [LOUD] * 3), home=soul_home)
    session = s.session()
    from soul.runtime.background.cycles import Background

    work = Background(s.plan, s.services, s.store, session.id, lambda e: None, lambda t, r: asyncio.sleep(0))
    asyncio.run(work.run_cycle("subconscious", 1))
    pending = s.store.trigger_marks(session.id).pending
    assert [p.trigger for p in pending] == [True]
    since = pending[-1].commit_id
    assert asyncio.run(run_spontaneous(s, session.id, "speak_up", "trigger", since, 0.0)) is True
    assert asyncio.run(run_spontaneous(s, session.id, "speak_up", "trigger", since, 0.0)) is False  # re-run
    kinds = [t["kind"] for t in s.store.traces(session.id)]
    assert kinds.count("spontaneous") == 1
    assert s.store.trigger_marks(session.id).pending == ()


# -- a real worker ---------------------------------------------------------------------------


def _csd(root: Path, sub: list[str]) -> Path:
    """A csd soul whose subconscious says `sub` in order (then quiet notes)."""
    folder = root / "csd"
    folder.mkdir()
    for name in ("csd.md", "csd_core.md"):
        shutil.copy(builtin_folder() / name, folder / name)
    data = yaml.safe_load((builtin_folder() / "csd.yaml").read_text())
    data["models"] = {"conscious": "scripted:conscious.yaml", "subconscious": "scripted:sub.yaml"}
    data["processes"]["subconscious"]["history"] = 1000
    (folder / "csd.yaml").write_text(yaml.safe_dump(data))
    (folder / "conscious.yaml").write_text(json.dumps([CON] * 20))
    (folder / "sub.yaml").write_text(json.dumps(sub))
    return folder / "csd.yaml"


def _spontaneous(url: str, session_id: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM commits WHERE session_id = %s AND kind = 'spontaneous'",
                                (session_id,)).fetchone()[0])


@needs_server
@pytest.mark.slow
def test_two_workers_fire_the_impulse_of_a_cycle_as_one_spontaneous_turn_with_nothing_else_open(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    blueprint = _csd(tmp_path, [LOUD] * 5)
    s = soul.load(blueprint, home=soul_home)
    sessions = [s.session().id for _ in range(3)]
    s.close()  # nothing holds the sessions: the workers alone
    env = _env(url, soul_home)
    workers = [_worker(blueprint, env, "--cycles", "1", "--executor", f"w{i}") for i in (1, 2)]
    for worker in workers:
        _out, err = worker.communicate(timeout=180)
        assert worker.returncode == 0, err
    for sid in sessions:
        assert _cycles(url, sid) == {1: 1}
        assert _spontaneous(url, sid) == 1, "one impulse with trigger: one spontaneous turn, not two"
    again = soul.load(blueprint, home=soul_home)
    for sid in sessions:
        said = [r.content for _turn, r, _t in again.store.messages(sid) if r.tag == "ID_loud"]
        assert said == ["hello there"]
        assert again.store.trigger_marks(sid).pending == ()
    assert _pending(url, sessions) == 0
    again.close()


def test_a_session_held_with_the_dbos_runner_arms_no_trigger_of_its_own(tmp_path: Path, soul_home: Path) -> None:
    s = soul.load(_csd(tmp_path, [LOUD]), home=soul_home)
    session = s.session(runner="dbos")

    async def go() -> bool:
        await session.start()
        armed = session.work is not None and session.work.triggers.started
        await session.close()
        return armed

    assert asyncio.run(go()) is False


def test_a_user_turn_committed_during_a_spontaneous_turn_wins_and_the_firing_runs_nothing_more(
        tmp_path: Path, soul_home: Path) -> None:
    from collections.abc import AsyncIterator

    from soul.providers import Chunk, ScriptedProvider
    from soul.providers.base import Completion, Request

    blueprint = _csd(tmp_path, [LOUD] * 3)
    user_side = soul.load(blueprint, home=soul_home)  # another process's connection, in effect
    session = user_side.session()

    class UserSpeaksFirst(ScriptedProvider):
        """The conscious model of the worker's soul: before its first reply, the user's own
        turn of the same session commits (a real turn, through the other connection)."""

        async def _user_turn(self) -> None:
            if self.calls == 0:
                await user_side.session(session.id).turn("I am here")

        async def complete(self, request: Request) -> Completion:
            await self._user_turn()
            return await super().complete(request)

        async def stream(self, request: Request) -> AsyncIterator[Chunk]:
            await self._user_turn()
            async for chunk in super().stream(request):
                yield chunk

    worker_side = soul.load(blueprint, home=soul_home, provider={
        "conscious": UserSpeaksFirst([CON] * 5), "subconscious": ScriptedProvider([LOUD] * 3)})
    from soul.runtime.background.cycles import Background

    work = Background(worker_side.plan, worker_side.services, worker_side.store, session.id,
                      lambda e: None, lambda t, r: asyncio.sleep(0))
    asyncio.run(work.run_cycle("subconscious", 1))
    since = worker_side.store.trigger_marks(session.id).pending[-1].commit_id
    assert asyncio.run(run_spontaneous(worker_side, session.id, "speak_up", "trigger", since, 0.0)) is False
    kinds = [t["kind"] for t in worker_side.store.traces(session.id)]
    assert kinds.count("message") == 1 and kinds.count("spontaneous") == 0  # refused as stale, not interleaved
    assert worker_side.store.session(session.id).turns == 1
    user_side.close()
    worker_side.close()


def test_the_schedulers_reads_give_each_sessions_cycle_count_and_marks_in_few_queries(
        tmp_path: Path, soul_home: Path) -> None:
    from soul.runtime.background.cycles import Background

    s = soul.load(_csd(tmp_path, [LOUD] * 5), home=soul_home)
    first, second = s.session(), s.session()
    for number in (1, 2):
        work = Background(s.plan, s.services, s.store, first.id, lambda e: None, lambda t, r: asyncio.sleep(0))
        asyncio.run(work.run_cycle("subconscious", number))
    counts = s.store.cycle_counts("csd")
    assert set(counts) == {(first.id, "subconscious")} and counts[(first.id, "subconscious")][0] == 2
    assert s.store.cycle_counts("csd", {second.id}) == {}  # only the sessions asked for
    assert [m.id for m in s.store.session_marks("csd")] == [first.id, second.id]  # oldest first
    marks = s.store.trigger_marks(first.id)
    assert [i.trigger for i in marks.pending] == [True, True] and marks.last_turn_commit == 0
    s.close()

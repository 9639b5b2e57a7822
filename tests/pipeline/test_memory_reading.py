"""A turn reads its session's working memory on from where the last turn left it: the same
regions, turns and summary as a reading of the whole snapshot, whatever the snapshots were."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from soul.records import MemoryEntry
from soul.runtime.conversation import HISTORY_TYPES, REPLY_TYPE, SUMMARY_TYPE, USER_TYPE, history_of
from soul.runtime.conversation.history import HistoryReading
from soul.runtime.turn.memory_reading import (
    KEPT_ENTRIES,
    KEPT_SESSIONS,
    MemoryReading,
    kept_reading,
    memory_reading,
)

_metas = st.fixed_dictionaries({}, optional={
    "turn": st.one_of(st.integers(-2, 9), st.booleans(), st.text(max_size=2)),
    "user": st.sampled_from(["", "bo", None]),
    "turn_from": st.integers(-2, 9), "turn_to": st.integers(-2, 9), "digest": st.booleans()})
_entries = st.builds(lambda kind, region, text, meta: MemoryEntry(region, kind, text, None, meta),
                     st.sampled_from([USER_TYPE, REPLY_TYPE, SUMMARY_TYPE, "mentalQuery", "note"]),
                     st.sampled_from(["default", "summary", "notes"]), st.text(max_size=3), _metas)


def _whole(memory: tuple[MemoryEntry, ...], user: str) -> tuple[object, ...]:
    """What a turn's context took from a snapshot before it was kept: every entry read again."""
    regions: dict[str, list[MemoryEntry]] = {}
    for entry in memory:
        if entry.entry_type not in HISTORY_TYPES and entry.entry_type != SUMMARY_TYPE:
            regions.setdefault(entry.region, []).append(entry)
    entries = {region: tuple(found) for region, found in regions.items()}
    return entries, {region: [e.content for e in found] for region, found in entries.items()}, history_of(memory, user)


def _read(reading: MemoryReading) -> tuple[object, ...]:
    return dict(reading.regions), {region: list(texts) for region, texts in reading.texts.items()}, reading.turns()


@settings(max_examples=400, deadline=None)
@given(st.lists(_entries, max_size=30), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3)), min_size=1, max_size=6),
       st.sampled_from(["ada", "bo"]))
def test_a_reading_kept_between_snapshots_is_the_reading_of_the_whole_snapshot(
        entries: list[MemoryEntry], snapshots: list[tuple[int, int]], user: str) -> None:
    """Snapshots that grow (a commit adds entries), shrink (the TTL drops the oldest) or go
    back: each reading, on from the last, is what reading the snapshot whole gives."""
    session = f"s-{id(entries)}"
    for end, dropped in snapshots:
        memory = tuple(entries[dropped:max(dropped, end)])
        assert _read(memory_reading(session, memory, user)) == _whole(memory, user)


def test_a_turn_reads_only_what_the_last_commit_added() -> None:
    """A region the commit did not touch is the very tuple the last turn read, and the turns
    closed before are the same objects: nothing before the new entries was read again."""
    def turn(number: int) -> tuple[MemoryEntry, ...]:
        meta = {"turn": number}
        return (MemoryEntry("default", USER_TYPE, f"line {number}", None, {**meta, "user": "ada"}),
                MemoryEntry("default", "mentalQuery", "true", None, meta),
                MemoryEntry("default", REPLY_TYPE, f"reply {number}", None, meta))

    notes = (MemoryEntry("notes", "note", "she builds compilers", None, {}),)
    memory = notes + turn(1) + turn(2)
    first = memory_reading("kept-session", memory, "ada")
    more = memory + turn(3)
    second = memory_reading("kept-session", more, "ada")
    assert second is not first and _read(second) == _whole(more, "ada")
    assert second.regions["notes"] is first.regions["notes"]  # untouched: not read again
    (turn_1, _), _ = first.turns()
    turns, summary = second.turns()
    assert [t.number for t in turns] == [1, 2, 3] and summary is None
    assert turns[0] is turn_1  # closed before: kept as it was
    assert memory_reading("kept-session", more, "ada") is second  # nothing added: the same reading


def test_readings_are_kept_for_a_bounded_number_of_sessions() -> None:
    memory = (MemoryEntry("notes", "note", "kept", None, {}),)
    first = memory_reading("session-0", memory, "ada")
    for i in range(1, KEPT_SESSIONS + 1):
        memory_reading(f"session-{i}", memory, "ada")
    # the first session's reading was dropped: the next one is made again, and still right
    again = memory_reading("session-0", memory, "ada")
    assert again is not first and _read(again) == _whole(memory, "ada")


def test_readings_are_kept_within_a_budget_of_entries() -> None:
    """The readings kept hold at most KEPT_ENTRIES entries in all: a session with more is read
    from the start each turn, and sessions kept earlier make room for a later one."""
    note = MemoryEntry("notes", "note", "kept", None, {})
    huge = (note,) * (KEPT_ENTRIES + 1)
    reading = memory_reading("huge-session", huge, "ada")
    assert _read(reading) == _whole(huge, "ada") and kept_reading("huge-session") is None
    memory_reading("small-session", (note,), "ada")
    half = (note,) * (KEPT_ENTRIES // 2 + 1)
    memory_reading("half-1", half, "ada")
    memory_reading("half-2", half, "ada")  # the two halves do not fit together: the older goes
    assert kept_reading("half-2") is not None and kept_reading("half-1") is None
    assert kept_reading("small-session") is None  # the least recently used went first


def test_a_history_reading_goes_on_from_a_copy_without_changing_the_original() -> None:
    meta = {"turn": 1}
    asked = MemoryEntry("default", USER_TYPE, "hello", None, {**meta, "user": "ada"})
    answered = MemoryEntry("default", REPLY_TYPE, "hi", None, meta)
    reading = HistoryReading("ada")
    reading.read((asked,))
    later = reading.copy()
    later.read((answered,))
    assert reading.result() == history_of((asked,), "ada")  # the reply went to the copy only
    assert later.result() == history_of((asked, answered), "ada")

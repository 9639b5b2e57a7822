"""The mind a session's turns share with its subconscious: snapshots, impulses, histories."""

from __future__ import annotations

import threading

from soul.runtime.background.mind import CycleResult, Mind, observed_in
from soul.runtime.background.processes import LoopSchedule


def test_non_empty_mood_and_criteria_overwrite_empty_ones_keep_the_old() -> None:
    mind = Mind("sub")
    assert mind.end_cycle(CycleResult(1, "calm", "be brief")) is True
    assert mind.end_cycle(CycleResult(2, "", "  ")) is False
    assert (mind.mood, mind.criteria, mind.cycle) == ("calm", "be brief", 2)
    assert mind.end_cycle(CycleResult(3, "curious", None)) is True
    assert (mind.mood, mind.criteria) == ("curious", "be brief")
    assert [m["mood"] for m in mind.moods] == ["calm", "curious"]


def test_a_turn_drains_the_impulses_and_keeps_the_mood_it_started_with() -> None:
    mind = Mind("sub")
    mind.end_cycle(CycleResult(1, "calm", "be brief", loud="ask about the trip"))
    mind.end_cycle(CycleResult(2, None, None, loud="mention the weather"))
    taken = mind.drain_impulses()
    assert taken == ("ask about the trip", "mention the weather") and mind.pending == ()
    view = mind.for_turn(taken)
    mind.end_cycle(CycleResult(3, "tense", "hurry"))
    assert view.mood == "calm" and view.impulses == taken  # a snapshot, not a live view


def test_a_cycle_sees_only_what_changed_and_a_failed_one_gives_it_back() -> None:
    mind = Mind("sub")
    mind.observe_turn({"ED_user": ["hi"], "ED_agent": ["hello"], "ID_quiet": ["they seem tired"]})
    first = mind.begin_cycle()
    assert first.changes["ED_user"] == ("hi",) and first.cycle == 1
    mind.undo(first)  # the cycle failed
    mind.observe_turn({"ED_user": ["still there?"]})
    again = mind.begin_cycle()
    assert again.changes["ED_user"] == ("hi", "still there?")
    mind.end_cycle(CycleResult(again.cycle))
    assert mind.begin_cycle().quiet  # nothing new since


def test_observed_in_takes_what_reached_the_user_and_the_quiet_part() -> None:
    from soul.records import MessageRecord

    messages = [MessageRecord("external", "user", "hi"), MessageRecord("internal", "ID_quiet", "hmm", "respond"),
                MessageRecord("external", "ID_loud", "Hello!", "respond")]
    seen = observed_in(messages, "Hello!", "message")
    assert seen == {"ED_user": ["hi"], "ED_agent": ["Hello!"], "ID_loud": ["Hello!"], "ID_quiet": ["hmm"]}


def test_histories_over_their_window_are_folded_into_a_summary() -> None:
    mind = Mind("sub", history=2)
    for i in range(1, 6):
        mind.end_cycle(CycleResult(i, quiet=f"note {i}"))
    name, (previous, older, first, last) = next(iter(mind.overflowing().items()))
    assert name == "S_quiet_history" and previous is None
    assert older == ("note 1", "note 2", "note 3") and (first, last) == (1, 3)
    mind.fold(name, "three notes", len(older))
    assert mind.histories()[name] == ("[Previous summary]: three notes", "note 4", "note 5")


def test_turns_and_cycles_hammering_the_mind_never_see_half_a_change() -> None:
    mind = Mind("sub")
    stop = threading.Event()
    torn: list[tuple[str, str]] = []

    def cycles() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            mind.end_cycle(CycleResult(i, f"mood {i}", f"criteria {i}", loud=f"impulse {i}"))

    def turns() -> None:
        while not stop.is_set():
            view = mind.for_turn(mind.drain_impulses())
            if view.mood.split()[-1:] != view.criteria.split()[-1:]:
                torn.append((view.mood, view.criteria))
            mind.observe_turn({"ED_user": ["x"], "ID_quiet": ["y"]})

    threads = [threading.Thread(target=cycles), threading.Thread(target=turns), threading.Thread(target=turns)]
    for t in threads:
        t.start()
    stop.wait(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert torn == []
    assert mind.cycle > 0


def test_backoff_doubles_to_its_ceiling() -> None:
    schedule = LoopSchedule(backoff_initial=1, backoff_max=60)
    assert [schedule.backoff(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]

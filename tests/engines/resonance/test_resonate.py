"""Full resonance (Field.resonate), phase by phase, on small fields whose ranking is known.

The WordEmbedder makes texts that share words close, so which memory the plain hybrid
recall finds is predictable; each test then shows what one phase changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from word_embedder import WordEmbedder

from soul.engines.resonance import ConfigError, Field

DISTRACTORS = [
    "The quarterly budget meeting moved to the large conference room",
    "Fresh basil grows best on a sunny kitchen windowsill",
    "The train to Lisbon leaves from platform nine at dawn",
    "Thunderstorms are expected over the mountains this weekend",
    "The violin lesson covered scales and a short minuet",
    "Our printer jammed twice while printing the annual report",
]


@pytest.fixture
def field(tmp_path: Path) -> Iterator[Field]:
    with Field.open(tmp_path / "f", WordEmbedder(), dedup_threshold=None) as f:
        yield f


def ranks(hits: list) -> list[str]:
    return [h.text for h in hits]


def test_spreading_brings_up_a_memory_linked_only_through_an_entity(tmp_path: Path) -> None:
    field = Field.open(tmp_path / "g", WordEmbedder(), dedup_threshold=None, contiguity=None)
    field.remember("Caroline adopted a puppy named Biscuit from the shelter")
    linked = field.remember("Biscuit chewed through the new sofa cushions yesterday")
    for text in DISTRACTORS:
        field.remember(text)
    query = "what did Caroline adopt from the shelter"
    plain = ranks(field.resonate(query, k=len(field), disabled={"spreading", "hebbian"}))
    assoc = field.resonate(query, k=len(field), explain=True, disabled={"hebbian"})
    text = field.get(linked).content
    assert ranks(assoc).index(text) < plain.index(text)
    hit = next(h for h in assoc if h.id == linked)
    assert hit.components["activation"] > 0
    assert hit.components["hop"] == 2  # memory → Biscuit → memory
    # weighted towards association, it comes right after the memory the query names
    strong = field.resonate(query, k=3, disabled={"hebbian"}, activation_weight=0.6)
    assert ranks(strong).index(text) == 1
    field.close()


def test_contiguity_links_a_memory_to_the_one_remembered_before_it(tmp_path: Path) -> None:
    # each text's own vector (no session context, test_field_context.py): the answer is
    # found through the `follows` edge alone, not through its question in its vector
    field = Field.open(tmp_path / "c", WordEmbedder(), dedup_threshold=None, context_weight=None)
    question = field.remember("Did you ever find out what was wrong with the old car")
    answer = field.remember("Yes the mechanic said a worn timing belt was to blame")
    for text in DISTRACTORS:
        field.remember(text, session="elsewhere")  # another session: no link to these two
    edges = {(t.subject, t.object) for t in field.graph.triplets(predicate="follows")}
    assert (f"m:{question}", f"m:{answer}") in edges
    assert not any(f"m:{answer}" == a for a, _ in edges)  # the next session's memory is not its successor
    query = "what was wrong with the old car"
    plain = field.resonate(query, k=3, disabled={"spreading", "hebbian"})
    assoc = field.resonate(query, k=3, explain=True, disabled={"hebbian"})
    assert [h.id for h in assoc][:2] == [question, answer]
    assert answer not in [h.id for h in plain][:2]
    lifted = next(h for h in assoc if h.id == answer).components
    assert lifted["activation"] > lifted["hybrid"]  # it got more from its neighbour than itself
    field.close()


def test_contiguity_stops_at_the_time_window(tmp_path: Path) -> None:
    with Field.open(tmp_path / "w", WordEmbedder(), contiguity=0.0) as field:
        field.remember("The first memory of a quiet morning walk")
        time.sleep(0.01)
        field.remember("A second memory much later about the harbour")
        assert field.graph.triplets(predicate="follows") == []


def test_without_a_graph_path_spreading_changes_nothing(field: Field) -> None:
    for text in DISTRACTORS:
        field.remember(text)
    query = "when does the train to Lisbon leave"
    off = field.resonate(query, k=3, disabled={"spreading", "hebbian"})
    on = field.resonate(query, k=3, disabled={"hebbian"})
    assert ranks(on)[0] == ranks(off)[0] == DISTRACTORS[2]


def test_lateral_inhibition_lets_a_different_memory_past_a_near_duplicate(field: Field) -> None:
    a = field.remember("Melanie painted a sunrise over the lake in watercolour")
    b = field.remember("Melanie painted a sunrise over the lake in watercolours")
    c = field.remember("Melanie painted her kitchen walls a pale yellow")
    for text in DISTRACTORS:
        field.remember(text)
    query = "what did Melanie paint over the lake"
    off = field.resonate(query, k=3, disabled={"inhibition", "hebbian", "spreading"})
    on = field.resonate(query, k=3, explain=True, disabled={"hebbian", "spreading"},
                        inhibition_threshold=0.85)
    assert [h.id for h in off][:2] in ([a, b], [b, a])
    assert [h.id for h in on][1] == c  # the near-duplicate lost to a different memory
    damped = [h for h in on if h.components.get("inhibition", 1.0) < 1.0]
    # a winner damps a later near-duplicate by ×(1 − 0.7·cos), and cos > 0.85 to compete
    assert damped or len({h.id for h in on} & {a, b}) == 1
    for h in damped:
        assert 0.0 < h.components["inhibition"] < 1 - 0.7 * 0.85
    assert on[0].components["facts"]["inhibition"]["damped"] >= 1


def test_the_attractor_basin_lifts_memories_of_the_entity_the_query_names(field: Field) -> None:
    hub = [field.remember(f"Jordan {verb} the garden shed on {day}")
           for verb, day in [("painted", "Monday"), ("repaired", "Tuesday"),
                             ("cleaned", "Wednesday"), ("locked", "Thursday")]]
    for text in DISTRACTORS:
        field.remember(text)
    hits = field.resonate("what happened with Jordan", k=4, explain=True,
                          disabled={"hebbian", "spreading"})
    facts = hits[0].components["facts"]
    assert facts["basin"]["attractor"].lower() == "jordan"
    for h in hits:
        assert h.id in hub
        assert h.components["basin"] == pytest.approx(1.05)


def test_session_priming_boosts_what_the_session_saw(field: Field) -> None:
    first = field.remember("The blue notebook holds the recipe for lemon cake")
    second = field.remember("The red notebook holds the recipe for lemon tart")
    for text in DISTRACTORS:
        field.remember(text)
    field.primer.observe("s1", [second])
    query = "which notebook has the lemon recipe"
    unprimed = field.resonate(query, k=2, disabled={"hebbian", "spreading"})
    primed = field.resonate(query, k=2, session="s1", explain=True,
                            disabled={"hebbian", "spreading"})
    assert {h.id for h in unprimed} == {first, second}
    assert primed[0].id == second
    assert primed[0].components["priming"] == pytest.approx(1.3)
    other = field.resonate(query, k=2, session="s2", disabled={"hebbian", "spreading"})
    assert [h.id for h in other] == [h.id for h in unprimed]


def test_resonating_with_a_session_primes_its_next_query(field: Field) -> None:
    m = field.remember("The harbour ferry stops running after midnight")
    for text in DISTRACTORS:
        field.remember(text)
    field.resonate("when does the harbour ferry stop", k=1, session="s")
    assert m in field.primer.recent("s")


def test_hebbian_links_co_retrieved_memories_off_the_read_path(field: Field) -> None:
    a = field.remember("Priya bakes sourdough bread every Sunday morning")
    b = field.remember("Priya sells sourdough bread at the Sunday market")
    for text in DISTRACTORS:
        field.remember(text)
    field.resonate("Priya sourdough Sunday", k=2)
    field.graph.flush()
    links = field.graph.triplets(predicate="relates_to")
    pairs = {frozenset((t.subject, t.object)) for t in links}
    assert any(a in " ".join(p) and b in " ".join(p) for p in pairs)


def test_scoring_prefers_a_correction_over_an_episode_of_equal_relevance(field: Field) -> None:
    episode = field.remember("The meeting with Dana is on Friday at noon", kind="episode")
    correction = field.remember("The meeting with Dana is on Friday at ten", kind="correction")
    for text in DISTRACTORS:
        field.remember(text)
    hits = field.resonate("when is the meeting with Dana on Friday", k=2, explain=True,
                          disabled={"hebbian", "spreading", "inhibition"})
    assert [h.id for h in hits] == [correction, episode]
    assert hits[0].components["factor:Kind"] > hits[1].components["factor:Kind"]
    off = field.resonate("when is the meeting with Dana on Friday", k=2,
                         disabled={"hebbian", "spreading", "inhibition", "scoring"})
    assert {h.id for h in off} == {correction, episode}


def test_explain_reports_every_phase_per_hit(field: Field) -> None:
    for text in DISTRACTORS:
        field.remember(text)
    [hit] = field.resonate("the train to Lisbon", k=1, explain=True)
    comps = hit.components
    for key in ("hybrid", "activation", "relevance", "facts"):
        assert key in comps
    assert any(k.startswith("factor:") for k in comps)
    assert "spreading" in comps["facts"]["phases"]
    plain = field.resonate("the train to Lisbon", k=1)
    assert plain[0].components == {}


def test_feedback_credits_the_learners_draw(field: Field) -> None:
    m = field.remember("The spare key hides under the third flower pot")
    for text in DISTRACTORS:
        field.remember(text)
    before = field.learner.state()
    [hit] = field.resonate("where is the spare key", k=1, learn=True)
    assert hit.id == m
    field.feedback(m, useful=True)
    assert field.learner.state() != before
    assert field.get(m).confidence.n >= 1


def test_feedback_credits_only_the_draw_of_the_last_query_that_surfaced_a_memory(field: Field) -> None:
    # a query without a draw (the learner off) takes the earlier draw's credit away, as it
    # always did, and keeps nothing of its own: a field that never learned keeps no entries
    m = field.remember("The spare key hides under the third flower pot")
    for text in DISTRACTORS:
        field.remember(text)
    field.resonate("where is the spare key", k=1)
    assert not field.association._credits  # no draw, nothing kept
    field.resonate("where is the spare key", k=1, learn=True)
    field.resonate("where is the spare key", k=1, learn=False)
    before = field.learner.state()
    field.feedback(m, useful=True)
    assert field.learner.state() == before  # the last query had no draw: nothing credited
    field.resonate("where is the spare key", k=1, learn=True)
    field.feedback(m, useful=True)
    assert field.learner.state() != before


def test_unknown_phase_or_option_is_a_config_error(field: Field) -> None:
    field.remember("The train to Lisbon leaves from platform nine")
    with pytest.raises(ConfigError, match="phase"):
        field.resonate("train", disabled={"telepathy"})
    with pytest.raises(ConfigError, match="resonate"):
        field.resonate("train", bogus=1)


def test_a_read_does_not_wait_for_a_writer_holding_the_field_lock(field: Field) -> None:
    for text in DISTRACTORS:
        field.remember(text)
    field.resonate("train", k=1)  # indexes built
    held = threading.Event()
    release = threading.Event()

    def writer() -> None:
        with field._lock:
            held.set()
            release.wait(5)

    t = threading.Thread(target=writer)
    t.start()
    held.wait(5)
    started = time.perf_counter()
    hits = field.resonate("the train to Lisbon", k=1)
    waited = time.perf_counter() - started
    release.set()
    t.join()
    assert hits and hits[0].text == DISTRACTORS[2]
    assert waited < 2.0


def test_a_write_reads_the_access_histories_its_logged_accesses_changed(field: Field) -> None:
    # issue 26: the memories a turn recalled are touched after it, their accesses logged by
    # the next write; that write's catch-up reads their histories, so the next query that
    # scores them copies none (and scores them as a query reading them itself would)
    for text in DISTRACTORS:
        field.remember(text)
    first = field.resonate("the train to Lisbon", k=3, touch=False)
    histories = field.association._scorer._histories
    field.touch([h.id for h in first])
    field.remember("a note written after the recall")  # logs the accesses, then catches up
    read = histories.read_rows
    assert read >= len(first)
    field.resonate("the train to Lisbon", k=3, touch=False)
    assert histories.read_rows == read  # nothing left for the query to copy
    state = field.store.state
    rows = [state.rows[h.id] for h in first]
    flat, kept = histories.of(state, np.array(rows), np.array([state.access_count[r] for r in rows], float))
    want = [tuple(state.accessed[r]) for r in rows]  # the times as the state keeps them
    assert kept.tolist() == [len(t) for t in want] and flat.tolist() == [x for t in want for x in t]


def test_code_symbols_join_the_hits_when_the_field_has_a_code_index(field: Field) -> None:
    for text in DISTRACTORS:
        field.remember(text)
    fixture = Path(__file__).parent / "code" / "fixture" / "py"
    report = field.code_index().index(fixture)
    assert report.symbols > 0
    hits = field.resonate("total area of the shapes", k=len(DISTRACTORS) + 5, explain=True)
    symbols = [h for h in hits if h.kind == "symbol"]
    assert symbols and symbols[0].meta["symbol"].endswith("total_area")
    assert hits[0].components["facts"]["code_symbols"] >= 1
    plain = field.resonate("total area of the shapes", k=5, disabled={"code"})
    assert all(h.kind != "symbol" for h in plain)


def test_the_querys_affect_reaches_the_scoring_factors(field: Field) -> None:
    from soul.engines.resonance.resonate.scoring import Affect

    calm_id = field.remember("The deploy failed because the database password expired",
                             kind="failure")
    for text in DISTRACTORS:
        field.remember(text)
    calm = field.resonate("why did the deploy fail", k=1, explain=True,
                          disabled={"spreading", "hebbian"})
    upset = field.resonate("why did the deploy fail", k=1, explain=True,
                           disabled={"spreading", "hebbian"},
                           affect=Affect(valence=-0.8, arousal=0.9, frustration=0.9))
    assert calm[0].id == upset[0].id == calm_id
    # a frustrated query lifts failures and corrections (FrustrationEscalation)
    assert (upset[0].components["factor:FrustrationEscalation"]
            > calm[0].components["factor:FrustrationEscalation"])


def test_a_noun_phrase_three_memories_share_becomes_an_entity_of_all_three(field: Field) -> None:
    ids = [field.remember(f"we went to the pottery class on {day} and made bowls")
           for day in ("monday", "wednesday", "friday")]
    assert set(field.graph.memories_of("pottery class")) == set(ids)
    one = field.remember("the cooking lesson was on saturday with friends")
    assert one not in field.graph.memories_of("pottery class")


def test_resonating_logs_accesses_like_recall_without_an_unbounded_queue(field: Field) -> None:
    m = field.remember("The harbour ferry stops running after midnight")
    for text in DISTRACTORS:
        field.remember(text)
    for _ in range(60):  # 60 queries x 7 hits: past the queue's bound of 256
        field.resonate("when does the harbour ferry stop", k=len(field))
    assert len(field.accesses) < 256  # flushed to the log, as recall does
    assert field.get(m).access_count >= 60


def test_a_write_between_two_queries_is_seen_as_a_fresh_open_sees_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A query keeps what depends only on the field between queries (issue 26: the keyword
    # index's read view, decoded metas, the scoring plan); after every kind of write the
    # next query must rank and score as a field opened afresh from the files does.
    now = [1_790_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    path = tmp_path / "w"
    field = Field.open(path, WordEmbedder(), dedup_threshold=None)
    ids = [field.remember(text, meta={"session": "s", "n": i}) for i, text in
           enumerate(["Ada builds compilers in Rust", "Ada likes compilers and parsers",
                      *DISTRACTORS])]
    query = "who builds compilers"

    def check() -> list[str]:
        field.sync()
        field.association.graph.flush()
        got = field.resonate(query, k=5, touch=False, disabled={"hebbian"})
        with Field.open(path, WordEmbedder(), read_only=True) as fresh:
            want = fresh.resonate(query, k=5, disabled={"hebbian"})
        assert [(h.id, h.score, h.meta) for h in got] == [(h.id, h.score, h.meta) for h in want]
        return [h.id for h in got]

    first = check()
    new = field.remember("compilers: Ada builds them, who else builds compilers", meta={"n": 9})
    assert new in check()
    field.touch([ids[1]] * 3)
    field.flush_accesses()
    now[0] += 3600.0
    check()
    field.strengthen(ids[1])
    field.weaken(ids[0])
    check()
    field.forget(new)
    assert new not in check()
    field.forget(first[0])
    assert first[0] not in check()
    field.close()


def test_a_hits_meta_is_its_own_copy(field: Field) -> None:
    # a row's meta is decoded once and copied to each hit (issue 26): changing one hit's
    # meta changes no other hit's, nor the stored one
    memory_id = field.remember("Ada builds compilers in Rust", meta={"session": "s", "n": 1})
    first = field.resonate("compilers", k=1)[0]
    first.meta["n"] = 2
    first.meta["added"] = True
    again = field.resonate("compilers", k=1)[0]
    assert again.meta == {"session": "s", "n": 1} == field.get(memory_id).meta
    assert again.meta is not first.meta


def test_a_sessions_topics_are_what_a_counter_of_them_gives() -> None:
    # SessionPrimer counts topics without Counter.update and ranks a few without heapq
    # (issue 26): the same weights, in the same order, as Counter.update / most_common
    import random
    from collections import Counter

    from soul.engines.resonance.resonate.priming import SessionPrimer

    rng = random.Random(4)
    primer, counts = SessionPrimer(), Counter()
    names = [f"topic{i}" for i in range(14)]
    for _ in range(300):
        seen = rng.choices(names, k=rng.randint(0, 6))
        primer.observe("s", [], seen)
        if seen:
            for name in list(counts):
                counts[name] *= 0.8
                if counts[name] < 0.1:
                    del counts[name]
            counts.update(seen)
        for n in (3, 10, 20):
            top = counts.most_common(n)
            want = {name: c / top[0][1] for name, c in top} if top else {}
            assert list(primer.topics("s", n).items()) == list(want.items())

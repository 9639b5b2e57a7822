"""What a prompt shows of a session's past is worked out once (issue 26): working memory's
labelled lines once per view, its memories' estimates kept between turns while recent (and
nothing else of them), and what each past turn's messages cost, per way of counting."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from soul.records import MemoryEntry
from soul.runtime.conversation import ConversationView, HistoryTurn
from soul.runtime.conversation.budget import (
    ESTIMATE,
    MESSAGE_OVERHEAD,
    TOKENIZER,
    Counter,
    count_tokens,
    estimate,
)
from soul.runtime.turn.prompting.fitting import Fitter, MemoryView
from soul.runtime.turn.prompting.memory_view import TEXT_CACHE, LineCosts, line_of


def test_an_entry_is_shown_labelled_and_escaped() -> None:
    entry = MemoryEntry("notes", "internalMonologue", "a <b> & c", meta={"turn": 3, "step": "think", "kind": "internal_monologue"})
    assert line_of(entry) == ("- [turn 3 · think, internal_monologue] a &lt;b&gt; &amp; c",
                              "- [turn 3 · think, internal_monologue]", "a &lt;b&gt; &amp; c")
    twin = MemoryEntry("notes", "internalMonologue", "a <b> & c", meta={"turn": 4, "step": "think", "kind": "internal_monologue"})
    assert line_of(twin)[0] == "- [turn 4 · think, internal_monologue] a &lt;b&gt; &amp; c"  # its own label
    assert line_of(MemoryEntry("notes", "fact", "plain")) == ("- plain", "-", "plain")


def test_a_memory_view_of_the_same_entries_shows_the_same_section() -> None:
    fitter = Fitter(["notes"], {"notes": 2})
    entries = {"notes": tuple(MemoryEntry("notes", "fact", f"fact {i}", meta={"turn": i}) for i in range(1, 4))}
    first, again = MemoryView(entries, fitter.listed, fitter.limits, fitter.texts), MemoryView(entries, fitter.listed, fitter.limits, fitter.texts)
    assert first.text == again.text == "## Working Memory\n### notes\n- [turn 2] fact 2\n- [turn 3] fact 3"
    assert first.regions[0][3] == 1  # one entry over the region's limit


def test_a_past_turns_cost_is_its_messages_tokens_counted_once_per_way_of_counting() -> None:
    fitter = Fitter([], {})
    history = (HistoryTurn(1, "message", "ada", "I build <compilers>", "A noble way to suffer."),
               HistoryTurn(2, "message", "ada", "Any advice?", ""))
    rough, exact = Counter(ESTIMATE, False), Counter(TOKENIZER, True)
    for _ in range(2):  # a second turn showing the same history finds each turn's cost kept
        view = ConversationView(history, None, fitter._turns)
        for counter, tokens in ((rough, estimate), (exact, count_tokens)):
            each, whole = view.costs(counter, fitter.count)
            assert each == tuple(sum(tokens(m.content) + MESSAGE_OVERHEAD for m in t.messages()) for t in history)
            assert whole == sum(each)


_TEXTS = st.text(alphabet=st.sampled_from("ab Z\t\n\r .,;'1<&]-[é\u00a0\U0001f600"), max_size=40)


@settings(max_examples=400, deadline=None)
@given(content=_TEXTS, step=_TEXTS, turn=st.one_of(st.none(), st.integers(0, 12)), labelled=st.booleans())
def test_a_working_memory_line_is_estimated_from_its_label_and_its_memory_as_whole(content: str, step: str, turn: int | None,
                                                                                 labelled: bool) -> None:
    # the estimate counts a line as its label's pieces (through the `]`) and the rest's, added
    # up: each counted once (a turn's recollections share their label, a memory recalled again
    # its text), the line's count the one counting it whole gives
    fitter = Fitter(["notes"], {})
    meta = {"turn": turn, "step": step, "kind": "memory.recall"} if labelled else {}
    view = MemoryView({"notes": (MemoryEntry("notes", "recollection", content, meta=meta),)}, fitter.listed, fitter.limits, fitter.texts)
    (_, _, (line,), _, _), = view.regions
    rough, exact = Counter(ESTIMATE, False), Counter(TOKENIZER, True)
    assert view.costs(rough, fitter.count)[0][0][1] == (estimate(line) + 1,)
    assert view.costs(exact, fitter.count)[0][0][1] == (count_tokens(line) + 1,)  # a tokenizer counts it whole


def test_a_memory_recalled_again_under_a_new_label_is_not_estimated_again() -> None:
    fitter = Fitter(["notes"], {})
    rough = Counter(ESTIMATE, False)
    for turn in (3, 4):  # each turn's view makes its own lines; the memory's text is counted once
        entry = MemoryEntry("notes", "recollection", "ada: I build compilers.", meta={"turn": turn, "step": "recall"})
        view = MemoryView({"notes": (entry,)}, fitter.listed, fitter.limits, fitter.texts)
        assert view.costs(rough, fitter.count)[0][0][1] == (estimate(line_of(entry)[0]) + 1,)
        assert list(fitter.texts._texts) == ["ada: I build compilers."]
    assert not fitter._counts[False].keys() & {line_of(entry)[0]}  # no line is kept by the count cache


def test_a_memory_text_stays_counted_while_views_keep_showing_it_and_goes_after_two_generations() -> None:
    texts = LineCosts()
    texts.estimate("- [turn 1]", "shown every turn")
    for i in range(3 * TEXT_CACHE):
        texts.estimate(f"- [turn {i}]", f"new {i}")
        texts.estimate("- [turn 1]", "shown every turn")  # found, or carried over from the older generation
    kept = texts._texts.keys() | texts._older[0].keys()
    assert "shown every turn" in kept and "- [turn 1]" in texts._labels.keys() | texts._older[1].keys()
    assert "new 0" not in kept
    assert len(kept) <= 2 * TEXT_CACHE
    assert texts.estimate("- [turn 1]", "shown every turn") == estimate("- [turn 1] shown every turn")

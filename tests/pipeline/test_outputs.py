"""parse_step and its value parsers: booleans, lists, mappings, choices, verbs, missing sections."""

from __future__ import annotations

from typing import Any

import pytest

from soul.kinds.stepkind import Attribute, Output, Section, StepKind
from soul.sections.outputs import StepParse, parse_bool, parse_list, parse_mapping, parse_step
from soul.sections.xmlparse import extract_sections
from soul.steps.decision import Brainstorm, Decision, MentalQuery
from soul.steps.dialogue import ExternalDialogue
from soul.steps.monologue import InternalMonologue
from soul.steps.soul_state import SoulStateUpdate
from soul.steps.subconscious import SLoud
from soul.steps.user_model import UserModelCheck, UserModelUpdate


def run(kind: type[StepKind], raw: str, params: dict[str, Any] | None = None) -> StepParse:
    tags = [section.tag for section in kind.sections]
    return parse_step(kind, params or {}, extract_sections(raw, tags))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True), ("True", True), ("TRUE", True), ("yes", True), ("Yes", True), ("1", True),
        ("y", True), ("on", True), ("True.", True), ("**true**", True), ("  true \n", True),
        ('"yes"', True), ("`true`", True), ("_True_!", True), ("(yes)", True),
        ("false", False), ("False", False), ("no", False), ("NO", False), ("0", False), ("n", False),
        ("off", False), ("false.", False), ("**False**", False), ("'no'", False),
        ("", None), ("maybe", None), ("true false", None), ("yes, because", None), ("2", None),
        ("truthy", None), ("nope", None), ("**", None), ("-1", None),
    ],
)
def test_parse_bool(text: str, expected: bool | None) -> None:
    assert parse_bool(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- one\n- two\n-   three  ", ["one", "two", "three"]),
        ("* one\n+ two\n• three", ["one", "two", "three"]),
        ("1. one\n2) two\n10. three", ["one", "two", "three"]),
        ("Here are ideas:\n- one\n- two\nThat is all.", ["one", "two"]),
        ("one\n\n  two  \n", ["one", "two"]),
        ("- \n- real", ["real"]),
        ("", []),
        ("-not a bullet", ["-not a bullet"]),
    ],
)
def test_parse_list(text: str, expected: list[str]) -> None:
    assert parse_list(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mood: calm\ncurrentTopic: the sea", {"mood": "calm", "currentTopic": "the sea"}),
        ("- mood: calm\n* task : sailing ", {"mood": "calm", "task": "sailing"}),
        ("no colon here\nkey: a: b\n: orphan\n", {"key": "a: b"}),
        ("mood: calm\nmood: stormy", {"mood": "stormy"}),
        ("empty:", {"empty": ""}),
        ("", {}),
    ],
)
def test_parse_mapping(text: str, expected: dict[str, str]) -> None:
    assert parse_mapping(text) == expected


def test_text_and_verb() -> None:
    parsed = run(ExternalDialogue, '<external_dialogue verb="Pointed  Out">Hi there</external_dialogue>')
    assert parsed == StepParse({"text": "Hi there", "verb": "pointed out"}, (), ())


@pytest.mark.parametrize(("written", "canonical"), [("said", "said"), ("SAID", "said"), ("pointed_out", "pointed out"), (" noted ", "noted")])
def test_known_verbs_are_canonical(written: str, canonical: str) -> None:
    parsed = run(ExternalDialogue, f"<external_dialogue verb='{written}'>Hi</external_dialogue>")
    assert parsed.outputs["verb"] == canonical
    assert parsed.flags == ()


def test_unknown_verb_is_kept_and_flagged() -> None:
    parsed = run(InternalMonologue, "<internal_monologue verb=shouted>Hm</internal_monologue>")
    assert parsed.outputs == {"text": "Hm", "verb": "shouted"}
    assert parsed.flags == ("unknown verb 'shouted' (kept)",)
    assert parsed.missing == ()


def test_absent_verb_is_none() -> None:
    assert run(ExternalDialogue, "<external_dialogue>Hi</external_dialogue>").outputs == {"text": "Hi", "verb": None}


def test_required_attribute_absent_is_flagged() -> None:
    class Tone(StepKind):
        name = "tone"
        description = "test kind"
        outputs = (Output("text", "text", "t"), Output("tone", "choice", "t"))
        sections = (Section("tone", "text", attributes=(Attribute("tone", "tone", ("warm", "cold"), required=True),)),)

    parsed = run(Tone, "<tone>hi</tone>")
    assert parsed.flags == ("<tone> has no 'tone' attribute",)
    assert parsed.outputs == {"text": "hi", "tone": None}


def test_missing_required_section() -> None:
    parsed = run(ExternalDialogue, "I forgot the tags.")
    assert parsed.outputs == {"text": None, "verb": None}
    assert parsed.missing == ("external_dialogue",)


def test_empty_required_text_section_is_present() -> None:
    parsed = run(ExternalDialogue, "<external_dialogue></external_dialogue>")
    assert parsed.outputs["text"] == ""
    assert parsed.missing == ()


@pytest.mark.parametrize(
    ("raw", "result", "missing"),
    [
        ("<user_model_check>true</user_model_check>", True, ()),
        ("<user_model_check>**No.**</user_model_check>", False, ()),
        ("<user_model_check/>", None, ("user_model_check",)),
        ("<user_model_check>perhaps</user_model_check>", None, ("user_model_check",)),
        ("nothing", None, ("user_model_check",)),
    ],
)
def test_bool_section(raw: str, result: bool | None, missing: tuple[str, ...]) -> None:
    parsed = run(UserModelCheck, raw)
    assert parsed.outputs == {"result": result}
    assert parsed.missing == missing


def test_unreadable_bool_is_flagged() -> None:
    assert run(UserModelCheck, "<user_model_check>perhaps</user_model_check>").flags == (
        "<user_model_check> is not true or false: 'perhaps'",
    )


def test_optional_sections_absent_and_required_bool() -> None:
    parsed = run(SLoud, "<trigger>yes</trigger>")
    assert parsed.outputs == {"loud": None, "quiet": None, "trigger": True}
    assert parsed.missing == ()
    parsed = run(SLoud, "<S_loud>act now</S_loud>")
    assert parsed.outputs == {"loud": "act now", "quiet": None, "trigger": None}
    assert parsed.missing == ("trigger",)


def test_list_section() -> None:
    parsed = run(Brainstorm, "<brainstorm count='3'>\n- sail\n- swim\n- sleep\n</brainstorm>", {"question": "q", "count": 3})
    assert parsed.outputs == {"ideas": ["sail", "swim", "sleep"]}
    assert parsed.flags == ()


def test_mapping_section() -> None:
    parsed = run(SoulStateUpdate, "<soul_state_update>\nemotionalState: curious\ncurrentTopic: whales\n</soul_state_update>")
    assert parsed.outputs == {"updates": {"emotionalState": "curious", "currentTopic": "whales"}}


def test_markdown_section_and_optional_note() -> None:
    raw = "<user_model_update>## Persona\nA sailor &amp; poet.</user_model_update><model_change_note>learned job</model_change_note>"
    parsed = run(UserModelUpdate, raw)
    assert parsed.outputs == {"model": "## Persona\nA sailor & poet.", "change_note": "learned job"}


OPTIONS = {"question": "which?", "options": ["Go sailing", "Stay home"]}


@pytest.mark.parametrize("written", ["Go sailing", "go sailing", "  GO   SAILING ", "**Go sailing**", "Go sailing.", '"go sailing"'])
def test_choice_matches_options(written: str) -> None:
    parsed = run(Decision, f"<decision>{written}</decision><decision_reason>wind</decision_reason>", OPTIONS)
    assert parsed.outputs == {"choice": "Go sailing", "reason": "wind"}
    assert parsed.flags == ()


def test_choice_not_among_options_is_kept_and_flagged() -> None:
    parsed = run(Decision, "<decision>maybe</decision>", OPTIONS)
    assert parsed.outputs == {"choice": "maybe", "reason": None}
    assert parsed.flags == ("choice 'maybe' is not one of: Go sailing, Stay home",)
    assert parsed.missing == ()


def test_choice_without_options_param_is_the_text() -> None:
    assert run(Decision, "<decision>anything</decision>", {}).outputs["choice"] == "anything"


def test_mental_query() -> None:
    assert run(MentalQuery, "<mental_query>False</mental_query>", {"query": "q"}).outputs == {"result": False}


def test_a_mental_querys_answer_changes_the_same_records_each_time_it_is_given() -> None:
    from soul.kinds import ChangeContext, Changes
    from soul.records import MemoryEntry, MessageRecord

    context = ChangeContext()
    yes = MentalQuery.changes("check", {"result": True}, context)
    assert yes == Changes((MessageRecord("internal", "mental_query", "true", "check", None, {"result": True}),), None, None,
                          (MemoryEntry("default", "mentalQuery", "check", None, {"result": True}),))
    assert MentalQuery.changes("check", {"result": True}, context) is yes  # made once, shared: records are never changed
    no = MentalQuery.changes("check", {"result": False}, context)
    assert no.messages[0].content == "false" and no.memory[0].meta == {"result": False}
    assert MentalQuery.changes("other", {"result": True}, context).messages[0].step == "other"
    assert MentalQuery.changes("check", {"result": None}, context) == Changes()
    odd = MentalQuery.changes("check", {"result": 1}, context)  # not a parsed answer: made as it reads, never shared
    assert odd.messages[0].meta == {"result": 1} and odd.messages[0].content == "true"
    assert MentalQuery.changes("check", {"result": 1}, context) is not odd


def test_section_found_under_another_spelling() -> None:
    result = extract_sections("<EXTERNAL_DIALOGUE>Hi</EXTERNAL_DIALOGUE>", ["EXTERNAL_DIALOGUE"])
    assert parse_step(ExternalDialogue, {}, result).outputs["text"] == "Hi"


def test_fused_reply_parses_per_kind() -> None:
    raw = (
        "```xml\n<internal_monologue verb='weighed'>They seem tired.</internal_monologue>\n"
        "<external_dialogue verb=quipped>Long day?</external_dialogue>\n"
        "<user_model_check>True.</user_model_check>\n```"
    )
    tags = ["internal_monologue", "external_dialogue", "user_model_check"]
    result = extract_sections(raw, tags)
    assert parse_step(InternalMonologue, {}, result).outputs == {"text": "They seem tired.", "verb": "weighed"}
    assert parse_step(ExternalDialogue, {}, result).outputs == {"text": "Long day?", "verb": "quipped"}
    assert parse_step(UserModelCheck, {}, result).outputs == {"result": True}


@pytest.mark.parametrize("written", ["Quipped", "  RE-MARKED ", "re_marked", "pondered\n", "nonsense", "", "said"])
def test_an_allowed_value_is_the_first_that_reads_alike_as_one_by_one(written: str) -> None:
    from soul.sections.outputs import _match, _normalise

    allowed = ("quipped", "re-marked", "Re marked", "pondered", "")
    one_by_one = next((option for option in allowed if _normalise(option) == _normalise(written)), None)
    for _ in range(2):  # the allowed values normalised on the first read, kept after
        assert _match(written, allowed) == _match(written, list(allowed)) == one_by_one


@pytest.mark.parametrize("written", ["nan", "NaN", "inf", "-Infinity", "1e999"])
def test_a_number_state_key_refuses_what_is_no_finite_number(written: str) -> None:
    # float() reads these; JSON has no number for them, and no comparison in a `when:` means
    # anything with NaN: the update is a problem, and the key keeps its value
    from soul.language import StateVar
    from soul.steps.soul_state import coerce

    value, problem = coerce(StateVar("temperature", "number", 0.0), written)
    assert value is None and problem == f"state key 'temperature': {written!r} is not a finite number"
    assert coerce(StateVar("temperature", "number", 0.0), "36.6") == (36.6, None)

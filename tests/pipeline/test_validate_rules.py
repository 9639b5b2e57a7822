"""One test per validation rule: a minimal bad blueprint and the exact error line."""

from __future__ import annotations

from collections.abc import Callable

Check = Callable[..., list[str]]

HEAD = "soul: t\nversion: 1\n"


def test_a_minimal_blueprint_is_valid(check: Check) -> None:
    assert check(HEAD + "steps:\n  reply: {uses: external_dialogue}\n") == []


def test_unknown_step_kind_suggests_the_nearest(check: Check) -> None:
    assert check(HEAD + "steps:\n  think:\n    uses: internal_monolog\n") == [
        "soul.yaml:5:11: error: unknown step kind 'internal_monolog' (did you mean 'internal_monologue'?)"
    ]


def test_unknown_step_kind_lists_the_known_ones_when_nothing_is_close(check: Check) -> None:
    (line,) = check(HEAD + "steps:\n  x:\n    uses: zzz\n")
    assert line.startswith("soul.yaml:5:11: error: unknown step kind 'zzz' (known kinds: brainstorm, chetana.context,")


def test_after_naming_a_missing_step(check: Check) -> None:
    text = HEAD + "steps:\n  think: {uses: internal_monologue}\n  reply:\n    uses: external_dialogue\n    after: [thnik]\n"
    assert check(text) == [
        "soul.yaml:7:13: error: `after` names a missing step 'thnik' (did you mean 'think'?)"
    ]


def test_after_as_a_single_name(check: Check) -> None:
    text = HEAD + "steps:\n  think: {uses: internal_monologue}\n  reply:\n    uses: external_dialogue\n    after: think\n"
    assert check(text) == []


def test_a_step_that_follows_itself(check: Check) -> None:
    text = HEAD + "steps:\n  reply:\n    uses: external_dialogue\n    after: [reply]\n"
    assert "soul.yaml:6:13: error: step 'reply' cannot follow itself" in check(text)


def test_cycle_is_named(check: Check) -> None:
    text = HEAD + (
        "steps:\n"
        "  a: {uses: internal_monologue, after: [c]}\n"
        "  b: {uses: external_dialogue, after: [a]}\n"
        "  c: {uses: user_model_check, after: [b]}\n"
    )
    assert check(text) == [
        "soul.yaml:4:33: error: cycle in the step graph: a → b → c → a (remove one of these `after` links)"
    ]


def test_steps_only_after_a_cycle_are_unreachable(check: Check) -> None:
    text = HEAD + (
        "steps:\n"
        "  a: {uses: internal_monologue, after: [b]}\n"
        "  b: {uses: internal_monologue, after: [a]}\n"
        "  c: {uses: external_dialogue, after: [b]}\n"
    )
    out = check(text)
    assert "soul.yaml:6:3: error: step 'c' is unreachable from the turn's input: it only follows steps in a cycle" in out
    assert len(out) == 2


def test_when_that_does_not_compile(check: Check) -> None:
    text = HEAD + "steps:\n  reply:\n    uses: external_dialogue\n    when: steps.x.\n"
    assert check(text) == [
        "soul.yaml:6:11: error: `when` does not compile: expected name or number "
        "(it is a Jinja expression, e.g. steps.check.result and turn.number > 1)"
    ]


def test_when_reading_a_step_that_is_not_upstream(check: Check) -> None:
    text = HEAD + (
        "steps:\n"
        "  reply: {uses: external_dialogue, when: steps.check.result}\n"
        "  check: {uses: user_model_check, after: [reply]}\n"
    )
    assert check(text) == [
        "soul.yaml:4:42: error: step 'reply' reads steps.check, but 'check' is not upstream of it "
        "(add 'check' to its `after`)"
    ]


def test_when_reading_an_output_the_kind_does_not_produce(check: Check) -> None:
    text = HEAD + (
        "steps:\n"
        "  check: {uses: user_model_check}\n"
        "  update: {uses: user_model_update, after: [check], when: steps.check.reslt}\n"
    )
    assert check(text) == [
        "soul.yaml:5:59: error: step 'check' (user_model_check) has no output 'reslt'; its outputs are: result "
        "(did you mean 'result'?)"
    ]


def test_when_reading_an_undeclared_state_key(check: Check) -> None:
    text = HEAD + "state: {mood: calm}\nsteps:\n  reply: {uses: external_dialogue, when: state.moood == 'calm'}\n"
    assert check(text) == ["soul.yaml:5:42: error: state has no key 'moood' (did you mean 'mood'?)"]


def test_when_with_an_unknown_name(check: Check) -> None:
    text = HEAD + "steps:\n  reply: {uses: external_dialogue, when: trun.number > 1}\n"
    assert check(text) == ["soul.yaml:4:42: error: unknown name 'trun' (did you mean 'turn'?)"]


def test_missing_persona_file(check: Check) -> None:
    text = HEAD + "persona: me.md\nsteps:\n  reply: {uses: external_dialogue}\n"
    (line,) = check(text)
    assert line.startswith("soul.yaml:3:10: error: persona 'me.md' not found in ")


def test_missing_template_file_suggests_a_near_name(check: Check) -> None:
    text = HEAD + "steps:\n  reply: {uses: external_dialogue, template: replly.j2}\n"
    (line,) = check(text, **{"reply.j2": "Say hi."})
    assert line.startswith("soul.yaml:4:46: error: template 'replly.j2' not found in ")
    assert line.endswith("(did you mean 'reply.j2'?)")


def test_template_path_leaving_the_folder(check: Check) -> None:
    text = HEAD + "steps:\n  reply: {uses: external_dialogue, template: ../../etc/passwd}\n"
    assert check(text) == [
        "soul.yaml:4:46: error: template '../../etc/passwd' is outside the blueprint's folder "
        "(keep templates and personas beside the blueprint)"
    ]


def test_template_syntax_error_points_into_the_template(check: Check) -> None:
    text = HEAD + "steps:\n  reply: {uses: external_dialogue, template: reply.j2}\n"
    out = check(text, **{"reply.j2": "Hello\n{% if x %}\nno end\n"})
    assert len(out) == 1
    assert out[0].startswith("reply.j2:3:7: error: template does not compile: Unexpected end of template.")  # after "no end"


def test_template_reading_a_step_that_is_not_upstream(check: Check) -> None:
    text = HEAD + (
        "steps:\n"
        "  reply: {uses: external_dialogue, template: reply.j2}\n"
        "  think: {uses: internal_monologue}\n"
    )
    out = check(text, **{"reply.j2": "Be kind.\nYou thought: {{ steps.think.text }}\n"})
    assert out == [
        "reply.j2:2:17: error: step 'reply' reads steps.think, but 'think' is not upstream of it (add 'think' to its `after`)"
    ]


def test_undefined_model_slot(check: Check) -> None:
    text = HEAD + "models:\n  fast: openai/gpt-4o-mini\nsteps:\n  reply: {uses: external_dialogue, model: fats}\n"
    assert check(text) == [
        "soul.yaml:4:3: warning: model slot 'fast' is never used",
        "soul.yaml:6:43: error: model slot 'fats' is not defined (did you mean 'fast'?)",
    ]


def test_a_slot_that_writes_the_summaries_is_used(check: Check) -> None:
    """The `cheap` slot writes every summary of older turns by convention, and a slot named
    by `working_memory.summary.model` does: neither is "never used" (conversation.md)."""
    steps = "steps:\n  reply: {uses: external_dialogue}\n"
    assert check(HEAD + "models:\n  cheap: anthropic/claude-haiku-4-5\n" + steps) == []
    named = HEAD + "models:\n  fast: openai/gpt-4o-mini\nworking_memory:\n  summary: {model: fast}\n" + steps
    assert check(named) == []
    # named, it is the one used: a `cheap` slot beside it writes nothing
    both = HEAD + "models:\n  fast: openai/gpt-4o-mini\n  cheap: openai/gpt-4o-mini\nworking_memory:\n  summary: {model: fast}\n" + steps
    assert check(both) == ["soul.yaml:5:3: warning: model slot 'cheap' is never used"]


def test_the_summary_model_must_be_a_slot_or_provider(check: Check) -> None:
    text = HEAD + "models:\n  fast: openai/gpt-4o-mini\nworking_memory:\n  summary: {model: fats}\nsteps:\n  reply: {uses: external_dialogue, model: fast}\n"
    assert check(text) == [
        "soul.yaml:6:20: error: model slot 'fats' is not defined (did you mean 'fast'?)",
    ]
    provider = HEAD + "working_memory:\n  summary: {model: openai/gpt-4o-mini}\nsteps:\n  reply: {uses: external_dialogue}\n"
    assert check(provider) == []


def test_default_model_must_be_a_slot_or_provider(check: Check) -> None:
    text = HEAD + "model: big\nsteps:\n  reply: {uses: external_dialogue}\n"
    assert check(text) == [
        "soul.yaml:3:8: error: model slot 'big' is not defined (defined slots: (none); or write provider/model)"
    ]


def test_fused_call_cannot_mix_models(check: Check) -> None:
    text = HEAD + (
        "models:\n  fast: openai/gpt-4o-mini\n"
        "steps:\n"
        "  think: {uses: internal_monologue}\n"
        "  check: {uses: mental_query, after: [think], model: fast, with: {query: is it late?}}\n"
        "  reply: {uses: external_dialogue, after: [check]}\n"
    )
    assert check(text) == [
        "soul.yaml:7:54: error: fused call mixes models: step 'check' uses 'fast' but sits between "
        "'think' and 'reply', which share one call on 'local' (give it the same model, or use `mode: chained`)"
    ]


def test_chained_mode_may_mix_models(check: Check) -> None:
    text = HEAD + (
        "mode: chained\nmodels:\n  fast: openai/gpt-4o-mini\n"
        "steps:\n"
        "  think: {uses: internal_monologue}\n"
        "  check: {uses: mental_query, after: [think], model: fast, with: {query: is it late?}}\n"
        "  reply: {uses: external_dialogue, after: [check]}\n"
    )
    assert check(text) == []


def test_with_parameters_are_checked_against_the_kind(check: Check) -> None:
    text = HEAD + "steps:\n  pick:\n    uses: decision\n    with:\n      question: which?\n      optons: [a, b]\n"
    assert check(text) == [
        "soul.yaml:6:5: error: steps.pick.with: missing required key 'options'",
        "soul.yaml:8:7: error: steps.pick.with: unknown key 'optons' (did you mean 'options'?)",
    ]


def test_stream_on_a_kind_that_cannot_stream(check: Check) -> None:
    text = HEAD + "steps:\n  check: {uses: user_model_check, stream: true}\n"
    assert check(text) == [
        "soul.yaml:4:43: error: step kind 'user_model_check' cannot stream "
        "(only reply-like steps (external_dialogue, internal_dialog) stream)"
    ]


def test_state_default_of_the_wrong_type(check: Check) -> None:
    text = HEAD + "state:\n  turns: {type: integer, default: many}\nsteps:\n  reply: {uses: external_dialogue}\n"
    assert check(text) == ["soul.yaml:4:35: error: state 'turns': default 'many' is not a integer"]


def test_subprocess_after_naming_a_turn_step(check: Check) -> None:
    text = HEAD + (
        "steps:\n  reply: {uses: external_dialogue}\n"
        "subprocesses:\n  learn:\n    steps:\n"
        "      noticed: {uses: mental_query, after: [reply], with: {query: new?}}\n"
    )
    assert check(text) == [
        "soul.yaml:8:45: error: `after` names a missing step 'reply' "
        "(the turn's steps all finish before a subprocess; drop it from `after`)"
    ]


def test_trigger_source_must_name_a_process_step(check: Check) -> None:
    text = HEAD + (
        "steps:\n  reply: {uses: external_dialogue}\n"
        "processes:\n  sub:\n    steps:\n      impulse: {uses: s_loud}\n"
        "triggers:\n  speak: {kind: s_loud, source: sub.impuls}\n"
    )
    assert check(text) == ["soul.yaml:10:33: error: process 'sub' has no step 'impuls' (did you mean 'impulse'?)"]


def test_dialogue_observer_must_be_an_agent(check: Check) -> None:
    text = HEAD + (
        "steps:\n  reply: {uses: external_dialogue}\n"
        "dialogue:\n  agents:\n    socrates: {style: questioning}\n    athena: {style: wise}\n"
        "  observer: {agent: fixi}\n"
    )
    assert check(text) == [
        "soul.yaml:9:21: error: 'fixi' is not one of the dialogue's agents (agents: athena, socrates)"
    ]


def test_warning_for_a_step_whose_when_is_always_false(check: Check) -> None:
    text = HEAD + "steps:\n  reply: {uses: external_dialogue}\n  think: {uses: internal_monologue, when: 'false'}\n"
    assert check(text) == ["soul.yaml:5:43: warning: step 'think' never runs: its `when` is always false"]


def test_warning_for_a_dead_non_llm_step(check: Check) -> None:
    text = HEAD + "chetana: {}\nsteps:\n  feel: {uses: chetana.context}\n  reply: {uses: external_dialogue}\n"
    assert check(text) == [
        "soul.yaml:5:3: warning: step 'feel' is dead: nothing reads its outputs and it changes nothing"
    ]


def test_errors_come_all_at_once_sorted_by_position(check: Check) -> None:
    text = HEAD + (
        "mode: fusd\n"
        "steps:\n"
        "  think: {uses: internal_monolog}\n"
        "  reply: {uses: external_dialogue, after: [thnk]}\n"
    )
    out = check(text)
    assert [line.split(": error:")[0] for line in out] == ["soul.yaml:3:7", "soul.yaml:5:17", "soul.yaml:6:44"]

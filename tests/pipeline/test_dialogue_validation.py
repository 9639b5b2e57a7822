"""`soul validate` on a `dialogue:` block: every mistake at its FILE:LINE:COL, with a hint."""

from __future__ import annotations

from collections.abc import Callable

Check = Callable[..., list[str]]

PERSONAS = {"a.md": "A.", "b.md": "B.", "fixy.md": "Fixy."}
HEAD = "soul: d\nversion: 1\nsteps:\n  reply: {uses: external_dialogue}\n"


def dialogue(body: str) -> str:
    return HEAD + "dialogue:\n" + body


AGENTS = """\
  agents:
    a: {persona: a.md}
    b: {persona: b.md}
    fixy: {persona: fixy.md}
"""


def test_a_full_dialogue_block_is_valid(check: Check) -> None:
    body = """\
  mode: enhanced
  seed: 4
  topics: [justice, memory]
  topic_manager: {turns_per_topic: 5, cycle: false}
  agents:
    a:
      persona: a.md
      drives: {id: 7, ego: 4, superego: 8, self_awareness: 0.4}
      style: terse
    b:
      persona: {core: "B, the synthesiser.", file: b.md, traits: [bold, kind]}
      drives: {conflict: 12}
    fixy: {persona: fixy.md}
  speaker_policy: {kind: entelgia, first: a, max_consecutive: 2}
  seed_strategy: entelgia
  observer: {agent: fixy, min_turn: 4, cooldown: 3, probability: 0.2, repetition_probability: 0.35,
             window: 10, every: 5, gate: true, detectors: [circular_reasoning, topic_drift]}
  energy: {enabled: true, start: 100, dream_below: 35, dream_every: 7}
  psyche: {defense: true, slip: false, self_replication: true}
  max_turns: 20
"""
    assert check(dialogue(body), **PERSONAS) == []


def test_first_and_observer_must_be_agents(check: Check) -> None:
    found = check(dialogue(AGENTS + "  speaker_policy: {first: socrates}\n  observer: {agent: fixxy}\n"), **PERSONAS)
    assert found == [
        "soul.yaml:10:27: error: 'socrates' is not one of the dialogue's agents (agents: a, b, fixy)",
        "soul.yaml:11:21: error: 'fixxy' is not one of the dialogue's agents (did you mean 'fixy'?)",
    ]


def test_the_observer_cannot_speak_first_and_two_must_speak_besides_it(check: Check) -> None:
    found = check(dialogue("  agents:\n    a: {persona: a.md}\n    fixy: {persona: fixy.md}\n"
                           "  speaker_policy: {first: fixy}\n  observer: {agent: fixy}\n"), **PERSONAS)
    assert "soul.yaml:9:27: error: the observer 'fixy' cannot speak first" in found[1]
    assert found[0].startswith("soul.yaml:6:3: error: only one agent takes turns besides the observer 'fixy'")


def test_missing_persona_files_and_model_slots_are_reported_where_they_are_named(check: Check) -> None:
    body = "  agents:\n    a: {persona: nobody.md, model: fast}\n    b: {persona: {core: B, file: missing.md}}\n"
    found = check(dialogue(body), **PERSONAS)
    assert found[0].startswith("soul.yaml:7:18: error: persona 'nobody.md' not found")
    assert found[1].startswith("soul.yaml:7:36: error: model slot 'fast' is not defined")
    assert found[2].startswith("soul.yaml:8:34: error: persona 'missing.md' not found")


def test_schema_errors_point_into_the_block(check: Check) -> None:
    body = "  mode: turbo\n" + AGENTS.replace("a: {persona: a.md}", "a: {persona: a.md, drives: {id: 11, will: 3}}")
    found = check(dialogue(body), **PERSONAS)
    assert any(line.startswith("soul.yaml:6:9: error:") and "turbo" in line for line in found)
    assert any(line.startswith("soul.yaml:8:37:") and "11" in line for line in found)
    assert any(line.startswith("soul.yaml:8:41:") and "unknown key 'will'" in line for line in found)


def test_an_agent_blueprint_must_be_valid_and_hold_no_dialogue(check: Check) -> None:
    other = HEAD.replace("external_dialogue", "nope")
    nested = HEAD.replace("soul: d", "soul: n") + "dialogue:\n" + AGENTS
    body = AGENTS.replace("a: {persona: a.md}", "a: {blueprint: bad.yaml}").replace("b: {persona: b.md}", "b: {blueprint: nested.yaml}")
    found = check(dialogue(body), **PERSONAS, **{"bad.yaml": other, "nested.yaml": nested})
    assert found[0].startswith("soul.yaml:7:20: error: agent blueprint 'bad.yaml' is invalid")
    assert "run `soul validate bad.yaml`" in found[0]
    assert found[1].startswith("soul.yaml:8:20: error: agent blueprint 'nested.yaml' holds a dialogue of its own")


def test_the_built_in_entelgia_is_valid() -> None:
    from soul.compiler import validate

    checked = validate("entelgia")
    assert checked.ok and checked.diagnostics == []
    spec = checked.blueprint.dialogue_spec  # type: ignore[union-attr]
    assert spec is not None and spec.speakers == ("socrates", "athena") and spec.observer.agent == "fixy"  # type: ignore[union-attr]


def _ring_member(name: str, agent_blueprint: str) -> str:
    """A dialogue blueprint whose agent `x` runs `agent_blueprint`."""
    return (HEAD.replace("soul: d", f"soul: {name}") + "dialogue:\n"
            f"  agents:\n    x: {{blueprint: {agent_blueprint}}}\n    y: {{persona: b.md}}\n")


def test_dialogue_blueprints_that_point_at_each_other_are_a_positioned_error_naming_the_chain(check: Check) -> None:
    # soul.yaml's agent is other.yaml, whose agent is soul.yaml: no RecursionError, the chain
    found = check(_ring_member("d", "other.yaml"), **PERSONAS, **{"other.yaml": _ring_member("o", "soul.yaml")})
    assert found == [
        "soul.yaml:7:20: error: dialogue blueprints point at each other: soul.yaml → other.yaml → soul.yaml "
        "(an agent's blueprint is one soul without a `dialogue:` block; give agent 'x' a persona instead)",
    ]


def test_a_longer_ring_of_dialogue_blueprints_is_reported_with_its_whole_chain(check: Check) -> None:
    files = {"b.yaml": _ring_member("b", "c.yaml"), "c.yaml": _ring_member("c", "soul.yaml")}
    found = check(_ring_member("d", "b.yaml"), **PERSONAS, **files)
    assert len(found) == 1
    assert found[0].startswith("soul.yaml:7:20: error: dialogue blueprints point at each other: "
                               "soul.yaml → b.yaml → c.yaml → soul.yaml")


def test_a_ring_further_down_the_chain_is_reported_where_it_is_entered(check: Check) -> None:
    # soul.yaml → b.yaml ⇄ c.yaml: soul.yaml is not in the ring, but following it never ends
    files = {"b.yaml": _ring_member("b", "c.yaml"), "c.yaml": _ring_member("c", "b.yaml")}
    found = check(_ring_member("d", "b.yaml"), **PERSONAS, **files)
    assert len(found) == 1
    assert found[0].startswith("soul.yaml:7:20: error: dialogue blueprints point at each other: "
                               "soul.yaml → b.yaml → c.yaml → b.yaml")


def test_a_dialogue_blueprint_naming_itself_as_an_agent_is_an_error(check: Check) -> None:
    found = check(_ring_member("d", "./soul.yaml"), **PERSONAS)
    assert found == ["soul.yaml:7:20: error: an agent's blueprint cannot be the dialogue's own blueprint "
                     "(agents without `blueprint:` already run this blueprint's steps)"]

"""Memory that learns from use: after a committed turn, the recalled memories the soul used are
fed back as useful and the rest as not (`memory: {learn: true}`), and the learner moves."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import soul
from soul.providers.base import Completion, Provider, Request, Usage
from soul.providers.scripted import ScriptedProvider
from soul.runtime.bridges.learning import (
    LearnConfig,
    RecallUse,
    Shown,
    content_words,
    explicit_used,
    judge,
    learn_config,
    lexically_used,
)

FACTS = [
    "Ada's cat Miso is a grey tabby who sleeps on the piano.",
    "Ada works as a lighthouse keeper on the northern coast.",
    "Ada's favourite dish is mushroom risotto with parmesan.",
    "Ada plays the cello in an amateur orchestra on Thursdays.",
    "Ada is learning Portuguese before a trip to Lisbon in spring.",
]

BLUEPRINT = """\
soul: learner
version: 1
memory:
  field: field
  {learn}
steps:
  recall: {{uses: memory.recall, with: {{k: 3, mode: resonate{ask}}}}}
  reply: {{uses: external_dialogue, after: [recall]}}
"""

# Each turn asks about one fact; the reply uses that fact's words (what the soul "used").
TURNS = [
    ("Tell me about my cat.", "Miso the grey tabby is surely asleep on the piano."),
    ("What do I do for a living?", "You keep the lighthouse on the northern coast."),
    ("What should I cook tonight?", "Mushroom risotto with parmesan, your favourite."),
    ("What is on this Thursday?", "Cello with the orchestra, as every Thursday."),
    ("Any plans for the spring?", "Lisbon! Your Portuguese will be ready."),
    ("Remind me about my cat.", "Miso, the tabby on the piano."),
]


def _soul(write_blueprint: Any, home: Path, replies: list[str], *, learn: str = "learn: true", ask: str = "",
          provider: Provider | None = None) -> Any:
    path = write_blueprint(BLUEPRINT.format(learn=learn, ask=ask))
    s = soul.load(path, provider=provider or ScriptedProvider(replies), home=home)
    s.memory_field().remember_many([{"text": t, "kind": "entity"} for t in FACTS])
    return s


def _converse(s: Any) -> None:
    session = s.session(user="ada")
    for question, _ in TURNS:
        session.turn_sync(question)


def _replies() -> list[str]:
    return [f"<external_dialogue>{answer}</external_dialogue>" for _, answer in TURNS]


# -- the judgement ----------------------------------------------------------------------------


def test_content_words_drop_stop_words_and_plural_s() -> None:
    assert content_words("The cats of Ada are sleeping on 3 pianos") == {"cat", "ada", "sleeping", "3", "piano"}


def test_a_memory_is_used_when_the_soul_repeats_what_the_question_did_not_say() -> None:
    query = content_words("Tell me about my cat")
    written = content_words("Miso the grey tabby is asleep")
    assert lexically_used("Ada's cat Miso is a grey tabby", written, query, 0.3)
    assert not lexically_used("Ada works as a lighthouse keeper", written, query, 0.3)
    # a memory that only echoes the question proves nothing, whatever the reply says
    assert not lexically_used("my cat", content_words("my cat"), query, 0.3)


def test_explicit_used_reads_ids_and_unique_prefixes_and_ignores_the_rest() -> None:
    ids = ["a1b2c3d4e5f60718", "a1b2c3ffffffffff", "0011223344556677"]
    raws = ["<external_dialogue>hi</external_dialogue>\n<used>0011223344556677, a1b2c3d4, a1b2c3, zzz</used>"]
    assert explicit_used(raws, ids) == {"0011223344556677", "a1b2c3d4e5f60718"}  # a1b2c3 names two: ignored
    assert explicit_used(["<used></used>"], ids) == frozenset()
    assert explicit_used(["no section"], ids) is None


def test_an_explicit_used_section_decides_alone() -> None:
    shown = (Shown("m1", "Miso the tabby"), Shown("m2", "lighthouse keeper"))
    use = RecallUse(shown, "Miso the tabby!", "cat?", frozenset({"m2"}), False, LearnConfig())
    assert judge(use) == (["m2"], ["m1"])


def test_semantic_similarity_counts_where_the_soul_recalls_by_meaning() -> None:
    shown = (Shown("m1", "alpha"), Shown("m2", "beta"))
    use = RecallUse(shown, "gamma", "", None, True, LearnConfig(similarity=0.5))
    assert judge(use, lambda written, texts: [0.9, 0.1]) == (["m1"], ["m2"])
    keyword_only = RecallUse(shown, "gamma", "", None, False, LearnConfig(similarity=0.5))
    assert judge(keyword_only, lambda written, texts: [0.9, 0.9]) == ([], ["m1", "m2"])


def test_learn_config_reads_the_memory_block() -> None:
    assert learn_config({"learn": True}) == LearnConfig()
    assert learn_config({"learn": {"overlap": 0.5, "similarity": None}}) == LearnConfig(0.5, None)
    assert learn_config({"learn": False}) is None
    assert learn_config({"learn": {"enabled": False}}) is None
    assert learn_config({"learn": True, "enabled": False}) is None
    assert learn_config(None) is None


def test_judging_is_linear_in_hostile_text() -> None:
    hostile = "<used>" * 200_000 + "word " * 200_000
    started = time.perf_counter()
    assert explicit_used([hostile], ["m1"]) is None
    content_words(hostile)
    assert time.perf_counter() - started < 2.0


# -- in a conversation ----------------------------------------------------------------------

pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")


def _global_evidence(field: Any) -> float:
    weights = field.learner.weights()
    return sum(sum(p["evidence"]) for p in weights["parameters"].values())


def test_the_learners_weights_move_in_a_conversation_with_learn_and_stay_put_without(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    s = _soul(write_blueprint, soul_home, _replies())
    _converse(s)
    field = s.memory_field()
    assert field.learner.rounds > 0 and _global_evidence(field) > 0
    saved = json.loads((field.path / "learner.json").read_text())  # saved after the turns, not at close
    assert saved["rounds"] == field.learner.rounds
    cat = next(m for m in field.store.state.rows if "Miso" in field.get(m).content)
    job = next(m for m in field.store.state.rows if "lighthouse" in field.get(m).content)
    assert field.get(cat).confidence.mu > field.get(job).confidence.mu  # used twice vs once...
    s.close()

    (Path("field")).rename("field-learned")
    s = _soul(write_blueprint, soul_home, _replies(), learn="")
    _converse(s)
    field = s.memory_field()
    assert field.learner.rounds == 0 and _global_evidence(field) == 0
    assert not (field.path / "learner.json").exists()
    s.close()


class FailsAfterRecall(Provider):
    name = "fails"

    async def complete(self, request: Request) -> Completion:
        raise RuntimeError("model down")


def test_a_failed_turn_feeds_nothing_back(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    s = _soul(write_blueprint, soul_home, [], provider=FailsAfterRecall())
    with pytest.raises(RuntimeError):
        s.session(user="ada").turn_sync("Tell me about my cat Miso.")
    field = s.memory_field()
    assert field.learner.rounds == 0
    assert all(field.get(m).confidence.n == 0 for m in field.store.state.rows)
    s.close()


class Answers(Provider):
    """Answers every call with `reply`, set once the test knows the memory ids."""

    name = "answers"

    def __init__(self) -> None:
        self.reply = ""
        self.requests: list[Request] = []

    async def complete(self, request: Request) -> Completion:
        self.requests.append(request)
        return Completion(self.reply, Usage())


def test_ask_used_shows_ids_and_the_models_used_section_decides(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    provider = Answers()
    s = _soul(write_blueprint, soul_home, [], ask=", ask_used: true", provider=provider)
    field = s.memory_field()
    chosen = next(h.id for h in _hits_naming(field, "lighthouse"))
    # the model says it used the lighthouse memory, though its words are about the cat
    provider.reply = f"<external_dialogue>Miso the grey tabby.</external_dialogue>\n<used>{chosen}</used>"
    result = s.session(user="ada").turn_sync("Tell me about my cat and my job.")
    shown = [h["id"] for h in result.steps["recall"]["hits"]]
    assert chosen in shown
    system = provider.requests[0].messages[0].content
    assert f"[{chosen}]" in system and "used" in system
    assert field.get(chosen).confidence.n == 1 and field.get(chosen).confidence.mu > 0.7
    others = [m for m in shown if m != chosen]
    assert others and all(field.get(m).confidence.mu < 0.7 for m in others)
    assert result.reply == "Miso the grey tabby."  # the section is no part of the reply
    s.close()


def _hits_naming(field: Any, word: str) -> list[Any]:
    return [h for h in field.recall(word, 5, mode="keyword") if word in h.text]


def test_memory_stats_show_the_learners_weights(write_blueprint, soul_home: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from soul.cli.main import main

    s = _soul(write_blueprint, soul_home, _replies()[:2])
    session = s.session(user="ada")
    for question, _ in TURNS[:2]:
        session.turn_sync(question)
    s.close()
    capsys.readouterr()
    assert main(["memory", "stats", "--field", "field"]) == 0
    learner = json.loads(capsys.readouterr().out)["learner"]
    assert learner["rounds"] > 0
    assert set(learner["parameters"]) >= {"spread_strength", "semantic_weight"}
    assert any(sum(p["evidence"]) > 0 for p in learner["parameters"].values())


def test_validate_warns_when_learn_has_nothing_to_learn_from(check) -> None:  # type: ignore[no-untyped-def]
    found = check("soul: x\nversion: 1\nmemory: {learn: {overlap: 0.5}}\nsteps:\n  reply: {uses: external_dialogue}\n")
    assert any("memory.learn is on, but no turn step is a memory.recall" in d for d in found)
    assert not any("error" in d for d in found)


def test_learning_works_on_a_recorded_and_a_replayed_tape(write_blueprint, soul_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from soul.providers.replay import Cassette, ReplayProvider, recording

    tape = tmp_path / "tape.json"
    path = write_blueprint(BLUEPRINT.format(learn="learn: true", ask=""))
    s = soul.load(path, provider=ScriptedProvider(_replies()[:1]), home=soul_home, wrap=recording(tape))
    s.memory_field().remember_many([{"text": t, "kind": "entity"} for t in FACTS])
    s.session(user="ada").turn_sync(TURNS[0][0])
    field = s.memory_field()
    recorded = field.learner.rounds
    assert recorded > 0  # through the recording tape, the feedback reached the real field
    cat = next(m for m in field.store.state.rows if "Miso" in field.get(m).content)
    seen = field.get(cat).confidence.n
    s.close()
    s = soul.load(path, provider=ReplayProvider(Cassette.load(tape)), home=soul_home)
    s.session(user="ada").turn_sync(TURNS[0][0])  # recalls served from the tape: ids of the same field
    field = s.memory_field()
    assert field.get(cat).confidence.n == seen + 1  # judged and fed back again...
    assert field.learner.rounds == recorded  # ...but no live draw surfaced it: the learner stays
    s.close()

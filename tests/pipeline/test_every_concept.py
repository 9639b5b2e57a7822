"""One blueprint with every concept of docs/blueprints.md validates and compiles."""

from __future__ import annotations

from pathlib import Path

from soul.compiler.plan import compile_blueprint
from soul.compiler.validation import validate

EVERYTHING = Path(__file__).parent / "data" / "everything" / "ex.yaml"


def test_every_concept_of_the_language_validates() -> None:
    checked = validate(EVERYTHING)
    assert [d.message for d in checked.errors] == []
    assert [d.message for d in checked.warnings] == [
        "model slot 'fast' sends its requests to http://127.0.0.1:8080/v1, a host this blueprint chose: your key "
        "goes there only if you allow 127.0.0.1:8080; its api_key_env LOCAL_API_KEY is refused there until then",
        "step 'feel' is dead: nothing reads its outputs and it changes nothing",
    ]


def test_every_concept_compiles_into_scopes_calls_and_triggers() -> None:
    plan = compile_blueprint(EVERYTHING)
    assert set(plan.subprocesses) == {"learns_about_user"} and set(plan.processes) == {"subconscious"}
    assert {u.model for u in plan.turn.units if u.is_call} == {"fast", "deep"}
    assert len(plan.turn.layers) == 5
    assert set(plan.blueprint.triggers) == {"speak_up", "nudge", "daily"}
    assert plan.blueprint.dialogue is not None and plan.blueprint.dialogue["observer"]["agent"] == "fixy"

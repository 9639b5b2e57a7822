"""The clean-reply fast path of extract_sections gives exactly what the tolerant scanner gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from soul.sections.xmlparse import _fast, _scan_sections, extract_sections

TAGS = ("internal_monologue", "external_dialogue", "user_model_check", "user_model_update")

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
attribute = st.tuples(st.sampled_from(["verb", "Verb", "x", "data-y", "a.b"]), st.text(alphabet='abc "<>&\'=', max_size=8))
section = st.tuples(st.sampled_from((*TAGS, "other", "External_Dialogue")), st.lists(attribute, max_size=2), text, st.sampled_from(["", " ", "\n", "  \n "]))


def render(parts: list[tuple[str, list[tuple[str, str]], str, str]]) -> str:
    out = []
    for tag, attributes, body, gap in parts:
        attrs = "".join(f' {name}="{value}"' for name, value in attributes)
        out.append(f"{gap}<{tag}{attrs}>{body}</{tag}>")
    return "".join(out)


@settings(max_examples=600, deadline=None)
@given(st.lists(section, max_size=5), st.sampled_from(["", " ", "\n"]))
def test_fast_path_agrees_with_the_scanner(parts: list[tuple[str, list[tuple[str, str]], str, str]], tail: str) -> None:
    raw = render(parts) + tail
    assert extract_sections(raw, TAGS) == _scan_sections(raw, TAGS)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fast_path_agrees_on_any_text(raw: str) -> None:
    fast = _fast(raw, TAGS)
    if fast is not None:
        assert fast == _scan_sections(raw, TAGS)


def test_a_clean_reply_takes_the_fast_path() -> None:
    raw = '<internal_monologue verb="mused">Hm.</internal_monologue>\n<external_dialogue verb="said">Hi.</external_dialogue>\n'
    assert _fast(raw, TAGS) is not None
    assert _fast(raw.replace("Hi.", "Hi &amp; bye"), TAGS) is None  # entities: the scanner decodes them

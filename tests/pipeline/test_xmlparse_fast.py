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


ONE = ("mental_query",)
one_section = st.tuples(st.sampled_from(("mental_query", "Mental_Query", "other")), st.lists(attribute, max_size=2), text, st.sampled_from(["", " ", "\n", "  \n "]))


@settings(max_examples=600, deadline=None)
@given(st.lists(one_section, max_size=3), st.sampled_from(["", " ", "\n", "x"]))
def test_the_one_section_fast_path_agrees_with_the_scanner(parts: list[tuple[str, list[tuple[str, str]], str, str]], tail: str) -> None:
    raw = render(parts) + tail
    assert extract_sections(raw, ONE) == _scan_sections(raw, ONE)
    fast = _fast(raw, ONE)
    if fast is not None:
        assert fast == _scan_sections(raw, ONE)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_the_one_section_fast_path_agrees_on_any_text(raw: str) -> None:
    for candidate in (raw, f"<mental_query>{raw}</mental_query>", f" <mental_query verb=\"x\">{raw}</mental_query>\n"):
        fast = _fast(candidate, ONE)
        if fast is not None:
            assert fast == _scan_sections(candidate, ONE)


def test_a_clean_one_section_reply_takes_the_fast_path() -> None:
    assert _fast("\n<mental_query>true</mental_query> ", ONE) is not None
    assert _fast("<mental_query>true</mental_query><mental_query>no</mental_query>", ONE) is None  # a duplicate
    assert _fast("x<mental_query>true</mental_query>", ONE) is None  # text outside


def _readable_kinds() -> list[type]:
    from soul.kinds import default_registry
    from soul.sections import CleanReader

    return [kind for kind in default_registry() if CleanReader.fits(kind)]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_the_clean_reader_agrees_with_parse_step(data: st.DataObject) -> None:
    """A call of one one-section step reads its clean reply straight into the step's outputs:
    exactly what parse_step gives from the scanner's result, or nothing (the usual read then)."""
    from soul.sections import CleanReader, parse_step

    kinds = _readable_kinds()
    kind = data.draw(st.sampled_from(kinds))
    tag = kind.sections[0].tag
    body = data.draw(st.one_of(text, st.sampled_from(["true", " **No.** ", "maybe", "- a\n- b", "k: v\nx: y", ""])))
    raw = data.draw(st.sampled_from([f"<{tag}>{body}</{tag}>", f" \n<{tag} verb=\"x\">{body}</{tag}>\n", f"<{tag}>{body}", body,
                                     f"<{tag}>{body}</{tag}><{tag}>again</{tag}>", f"<{tag.upper()}>{body}</{tag.upper()}>"]))
    read = CleanReader(kind, {}).read(raw)
    if read is not None:
        assert read == parse_step(kind, {}, _scan_sections(raw, (tag,)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_clean_readers_ends_check_reads_as_its_pattern_does(data: st.DataObject) -> None:
    """A reply that is `<tag>text</tag>` and nothing else is told by its two ends, without the
    pattern; the same reply with a space before it goes through the pattern, which reads it
    alike: the same outputs, or nothing in both."""
    from soul.sections import CleanReader

    kind = data.draw(st.sampled_from(_readable_kinds()))
    tag = kind.sections[0].tag
    body = data.draw(st.one_of(text, st.sampled_from(["true", " **No.** ", "a < b", "x &amp; y", f"</{tag}>", "- a\n- b", ""])))
    reader = CleanReader(kind, {})
    raw = f"<{tag}>{body}</{tag}>"
    assert reader.read(raw) == reader.read(" " + raw)


def test_a_clean_boolean_reply_is_read_by_the_clean_reader() -> None:
    from soul.kinds import default_registry
    from soul.sections import CleanReader

    kind = default_registry().get("mental_query")
    assert kind is not None and kind in _readable_kinds()
    reader = CleanReader(kind, {})
    assert reader.read("<mental_query> True. </mental_query>\n") is not None
    assert reader.read("<mental_query>perhaps</mental_query>") is None  # unreadable: the usual read flags it
    assert reader.read("<mental_query>true") is None  # unclosed: the scanner repairs it


def test_a_booleans_two_usual_replies_are_read_whole_as_parse_step_reads_them() -> None:
    """`<tag>true</tag>` and `<tag>false</tag>`, the whole reply, are one look-up each: the
    same outputs as the scanner and parse_step give, for every boolean kind the reader takes."""
    from soul.sections import CleanReader, parse_step

    booleans = [kind for kind in _readable_kinds() if kind.sections[0].type == "bool"]
    assert booleans
    for kind in booleans:
        tag = kind.sections[0].tag
        reader = CleanReader(kind, {})
        for answer, value in (("true", True), ("false", False)):
            raw = f"<{tag}>{answer}</{tag}>"
            read = reader.read(raw)
            assert read is not None and read.outputs[kind.sections[0].output] is value
            assert read == parse_step(kind, {}, _scan_sections(raw, (tag,)))

"""A key the model writes never reaches a streamed `Token` (issue 12.7): `StreamRedactor` gives
`redact` of the whole text however the stream is cut, holding back only a tail that could still
become a secret, and `soul run` prints the reply redacted, streamed or not."""

from __future__ import annotations

import asyncio
import io
import time
from itertools import pairwise
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from souls import claudius_reply

import soul
from soul.cli.main import main
from soul.cli.printer import Printer
from soul.providers.scripted import CHUNK_CHARS, ScriptedProvider
from soul.runtime.events import Reply, Token
from soul.sections import SectionStream, Text
from soul.store import REDACTED, StreamRedactor, redact

# Not key-shaped: found only because the variable names them. Split across 2 and 3 chunks.
KEYS = {2: "fake-k3y-90ab", 3: "fake-anthropic-7d1c"}


def streamed(text: str, cuts: list[int], known: list[str]) -> tuple[list[str], str]:
    """The pieces a redactor gives for `text` cut at `cuts`, and its flush."""
    redactor = StreamRedactor(known)
    bounds = [0, *sorted(cuts), len(text)]
    return [redactor.feed(text[a:b]) for a, b in pairwise(bounds)], redactor.flush()


# Small alphabets so secrets recur, overlap and straddle cuts; key-shape openers mixed in.
secret_lists = st.lists(st.text("ab-k", min_size=1, max_size=6), max_size=3).map(
    lambda xs: sorted(set(xs), key=len, reverse=True)
)
fragments = st.one_of(st.text("ab-k_sAxo[] .é", max_size=8), st.sampled_from(["sk-", "sk-ant-", "AKIA", "xoxb-", "Z" * 8, "q" * 9]))


@settings(max_examples=400, deadline=None)
@given(known=secret_lists, parts=st.lists(fragments, max_size=14), data=st.data())
def test_any_split_of_any_text_streams_to_what_redact_gives(known: list[str], parts: list[str], data: st.DataObject) -> None:
    secrets_in = data.draw(st.lists(st.sampled_from(known), max_size=4)) if known else []
    text = "".join(parts + secrets_in)
    text = "".join(data.draw(st.permutations(list(text)))) if data.draw(st.booleans()) else text
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=len(text) + 1))
    pieces, tail = streamed(text, cuts, known)
    assert "".join(pieces) + tail == redact(text, known)


def test_overlapping_secrets_are_blanked_as_one_run_leaving_no_part_of_either() -> None:
    known = ["0123456789abcdef", "cdefXYZW98765"]
    assert redact("id 0123456789abcdefXYZW98765 end", known) == f"id {REDACTED} end"
    assert redact("0123456789abcdef0123456789abcdef", known) == REDACTED * 2  # adjacent: two


def test_without_secrets_chunks_pass_at_once_and_unchanged() -> None:
    redactor = StreamRedactor([])
    chunks = ["Hello", ", Ada.", " Compilers", " then — a noble", " way to suffer.\n"]
    assert [redactor.feed(c) for c in chunks] == chunks
    assert redactor.flush() == ""


def test_only_a_tail_that_could_still_become_a_secret_is_held_back() -> None:
    key = KEYS[3]
    redactor = StreamRedactor([key])
    assert redactor.feed("say fake-an") == "say "  # could be the key's start
    assert redactor.feed("d more") == "fake-and more"  # it was not
    assert redactor.feed(" " + key[:-1]) == " "
    assert len(key[:-1]) == len(key) - 1  # the most ever held for this key
    assert redactor.feed(key[-1] + "!") == REDACTED + "!"
    assert redactor.feed(" fake") == " "
    assert redactor.flush() == "fake"  # the end of the stream gives back what was held


def test_a_key_shaped_string_split_across_chunks_is_redacted() -> None:
    key = "sk-ant-" + "Q" * 30
    pieces, tail = streamed(f"key {key}, done", [6, 12, 25], [])
    assert "".join(pieces) + tail == f"key {REDACTED}, done"
    assert not any("sk-ant-Q" in p for p in pieces)


@pytest.mark.parametrize("text", [
    "sk-ant-" + "A" * 4_000, "x" * 20_000 + "sk-" + "b" * 30, "sk-" * 10_000, "AKIA" + "Z" * 16,
    "xoxb-" + "1" * 10_000, "-" * 40_000, "s " * 10_000, "fake-k3y-90a" * 3_000,
])
def test_hostile_streams_redact_in_linear_time_one_character_at_a_time(text: str) -> None:
    started = time.perf_counter()
    pieces, tail = streamed(text, list(range(1, len(text))), [KEYS[2], KEYS[3]])
    assert time.perf_counter() - started < 2.0
    assert "".join(pieces) + tail == redact(text, [KEYS[2], KEYS[3]])


def reply_splitting(key: str, chunks: int) -> tuple[str, str]:
    """A claudius reply whose dialogue quotes `key` across exactly `chunks` scripted chunks, and
    that dialogue."""
    for pad in range(CHUNK_CHARS):
        text = f"Your key{'.' * pad} {key} is safe."
        raw = claudius_reply(text)
        start = raw.index(key)
        if (start + len(key) - 1) // CHUNK_CHARS - start // CHUNK_CHARS + 1 == chunks:
            parser = SectionStream(["external_dialogue"], {"external_dialogue"})
            texts = [e.text for i in range(0, len(raw), CHUNK_CHARS) for e in parser.feed(raw[i : i + CHUNK_CHARS]) if isinstance(e, Text)]
            assert all(key not in t for t in texts) and key in "".join(texts)  # really split
            return raw, text
    raise AssertionError(f"no padding splits {key!r} across {chunks} chunks")


@pytest.mark.parametrize("chunks", sorted(KEYS))
def test_a_key_split_across_chunks_reaches_no_token(
    chunks: int, monkeypatch: pytest.MonkeyPatch, soul_home: Path
) -> None:
    key = KEYS[chunks]
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    raw, text = reply_splitting(key, chunks)
    s = soul.load("claudius", provider=ScriptedProvider([raw]), home=soul_home)
    session = s.session(user="ada")

    async def go() -> list[object]:
        return [event async for event in session.stream("hi")]

    events = asyncio.run(go())
    tokens = [e.text for e in events if isinstance(e, Token)]
    assert len(tokens) > 2 and not any(key in t for t in tokens)
    assert "".join(tokens).strip() == redact(text) == text.replace(key, REDACTED)
    reply = next(e for e in events if isinstance(e, Reply))
    assert redact(reply.text) == redact(text)  # the reply itself is not changed by streaming


def test_soul_run_prints_a_split_key_redacted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS[3])
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump([reply_splitting(KEYS[3], 3)[0]]))
    assert main(["run", "claudius", "--script", str(script), "-m", "hi"]) == 0
    out = capsys.readouterr().out
    assert KEYS[3] not in out and "fake-" not in out
    assert f"{REDACTED} is safe." in out


def test_soul_run_prints_a_reply_that_was_not_streamed_redacted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS[2])
    script = tmp_path / "replies.yaml"
    plain = f"plain words about {KEYS[2]}"  # no sections: the fallback reply comes whole
    script.write_text(yaml.safe_dump([plain, plain]))
    assert main(["run", "claudius", "--script", str(script), "-m", "hi"]) == 0
    out = capsys.readouterr().out
    assert KEYS[2] not in out and f"plain words about {REDACTED}" in out


def test_the_printer_redacts_a_whole_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS[3])
    console = Console(file=io.StringIO(), width=200)
    Printer(console, "Claudius", thoughts=False)(Reply(f"it is {KEYS[3]}"))
    assert console.file.getvalue().strip() == f"Claudius> it is {REDACTED}"  # type: ignore[attr-defined]

"""Keys of the common shapes typed in a message are stored redacted (issue 24.12): GitHub,
Google, Stripe, Slack, Anthropic and OpenAI project keys, JWTs and PEM private-key blocks, like
the environment's own keys; the streamed redaction agrees with the whole-text one, and both
stay linear on hostile text."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.records import Commit, MessageRecord
from soul.store import REDACTED, SessionStore, StreamRedactor, redact
from soul.store.key_shapes import KEY_SHAPES, may_hold_key

B62 = "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw\n7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvredZiKRkgwlL9xNAwxXFg0x/XFw005UWVRIkdgcKWTjpBP2dPwVZ4WWC+9aGVd+Gyn1o0CLelf4rEjGoXbAAEgAqeGUxrcIlbjXfbcmwIDAQAB"
KEYS = {
    "github classic": "ghp_" + (B62 + "012345678")[:36],
    "github oauth": "gho_" + (B62 + "012345678")[:36],
    "github user-to-server": "ghu_" + (B62 + "012345678")[:36],
    "github server-to-server": "ghs_" + (B62 + "012345678")[:36],
    "github refresh": "ghr_" + (B62 + "012345678")[:36],
    "github fine-grained": "github_pat_11ABCDEFG0123456789_" + (B62 * 3)[:59],
    "google": "AIzaSyD" + (B62 * 2)[:32],
    "stripe live": "sk_live_51H" + (B62)[:24],
    "stripe restricted": "rk_live_51H" + (B62)[:24],
    "stripe test": "sk_test_51H" + (B62)[:24],
    "slack bot": "xoxb-123456789012-1234567890123-" + B62[:24],
    "slack user": "xoxp-123456789012-1234567890123-" + B62[:24],
    "slack session": "xoxs-123456789012-" + B62[:20],
    "slack refresh": "xoxr-123456789012-" + B62[:20],
    "slack app": "xapp-1-A0123456789-1234567890123-" + B62,
    "anthropic": "sk-ant-api03-" + (B62 * 4)[:93] + "-AA",
    "openai project": "sk-proj-" + (B62 * 6)[:156],
    "openai service account": "sk-svcacct-" + (B62 * 6)[:156],
    "jwt": JWT,
    "pem rsa": f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
    "pem pkcs8": f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----",
    "pem openssh": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----",
    "pem encrypted": f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{PEM_BODY}\n-----END ENCRYPTED PRIVATE KEY-----",
    "pem ec": f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n-----END EC PRIVATE KEY-----",
}


@pytest.fixture
def store() -> Iterator[SessionStore]:
    with SessionStore.open() as opened:
        yield opened


@pytest.mark.parametrize("name", sorted(KEYS))
def test_a_key_typed_in_a_message_is_redacted(name: str) -> None:
    key = KEYS[name]
    assert redact(f"my key is {key}, keep it") == f"my key is {REDACTED}, keep it"
    assert redact(f"key={key}\nthanks") == f"key={REDACTED}\nthanks"


@pytest.mark.parametrize("name", sorted(KEYS))
def test_a_key_typed_in_a_message_is_stored_redacted(name: str, store: SessionStore) -> None:
    key = KEYS[name]
    info = store.create_session("claudius", "ann")
    store.commit(Commit(info.id, 0, messages=(MessageRecord("external", "user", f"here: {key} ok"),)))
    [(_, message, _)] = store.messages(info.id)
    assert message.content == f"here: {REDACTED} ok"


def test_a_pem_block_without_its_end_line_is_redacted_to_the_end() -> None:
    cut = f"here it is -----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY[:200]}"
    assert redact(cut) == f"here it is {REDACTED}"


@pytest.mark.parametrize("text", [
    "ghost_town and gh_pages", "ghp_short", "sk_lively_debate", "sk_live_short", "eyJ alone",
    "eyJhbGciOiJIUzI1NiJ9 without a payload", "AIza short", "xoxq-1234567890abc", "xapp-short",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "-----BEGIN PUBLIC KEY-----",
    "github_pat_short", "a well-known --- separator",
])
def test_text_that_only_looks_like_a_key_is_kept(text: str) -> None:
    assert redact(text) == text


def streamed(text: str, cuts: list[int]) -> str:
    redactor = StreamRedactor([])
    bounds = [0, *sorted(cuts), len(text)]
    return "".join(redactor.feed(text[a:b]) for a, b in pairwise(bounds)) + redactor.flush()


@pytest.mark.parametrize("name", sorted(KEYS))
def test_a_key_streamed_one_character_at_a_time_is_redacted(name: str) -> None:
    text = f"so {KEYS[name]} and on"
    assert streamed(text, list(range(1, len(text)))) == redact(text) == f"so {REDACTED} and on"


# The openers and middles of the new shapes, so the property test builds keys, near-keys and
# PEM blocks cut anywhere.
fragments = st.one_of(
    st.text("aB3-_. \n", max_size=8),
    st.sampled_from([
        "ghp_", "github_pat_", "AIza", "sk_live_", "rk_test_", "sk-", "xoxs-", "xapp-", "eyJ", ".eyJ",
        "-----BEGIN ", "RSA ", "PRIVATE KEY", "-----", "-----END ", "Z" * 12, "q" * 24, "A" * 36,
    ]),
)


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(fragments, max_size=16), data=st.data())
def test_any_split_of_text_with_the_new_shapes_streams_to_what_redact_gives(parts: list[str], data: st.DataObject) -> None:
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=len(text) + 1))
    assert streamed(text, cuts) == redact(text, [])
    assert KEY_SHAPES.search(text) is None or may_hold_key(text)  # the fast path misses no key


HOSTILE = [
    "eyJ-" * 50_000, "eyJ" + "a" * 200_000, ("eyJ" + "a" * 999 + ".") * 200, "eyJaaaaaaaa.eyJ" + "b" * 200_000,
    "-----BEGIN " * 20_000, "-----BEGIN PRIVATE KEY-----" * 8_000, "-----BEGIN " + "A " * 100_000,
    "-----END PRIVATE KEY-----" * 8_000, "-" * 200_000, "ghp_" * 50_000, "github_pat_" * 20_000,
    "sk_live_" * 25_000, "xoxb-" * 40_000, "AIza" * 50_000, "gh" * 100_000,
    "-----BEGIN RSA PRIVATE KEY-----" + "-----END RSA " * 15_000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: f"{t[:16]!r}x{len(t)}")
def test_hostile_text_redacts_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    whole = redact(text, [])
    assert time.perf_counter() - started < 1.0
    started = time.perf_counter()
    cuts = list(range(0, len(text), 7))  # a stream of small chunks
    assert streamed(text, cuts) == whole
    assert time.perf_counter() - started < 5.0


FILLER = "Ada builds compilers — she thought it through: gh_ sk_ xo eyj {\"framework_ms\": 0.25} " * 4


@pytest.mark.parametrize("opener", ["sk-", "k_live_", "k_test_", "AKIA", "AIza", "xox", "xapp-", "eyJ", "-----BEGIN ",
                                    "github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"])
def test_every_opener_is_found_in_a_short_and_a_long_text(opener: str) -> None:
    # Past 256 characters two openers are searched as patterns (issue 26): one pass each.
    assert len(FILLER) > 256 and not may_hold_key(FILLER)
    assert may_hold_key(f"a {opener} b")
    for text in (opener + FILLER, FILLER + opener + FILLER, FILLER + opener):
        assert may_hold_key(text)


@settings(max_examples=300)
@given(parts=st.lists(fragments, max_size=16))
def test_the_long_and_the_short_opener_tests_agree(parts: list[str]) -> None:
    text = "".join(parts)
    assert may_hold_key(FILLER + text) == may_hold_key(text) == may_hold_key(text + FILLER)


def openers_in(text: str) -> bool:
    """The openers as plain substrings: what `may_hold_key` must answer, however it searches."""
    return any(o in text for o in ("sk-", "k_live_", "k_test_", "AKIA", "AIza", "xox", "xapp-", "eyJ", "-----BEGIN ",
                                   "github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"))


@settings(max_examples=500)
@given(st.text(alphabet="skxoapAKIzeyJghpusrtib_-BEGIN lvw", min_size=257, max_size=700))
def test_a_long_text_of_near_misses_holds_an_opener_exactly_when_one_is_in_it(text: str) -> None:
    assert may_hold_key(text) == openers_in(text)

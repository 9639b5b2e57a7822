"""Re-embedding replays the session-context chain (field/replay.py): the vectors are the ones
remembering with the new model stores, resumed or not."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tiny_onnx import write_tiny_model
from word_embedder import WordEmbedder

from soul.engines.resonance import Field, load_embedder, reembed_field

pytest.importorskip("onnxruntime")

A = [f"Caroline said the {w} by the river was lovely on day {i}" for i, w in
     enumerate(("walk", "picnic", "boat", "swim", "sunset", "storm", "bridge"))]
B = [f"Melanie painted a {w} for the gallery in week {i}" for i, w in
     enumerate(("lake", "forest", "horse", "garden", "harbour"))]


class Failing:
    """Wraps an embedder: raises once it has been called `fail_after` times."""

    def __init__(self, inner: object, fail_after: int) -> None:
        self.inner, self.fail_after, self.calls = inner, fail_after, 0
        self.dim = inner.dim  # type: ignore[attr-defined]
        self.identity = inner.identity  # type: ignore[attr-defined]

    def embed(self, texts: list[str]) -> object:
        if self.calls >= self.fail_after:
            raise RuntimeError("the machine went away")
        self.calls += 1
        return self.inner.embed(texts)  # type: ignore[attr-defined]


class Flaky(WordEmbedder):
    """A WordEmbedder that fails (a zero vector, not ok) on the texts in `down`."""

    def __init__(self) -> None:
        self.down: set[str] = set()

    def embed(self, texts: list[str]) -> SimpleNamespace:
        out = super().embed(texts)
        for i, text in enumerate(texts):
            if text in self.down:
                out.vectors[i] = 0.0
                out.ok[i] = False
        return out


def _remember(field: Field) -> None:
    """Two interleaved sessions, in batches and single calls."""
    field.remember_many(A[:3], session="a")
    field.remember(B[0], session="b")
    field.remember(A[3], session="a")
    field.remember_many(B[1:4], session="b")
    field.remember_many(A[4:], session="a")
    field.remember(B[4], session="b")


def _vectors(path: Path, embedder: object, **options: object) -> dict[str, np.ndarray]:
    with Field.open(path, embedder, **options) as field:
        st = field.store.state
        return {st.text[r]: st.vectors[r].copy() for r in range(st.n_rows) if st.is_alive(r)}


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert got.keys() == want.keys()
    for text, vec in want.items():
        np.testing.assert_allclose(got[text], vec, atol=1e-5, err_msg=text)


@pytest.fixture
def tiny(tmp_path: Path) -> object:
    return load_embedder(str(write_tiny_model(tmp_path / "tiny", seed=5)))


@pytest.fixture
def fresh(tmp_path: Path, tiny: object) -> dict[str, np.ndarray]:
    """The vectors a field remembered with the tiny model from the start stores."""
    with Field.open(tmp_path / "fresh", tiny, dedup_threshold=None) as field:
        _remember(field)
    return _vectors(tmp_path / "fresh", tiny)


def test_reembed_gives_the_vectors_remembering_with_the_new_model_gives(
        tmp_path: Path, tiny: object, fresh: dict[str, np.ndarray]) -> None:
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        _remember(field)
    report = reembed_field(tmp_path / "f", tiny, batch=3)
    assert report.switched and report.memories == len(A) + len(B)
    got = _vectors(tmp_path / "f", tiny)
    _assert_same(got, fresh)
    plain = tiny.embed([A[1]]).vectors[0]  # type: ignore[attr-defined]
    assert not np.allclose(got[A[1]], plain / np.linalg.norm(plain), atol=1e-3)  # mixed


def test_a_resumed_reembed_gives_what_one_run_gives(
        tmp_path: Path, tiny: object, fresh: dict[str, np.ndarray]) -> None:
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        _remember(field)
    for fail_after in (1, 2):  # stops mid-chain twice: resumes from each staged prefix
        with pytest.raises(RuntimeError, match="went away"):
            reembed_field(tmp_path / "f", Failing(tiny, fail_after), batch=2)
        assert (tmp_path / "f" / "reembed" / "progress.json").is_file()
    report = reembed_field(tmp_path / "f", tiny, batch=2)
    assert report.switched and report.resumed_from == 6
    _assert_same(_vectors(tmp_path / "f", tiny), fresh)


def test_without_context_reembed_stores_each_text_alone(tmp_path: Path, tiny: object) -> None:
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        _remember(field)
    reembed_field(tmp_path / "f", tiny, batch=4, context_weight=None)
    got = _vectors(tmp_path / "f", tiny)
    own = tiny.embed(list(got)).vectors  # type: ignore[attr-defined]
    _assert_same(got, dict(zip(got, own / np.linalg.norm(own, axis=1, keepdims=True),
                               strict=True)))
    with Field.open(tmp_path / "plain", tiny, context_weight=None, dedup_threshold=None) as field:
        _remember(field)
    _assert_same(got, _vectors(tmp_path / "plain", tiny))


def test_reembed_pending_replays_the_chain_through_what_failed(tmp_path: Path) -> None:
    flaky = Flaky()
    flaky.down = {A[1], A[4], B[2]}
    with Field.open(tmp_path / "f", flaky) as field:
        _remember(field)
        assert len(field.store.state.pending_rows()) == 3
        flaky.down = set()
        assert field.reembed_pending(batch=2) == 3
        assert not field.store.state.pending_rows()
    with Field.open(tmp_path / "whole", WordEmbedder()) as field:
        _remember(field)
    _assert_same(_vectors(tmp_path / "f", Flaky()), _vectors(tmp_path / "whole", WordEmbedder()))

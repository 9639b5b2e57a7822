"""A field records its embedding model and refuses to mix two models' vectors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from tiny_onnx import write_tiny_model
from word_embedder import WordEmbedder

from soul.engines.resonance import (
    EmbedderIdentity,
    EmbedderMismatch,
    Field,
    Store,
    load_embedder,
)
from soul.engines.resonance.recall import models

pytest.importorskip("onnxruntime")


class OtherWords(WordEmbedder):
    """Same dimension as WordEmbedder, another model."""

    model_id = "other-words"


class NarrowWords(WordEmbedder):
    """Another dimension."""

    dim = 32


def test_first_write_records_the_model_and_it_survives_replay_and_snapshot(tmp_path: Path) -> None:
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        assert field.embedder_record is None  # nothing written yet
        field.remember("the cat sat on the mat by the door")
        assert field.embedder_record == {"name": "WordEmbedder", "dim": 64, "sha256": ""}
    with Field.open(tmp_path / "f", WordEmbedder()) as field:  # from the log
        assert field.embedder_record == {"name": "WordEmbedder", "dim": 64, "sha256": ""}
        assert field.compact() is not None
    with Field.open(tmp_path / "f", WordEmbedder()) as field:  # from the snapshot
        assert field.embedder_record == {"name": "WordEmbedder", "dim": 64, "sha256": ""}
        assert field.stats()["embedding_model"]["name"] == "WordEmbedder"


def test_another_model_is_refused_at_open_with_what_to_do(tmp_path: Path) -> None:
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        field.remember("the cat sat on the mat by the door")
    with pytest.raises(EmbedderMismatch) as err:
        Field.open(tmp_path / "f", OtherWords())
    message = str(err.value)
    assert "'WordEmbedder' (64-d)" in message and "'other-words' (64-d)" in message
    assert f"soul memory reembed --field {tmp_path / 'f'}" in message
    with pytest.raises(EmbedderMismatch):  # another dimension too, and read-only opens as well
        Field.open(tmp_path / "f", NarrowWords(), read_only=True)


def test_two_real_onnx_models_are_told_apart_by_their_files(tmp_path: Path) -> None:
    first = load_embedder(str(write_tiny_model(tmp_path / "m1", seed=1)))
    second = load_embedder(str(write_tiny_model(tmp_path / "m2", seed=2)))
    same_file = load_embedder({"model": str(tmp_path / "m1" / "model.onnx"), "name": "renamed"})
    assert first.identity.fingerprint == hashlib.sha256((tmp_path / "m1" / "model.onnx").read_bytes()).hexdigest()
    with Field.open(tmp_path / "f", first) as field:
        field.remember("the cat sat on the mat by the door")
    with Field.open(tmp_path / "f", same_file) as field:  # the same file under another name
        assert len(field.recall("cat on a mat", mode="semantic")) == 1
    with pytest.raises(EmbedderMismatch) as err:
        Field.open(tmp_path / "f", second)
    assert first.identity.fingerprint[:12] in str(err.value)
    assert second.identity.fingerprint[:12] in str(err.value)
    assert f"--embedder {tmp_path / 'm2' / 'model.onnx'}`" in str(err.value)  # the file to migrate to


def test_a_field_without_a_record_adopts_the_model_on_its_first_write(tmp_path: Path) -> None:
    # a field written before fields recorded their model: vectors given, no MODEL entry
    vec = WordEmbedder().embed(["an old memory about the garden"]).vectors[0]
    with Field.open(tmp_path / "f") as field:
        field.remember("an old memory about the garden", embedding=vec)
        assert field.embedder_record is None
    with Field.open(tmp_path / "f", WordEmbedder(), read_only=True) as field:
        field.recall("garden", mode="semantic")
        assert field.embedder_record is None  # reading adopts nothing
    with pytest.raises(EmbedderMismatch, match="unrecorded"):  # another dimension cannot fit
        Field.open(tmp_path / "f", NarrowWords())
    with Field.open(tmp_path / "f", OtherWords()) as field:  # same dimension: adopted, never refused
        field.remember("a new memory about the orchard")
        assert field.embedder_record == {"name": "other-words", "dim": 64, "sha256": ""}


def test_the_default_model_loaded_on_first_use_is_checked_too(tmp_path: Path) -> None:
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        field.remember("the cat sat on the mat by the door")
    with Field.open(tmp_path / "f", read_only=True) as field:  # embedder None: MiniLM on first use
        assert field.recall("cat", mode="keyword")  # no model needed
        with pytest.raises(EmbedderMismatch, match="all-MiniLM-L6-v2"):
            field.recall("cat", mode="semantic")


def test_the_fingerprint_is_hashed_once_and_cached_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = write_tiny_model(tmp_path / "m", seed=3)
    models._memo.clear()
    first = models.file_fingerprint(model)
    cache = models._cache_file()
    assert cache.is_file() and first in cache.read_text()  # under the (test) data home
    models._memo.clear()

    def no_hashing(*_: object) -> None:
        raise AssertionError("hashed again")

    with monkeypatch.context() as m:  # a new process: the answer comes from the disk cache
        m.setattr(models.hashlib, "sha256", no_hashing)
        assert models.file_fingerprint(model) == first
    model.write_bytes(model.read_bytes() + b"\0")  # a changed file is hashed again
    assert models.file_fingerprint(model) != first


def test_identity_matching_rule() -> None:
    a = EmbedderIdentity("a", 8, "f" * 64)
    assert a.same_model(EmbedderIdentity("b", 8, "f" * 64))  # same file, other name
    assert not a.same_model(EmbedderIdentity("a", 8, "e" * 64))
    assert not a.same_model(EmbedderIdentity("a", 16, "f" * 64))
    assert EmbedderIdentity("a", 8).same_model(EmbedderIdentity("a", 8, "f" * 64))
    assert EmbedderIdentity.from_record(a.record()) == a


def test_unknown_embedder_names_say_what_exists(tmp_path: Path) -> None:
    from soul.engines.resonance import EmbedderError

    with pytest.raises(EmbedderError, match="built in: minilm"):
        load_embedder("bge-huge")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.onnx").write_bytes(b"")
    with pytest.raises(EmbedderError, match=r"tokenizer\.json does not exist"):
        load_embedder(str(tmp_path / "m" / "model.onnx"))


def test_old_readers_skip_the_record_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MODEL entry is an op older code does not know: replay skips unknown ops, so a
    field written now still opens in a version without it (simulated: the op code unknown)."""
    from soul.engines.resonance.store import ops

    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        field.remember("the cat sat on the mat by the door")
    monkeypatch.setattr(ops, "MODEL", 250)  # State.apply no longer knows op 7
    with Store.open(tmp_path / "f", read_only=True) as store:
        assert store.report.issues == [] and len(store.state) == 1
        assert store.state.embedder is None
        assert np.linalg.norm(store.state.vectors[0]) == pytest.approx(1.0)

"""Re-embedding a field with another model: atomic, restartable, refused while in use."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tiny_onnx import write_tiny_model
from word_embedder import WordEmbedder

from soul.engines.resonance import (
    EmbedderMismatch,
    Field,
    FieldInUse,
    FieldNotFound,
    load_embedder,
    reembed_field,
)

pytest.importorskip("onnxruntime")

TEXTS = [f"memory {i}: the {w} of the {v} near the river" for i, (w, v) in
         enumerate((a, b) for a in ("cat", "dog", "bird", "fish", "fox") for b in ("barn", "mill", "house", "tower"))]


class Counting:
    """Wraps an embedder: counts the texts it embeds, raises after `fail_after` calls."""

    def __init__(self, inner: object, fail_after: int | None = None) -> None:
        self.inner, self.fail_after, self.calls, self.texts = inner, fail_after, 0, 0
        self.dim = inner.dim  # type: ignore[attr-defined]
        self.identity = inner.identity  # type: ignore[attr-defined]

    def embed(self, texts: list[str]) -> object:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("the machine went away")
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)  # type: ignore[attr-defined]


def _field(path: Path) -> list[str]:
    with Field.open(path, WordEmbedder()) as field:
        ids = field.remember_many(TEXTS)
        field.strengthen(ids[0])
        field.forget(ids[1])
        field.recall("cat barn")  # an access, and a saved vector index at close
    return [i for i in ids if i is not None]


@pytest.fixture
def tiny(tmp_path: Path) -> object:
    return load_embedder(str(write_tiny_model(tmp_path / "tiny", seed=5)))


def test_reembed_switches_every_memory_to_the_new_model(tmp_path: Path, tiny: object) -> None:
    ids = _field(tmp_path / "f")
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        before = {i: field.get(i) for i in ids if i in field}
    seen: list[tuple[int, int]] = []
    report = reembed_field(tmp_path / "f", tiny, batch=4, progress=lambda d, t: seen.append((d, t)))
    assert report.switched and report.memories == len(TEXTS) - 1 and report.resumed_from == 0
    assert report.held == "'WordEmbedder' (64-d)" and "'tiny' (16-d" in report.target
    assert seen[-1] == (len(TEXTS), len(TEXTS)) and len(seen) == 5
    assert not (tmp_path / "f" / "reembed").exists()
    with pytest.raises(EmbedderMismatch):  # the old model is now the wrong one
        Field.open(tmp_path / "f", WordEmbedder())
    with Field.open(tmp_path / "f", tiny) as field:
        assert field.embedder_record == tiny.identity.record()  # type: ignore[attr-defined]
        assert field.stats()["dim"] == 16
        for i, old in before.items():  # everything but the vector is kept
            new = field.get(i)
            assert (new.content, new.confidence, new.access_count, new.created) == \
                   (old.content, old.confidence, old.access_count, old.created)
            assert new.embedding.shape == (16,)
        hits = field.recall(TEXTS[7], k=1, mode="semantic")
        assert hits[0].text == TEXTS[7]
        field.remember("memory 99: the owl of the barn near the river")  # writes go on
    assert reembed_field(tmp_path / "f", tiny).switched is False  # nothing to do


def test_an_exception_midway_leaves_the_old_field_and_the_next_run_resumes(tmp_path: Path, tiny: object) -> None:
    _field(tmp_path / "f")
    failing = Counting(tiny, fail_after=2)
    with pytest.raises(RuntimeError, match="went away"):
        reembed_field(tmp_path / "f", failing, batch=4)
    assert (tmp_path / "f" / "reembed" / "progress.json").is_file()
    with Field.open(tmp_path / "f", WordEmbedder()) as field:  # still the old model, whole
        assert field.embedder_record["name"] == "WordEmbedder"  # type: ignore[index]
        assert field.recall(TEXTS[5], k=1, mode="semantic")[0].text == TEXTS[5]
    again = Counting(tiny)
    report = reembed_field(tmp_path / "f", again, batch=4)
    assert report.switched and report.resumed_from == 8
    assert again.texts == len(TEXTS) - 8  # only the rows not staged before (all alive there)
    with Field.open(tmp_path / "f", tiny) as field:
        assert field.recall(TEXTS[2], k=1, mode="semantic")[0].text == TEXTS[2]


def test_memories_written_after_an_interrupted_run_are_added_to_what_it_staged(tmp_path: Path, tiny: object) -> None:
    _field(tmp_path / "f")
    with pytest.raises(RuntimeError):
        reembed_field(tmp_path / "f", Counting(tiny, fail_after=1), batch=4)
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        field.remember("memory 42: a new thing written in between")
        field.forget(field.recall(TEXTS[0], k=1, mode="keyword")[0].id)  # staged, then forgotten
    again = Counting(tiny)
    report = reembed_field(tmp_path / "f", again, batch=4)
    assert report.resumed_from == 4 and report.memories == len(TEXTS) - 1
    assert again.texts == len(TEXTS) + 1 - 4  # the rows after the 4 staged, the new one included
    with Field.open(tmp_path / "f", tiny) as field:
        assert field.recall("a new thing written in between", k=1, mode="semantic")[0].text.startswith("memory 42")
        assert not (field.store.state.vectors[field.store.state.rows[field.store.state.ids[0]]]).any()


def test_a_kill_midway_leaves_the_old_field_usable(tmp_path: Path, tiny: object) -> None:
    _field(tmp_path / "f")
    tests = Path(__file__).parent
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(tests)!r})
        from soul.engines.resonance import load_embedder, reembed_field
        inner = load_embedder({str(tmp_path / "tiny" / "model.onnx")!r})
        class Slow:
            dim, identity = inner.dim, inner.identity
            def embed(self, texts):
                time.sleep(0.3)
                return inner.embed(texts)
        reembed_field({str(tmp_path / "f")!r}, Slow(), batch=2)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    progress = tmp_path / "f" / "reembed" / "progress.json"
    deadline = time.monotonic() + 60
    while not progress.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert progress.exists(), "the child never staged a batch"
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        assert field.embedder_record["name"] == "WordEmbedder"  # type: ignore[index]
        assert field.recall(TEXTS[9], k=1, mode="semantic")[0].text == TEXTS[9]
    assert Field.check(tmp_path / "f").ok
    report = reembed_field(tmp_path / "f", tiny, batch=2)
    assert report.switched and report.resumed_from >= 2


def test_refusals_name_the_problem(tmp_path: Path, tiny: object) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FieldNotFound, match="re-embed"):
        reembed_field(tmp_path / "empty", tiny)
    _field(tmp_path / "f")
    with Field.open(tmp_path / "f", WordEmbedder()), pytest.raises(FieldInUse, match="close the other processes"):
        reembed_field(tmp_path / "f", tiny)
    assert not (tmp_path / "f" / "reembed").exists()

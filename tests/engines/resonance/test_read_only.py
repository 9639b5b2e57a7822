"""Read-only opens (issue 12): `Field.open(path, read_only=True)`, `Store.open(...,
read_only=True)` and `KnowledgeGraph.open(..., read_only=True)` change no file under the
field — no writer instance, manifest, lock or segment, no repair of a dead writer's torn tail,
no index saved, no access logged — never create a missing field, and refuse every write with
`ReadOnlyField`. Also `recall(touch=False)` and `Field.touch`, which defer the accesses."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from word_embedder import WordEmbedder

from soul.engines.resonance import (
    Field,
    FieldNotFound,
    ReadOnlyField,
    ResonanceError,
    Store,
)
from soul.engines.resonance.graph.kg import KnowledgeGraph

TEXTS = [
    "Miso the cat likes cardboard boxes",
    "Ada builds compilers in Rust for a living",
    "Bo writes poetry on quiet weekends",
    "The release of the Rust compiler is planned for March",
]


def tree(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every file and folder under root: size, mtime and (files) the bytes."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns,
                                       p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def make_field(path: Path) -> None:
    """A field with memories, a snapshot, log entries after it, a graph and a saved index."""
    with Field.open(path, embedder=WordEmbedder()) as field:
        for text in TEXTS[:3]:
            field.remember(text)
        field.relate("Ada", "uses", "Rust")
        field.compact()
        field.remember(TEXTS[3])
        field.recall("cat boxes", 2)  # builds the vector index, saved at close


def kill_a_writer(path: Path) -> Path:
    """A writer that dies without closing (its manifest open, its lock file left), whose
    last segment then ends in a torn entry; returns that segment."""
    code = (
        "import os, sys, numpy as np\n"
        "from soul.engines.resonance import Field\n"
        "f = Field.open(sys.argv[1], embedder=None, durability='fsync', entities=False)\n"
        "v = np.zeros(64, np.float32); v[3] = 1.0\n"
        "f.remember('a memory written by a writer that is killed', embedding=v)\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=120)
    open_manifests = [json.loads(m.read_text()) for m in (path / "wal").glob("*.manifest.json")]
    [active] = [m["active"] for m in open_manifests if not m["closed"]]
    segment = path / "wal" / active
    with open(segment, "ab") as fh:
        fh.write(b"\xa7\x5e\x40\x00\x00")  # an entry header cut short
    return segment


@pytest.fixture
def field_dir(tmp_path: Path) -> Path:
    path = tmp_path / "field"
    make_field(path)
    return path


def test_reading_a_read_only_field_changes_no_file(field_dir: Path) -> None:
    segment = kill_a_writer(field_dir)
    before = tree(field_dir)
    with Field.open(field_dir, embedder=WordEmbedder(), read_only=True) as field:
        assert field.read_only
        assert [h.text for h in field.recall("cat boxes", 1)] == [TEXTS[0]]
        assert field.recall("Rust", 2, mode="keyword")
        assert field.resonate("Rust compiler", 2, session="s", learn=True)
        assert field.get(field.recall("poetry", 1)[0].id).content == TEXTS[2]
        assert len(field.accesses) == 0  # recall logs no access when read-only
        stats = field.stats()
        assert stats["read_only"] is True and stats["writer"] is None and stats["memories"] == 5
        assert field.graph.triplets(subject="Ada")  # the graph, read-only too
        # the torn tail is reported, not repaired
        torn = [i for i in field.store.report.issues if i.kind == "torn_tail"]
        assert [Path(i.path).name for i in torn] == [segment.name] and torn[0].quarantined is None
        field.sync()
    assert tree(field_dir) == before
    assert not (field_dir / "quarantine").exists()
    assert not Field.check(field_dir).ok and tree(field_dir) == before
    # a writable open then repairs it: the damage was there to repair
    with Field.open(field_dir, embedder=WordEmbedder()) as field:
        assert any(i.kind == "torn_tail" and i.quarantined for i in field.store.report.issues)


WRITES: dict[str, Callable[[Field, str], Any]] = {
    "remember": lambda f, m: f.remember("a new memory about something"),
    "remember_many": lambda f, m: f.remember_many(["a new memory about something"]),
    "forget": lambda f, m: f.forget(m),
    "strengthen": lambda f, m: f.strengthen(m),
    "weaken": lambda f, m: f.weaken(m),
    "feedback": lambda f, m: f.feedback(m, True),
    "relate": lambda f, m: f.relate("Ada", "uses", "Go"),
    "link_entities": lambda f, m: f.link_entities([m]),
    "reembed_pending": lambda f, m: f.reembed_pending(),
    "compact": lambda f, m: f.compact(),
    "touch": lambda f, m: f.touch([m]),
    "graph.relate": lambda f, m: f.graph.relate("Ada", "uses", "Go"),
    "graph.mention": lambda f, m: f.graph.mention(m, ["Go"]),
    "graph.forget_memory": lambda f, m: f.graph.forget_memory(m),
    "graph.invalidate": lambda f, m: f.graph.invalidate(f.graph.triplets()[0].id),
    "graph.compact": lambda f, m: f.graph.compact(),
    "store.access": lambda f, m: f.store.access([m]),
    "store.compact": lambda f, m: f.store.compact(),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_every_write_to_a_read_only_field_raises(write: str, field_dir: Path) -> None:
    before = tree(field_dir)
    with Field.open(field_dir, embedder=WordEmbedder(), read_only=True) as field:
        memory_id = field.recall("cat boxes", 1)[0].id
        with pytest.raises(ReadOnlyField, match="read-only") as caught:
            WRITES[write](field, memory_id)
        assert isinstance(caught.value, ResonanceError)
        assert str(field_dir) in str(caught.value)
        assert len(field) == 4 and field.get(memory_id).content == TEXTS[0]
    assert tree(field_dir) == before


def test_a_read_only_graph_drops_hebbian_updates(field_dir: Path) -> None:
    before = tree(field_dir)
    with KnowledgeGraph.open(field_dir / "graph", read_only=True) as graph:
        graph.hebbian(["a", "b", "c"])
        graph.flush()
        assert graph.stats()["hebbian_queued"] == 0 and graph.stats()["writer"] is None
        assert graph.refresh() == 0
    assert tree(field_dir) == before


def test_a_read_only_open_never_creates_a_field(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    for opener in (lambda: Field.open(missing, read_only=True),
                   lambda: Store.open(missing, read_only=True)):
        with pytest.raises(FieldNotFound, match="holds no memory field"):
            opener()
    assert not missing.exists()
    missing.mkdir()  # a folder that is no field: refused, left empty
    with pytest.raises(FieldNotFound):
        Field.open(missing, read_only=True)
    assert list(missing.iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        Field.open(tmp_path / "file", read_only=True)
    # a graph folder that does not exist reads as an empty graph, and is not made
    with KnowledgeGraph.open(missing / "graph", read_only=True) as graph:
        assert graph.triplets() == []
    assert list(missing.iterdir()) == []


def test_a_read_only_field_without_a_graph_resonates(tmp_path: Path) -> None:
    path = tmp_path / "field"
    with Field.open(path, embedder=WordEmbedder(), entities=False, contiguity=None) as field:
        field.remember_many(TEXTS)
    assert not (path / "graph").exists()
    before = tree(path)
    with Field.open(path, embedder=WordEmbedder(), read_only=True) as field:
        assert field.resonate("Rust compiler", 2)
        assert field.code_index(create=False) is None
        with pytest.raises(ReadOnlyField, match="create a code index"):
            field.code_index()
    assert tree(path) == before


def test_a_read_only_store_sees_a_live_writer_without_touching_its_files(tmp_path: Path) -> None:
    path = tmp_path / "field"
    with Field.open(path, embedder=WordEmbedder()) as writer:
        writer.remember_many(TEXTS)
        writer.sync()
        before = tree(path)
        with Store.open(path, read_only=True) as store:
            assert len(store.state) == 4 and store.report.ok and store.writer is None
        assert tree(path) == before


# -- deferred accesses: recall(touch=...) and Field.touch ---------------------------------------


def access_counts(path: Path) -> dict[str, int]:
    with Store.open(path, read_only=True) as store:
        st = store.state
        return {st.text[r]: st.access_count[r] for r in range(st.n_rows) if st.is_alive(r)}


def test_recall_with_touch_false_logs_no_access(tmp_path: Path) -> None:
    path = tmp_path / "field"
    with Field.open(path, embedder=WordEmbedder()) as field:
        field.remember_many(TEXTS)
        assert field.recall("cat boxes", 2, touch=False)
        assert field.resonate("Rust compiler", 2, touch=False)
        assert len(field.accesses) == 0
    assert set(access_counts(path).values()) == {0}


def test_touch_logs_the_accesses_a_recall_deferred(tmp_path: Path) -> None:
    path = tmp_path / "field"
    with Field.open(path, embedder=WordEmbedder(), touch_on_recall=False) as field:
        ids = field.remember_many(TEXTS)
        gone = ids[3]
        field.forget(gone)
        hits = field.recall("cat boxes", 1)  # touch_on_recall=False: nothing queued
        assert len(field.accesses) == 0
        field.touch([hits[0].id, gone, "no-such-id"])
        field.flush_accesses()
        assert field.get(hits[0].id).access_count == 1
        field.recall("poetry weekends", 1, touch=True)  # True overrides touch_on_recall
    counts = access_counts(path)
    assert counts == {TEXTS[0]: 1, TEXTS[1]: 0, TEXTS[2]: 1}


def test_touch_on_a_closed_field_raises(tmp_path: Path) -> None:
    from soul.engines.resonance import StoreClosed

    field = Field.open(tmp_path / "field", embedder=WordEmbedder())
    memory_id = field.remember(TEXTS[0])
    field.close()
    with pytest.raises(StoreClosed):
        field.touch([memory_id])


def test_a_read_only_field_keeps_no_index_it_builds(field_dir: Path) -> None:
    index = field_dir / "index" / "vectors.hnsw"
    index.unlink()  # a stale or missing index is rebuilt in memory, not saved
    before = tree(field_dir)
    with Field.open(field_dir, embedder=WordEmbedder(), read_only=True) as field:
        assert field.recall("cat boxes", 1, mode="semantic")
        assert field.stats()["vector_index"] == 4
    assert tree(field_dir) == before and not index.exists()


"""The store: ops survive reopening, compaction, snapshot damage and two writers at once."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
import pytest

from soul.engines.resonance import ConfigError, Store, UnknownMemory
from soul.engines.resonance.store.ops import Row


@pytest.fixture(autouse=True, params=["python", "kernels"])
def replay_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with both log walkers: the Python one and the numba one."""
    from soul.engines.resonance.store import recovery

    monkeypatch.setattr(recovery, "FAST_BYTES", 0 if request.param == "kernels" else 1 << 62)
    return request.param



def row(i: int, prefix: str = "m") -> Row:
    return Row(f"{prefix}{i:06d}", 3, 0, time.time(), 0.7, 0.04, 0, f"memory number {i} here",
               ("a", "b"), "work", "user", json.dumps({"i": i}))


def vecs(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, dim), dtype=np.float32)


def test_every_op_survives_reopening(tmp_path: Path) -> None:
    v = vecs(5)
    with Store.open(tmp_path) as store:
        for i in range(3):
            store.add(row(i), v[i])
        store.add_many([row(3), row(4)], v[3:5])
        store.observe("m000001", 1.0)
        store.access(["m000002", "m000002"])
        store.forget("m000000")
        store.reembed("m000003", np.ones(8, np.float32))
        before = store.state.memory(store.state.row_of("m000001"))
    with Store.open(tmp_path) as store:
        st = store.state
        assert len(st) == 4 and st.n_rows == 5
        with pytest.raises(UnknownMemory):
            st.row_of("m000000")
        m1 = st.memory(st.row_of("m000001"))
        assert m1 == before and m1.confidence.n == 1 and m1.confidence.mu > 0.7
        assert m1.tags == ("a", "b") and m1.realm == "work" and m1.meta == {"i": 1}
        np.testing.assert_array_equal(m1.embedding, v[1])
        assert st.memory(st.row_of("m000002")).access_count == 2
        np.testing.assert_array_equal(st.vectors[st.row_of("m000003")], np.ones(8))
        np.testing.assert_array_equal(st.vectors[st.row_of("m000004")], v[4])


def test_recovery_after_compaction(tmp_path: Path) -> None:
    v = vecs(300)
    with Store.open(tmp_path, segment_bytes=4096) as store:
        store.add_many([row(i) for i in range(200)], v[:200])
        store.forget("m000010")
        snap = store.compact()
        assert not list((tmp_path / "wal").glob("*_000001.seg"))  # covered, so deleted
        for i in range(200, 300):  # written after the snapshot: replayed from the log
            store.add(row(i), v[i])
        store.observe("m000020", 0.0)
    with Store.open(tmp_path) as store:
        assert store.snapshot == snap and store.report.ok
        assert len(store.state) == 299 and store.report.replayed == 101
        np.testing.assert_array_equal(store.state.vectors[:300], np.where(
            np.arange(300)[:, None] == 10, 0, v))
        assert store.state.memory(store.state.row_of("m000020")).confidence.mu < 0.7


def test_a_damaged_snapshot_falls_back_to_the_older_one(tmp_path: Path) -> None:
    v = vecs(20)
    with Store.open(tmp_path) as store:
        store.add_many([row(i) for i in range(10)], v[:10])
        store.compact()
        store.add_many([row(i) for i in range(10, 20)], v[10:])
        newest = store.compact()
    raw = bytearray(newest.read_bytes())
    raw[-10] ^= 0x01
    newest.write_bytes(bytes(raw))
    with Store.open(tmp_path) as store:
        kinds = [i.kind for i in store.report.issues]
        assert kinds[0] == "bad_snapshot"
        assert len(store.state) >= 10  # the older snapshot; entries it lacks were compacted
    assert not Store.check(tmp_path).ok


def test_close_compacts_once_the_log_is_long(tmp_path: Path) -> None:
    with Store.open(tmp_path, compact_after=50) as store:
        store.add_many([row(i) for i in range(60)], vecs(60))
        for i in range(60):
            store.observe(f"m{i:06d}", 1.0)
    assert len(list((tmp_path / "snapshots").glob("*.snap"))) == 1
    with Store.open(tmp_path) as store:
        assert store.report.replayed == 0 and len(store.state) == 60


def test_wrong_dimension_is_refused_before_it_reaches_the_log(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        store.add(row(0), vecs(1)[0])
        with pytest.raises(ConfigError, match="8-d"):
            store.add(row(1), np.ones(4, np.float32))
    with Store.open(tmp_path) as store:
        assert store.report.ok and len(store.state) == 1


def _writer(path: str, prefix: str, n: int) -> None:
    with Store.open(path, durability="os", segment_bytes=8192) as store:
        v = vecs(n, seed=ord(prefix))
        for i in range(n):
            store.add(row(i, prefix), v[i])
            if i % 50 == 0:
                store.observe(f"{prefix}{i:06d}", 1.0)


def test_two_writer_processes_at_once(tmp_path: Path) -> None:
    # spawned, not forked: a fork of the test process copies the locks its other threads
    # hold (a field's flusher, BLAS workers, a malloc arena) and the child can wait on one
    # forever (seen once under load: a writer stuck in its first allocation)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), p, 300)) for p in "xy"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(list((tmp_path / "wal").glob("*.manifest.json"))) == 2
    with Store.open(tmp_path) as store:
        assert store.report.ok and len(store.state) == 600
        hlcs = [m for m in store.state.ids]
        assert {h[0] for h in hlcs} == {"x", "y"}
        assert store.state.memory(store.state.row_of("y000050")).confidence.n == 1
    check = Store.check(tmp_path)
    assert check.ok and check.entries >= 600


def test_check_on_a_clean_field(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        store.add_many([row(i) for i in range(5)], vecs(5))
    report = Store.check(tmp_path)
    assert report.ok and report.entries == 1 and report.segments == 1


def test_non_ascii_text_and_tags_round_trip(tmp_path: Path) -> None:
    r = Row("u1", 3, 0, 1.0, 0.7, 0.04, 0, "café ☕ naïve Grüße 日本", ("ü", "✓"), "réalm", None, None)
    with Store.open(tmp_path) as store:
        store.add(r, vecs(1)[0])
        store.add_many([Row("u2", 3, 0, 1.0, 0.7, 0.04, 0, r.text + "!", r.tags, None, "ß",
                            None)], vecs(1))
    with Store.open(tmp_path) as store:
        m1, m2 = (store.state.memory(store.state.row_of(i)) for i in ("u1", "u2"))
        assert (m1.content, m1.tags, m1.realm) == (r.text, ("ü", "✓"), "réalm")
        assert (m2.content, m2.tags, m2.source) == (r.text + "!", ("ü", "✓"), "ß")


def test_a_writer_behind_the_newest_snapshot_does_not_compact(tmp_path: Path) -> None:
    early = Store.open(tmp_path)  # opened before `late` compacts
    early.add(row(1, "e"), vecs(1)[0])
    with Store.open(tmp_path) as late:
        late.add(row(1, "l"), vecs(1)[0])
        assert late.compact() is not None  # deletes the segment holding l000001
    assert early.compact() is None  # its snapshot would hide l000001
    early.close()
    with Store.open(tmp_path) as store:
        assert {"e000001", "l000001"} <= set(store.state.rows)
        assert store.compact() is not None

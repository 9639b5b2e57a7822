"""Several writers on one graph directory, with the memory store's semantics: every open is its
own writer instance, nothing waits, a reopen (or `refresh`) sees everyone's writes in global
order; content ids agree across writers; a killed writer loses nothing it acknowledged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soul.engines.resonance.graph.kg import KnowledgeGraph
from soul.engines.resonance.graph.kg_state import triplet_id


def open_graph(path: Path, **options: object) -> KnowledgeGraph:
    return KnowledgeGraph.open(path, flush_interval=None, **options)  # type: ignore[arg-type]


def test_two_objects_on_one_directory_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "kg"
    a, b = open_graph(path), open_graph(path)  # no lock: both open at once
    assert a.stats()["writer"] != b.stats()["writer"]
    ta = a.relate("Caroline", "likes", "pottery", weight=0.25)
    tb = b.relate("caroline", "likes", "Pottery", weight=0.5)  # not seen by b: same id
    assert ta == tb == triplet_id("e:caroline", "likes", "e:pottery", 0)
    only_a = a.relate("Melanie", "paints", "sunsets")
    only_b = b.relate("Melanie", "paints", "lakes")
    a.mention("m1", ["Caroline", "Boston"])
    b.mention("m1", ["Caroline", "pottery"])  # the same memory, one more entity
    b.mention("m2", ["Boston"])
    a.hebbian(["m1", "m2"], delta=0.1)
    b.hebbian(["m2", "m1"], delta=0.2)
    a.flush()
    b.flush()
    # each sees only its own writes while open
    assert a.triplet(ta).weight == 0.25 and b.triplet(tb).weight == 0.5
    a.close()
    b.close()
    with open_graph(path) as g:
        assert g.stats()["recovery_issues"] == []
        (fact,) = g.triplets(subject="Caroline")
        assert fact.id == ta and fact.weight == pytest.approx(0.75)  # merged, summed
        assert {t.id for t in g.triplets(subject="Melanie")} == {only_a, only_b}
        assert set(g.entities_of("m1")) == {"Caroline", "Boston", "pottery"}
        assert set(g.memories_of("Boston")) == {"m1", "m2"}
        (link,) = g.triplets(predicate="relates_to")  # one edge, not one per writer
        assert link.weight == pytest.approx(0.3, rel=1e-4)


def test_reinforcements_by_two_writers_add_up(tmp_path: Path) -> None:
    path = tmp_path / "kg"
    with open_graph(path) as g:
        tid = g.relate("x", "calls", "y", weight=0.1)
    a, b = open_graph(path), open_graph(path)
    a.relate("x", "calls", "y", weight=0.2)  # each logs a +delta, not its absolute weight
    b.relate("x", "calls", "y", weight=0.3)
    a.close()
    b.close()
    with open_graph(path) as g:
        assert g.triplet(tid).weight == pytest.approx(0.6)


def test_an_invalidation_wins_over_a_writer_that_had_not_seen_it(tmp_path: Path) -> None:
    path = tmp_path / "kg"
    with open_graph(path) as g:
        tid = g.relate("Caroline", "lives_in", "Boston", weight=0.5)
    a, b = open_graph(path), open_graph(path)
    a.invalidate(tid, at=time.time())
    assert b.relate("Caroline", "lives_in", "Boston", weight=0.2) == tid  # b: still live
    a.close()
    b.close()
    with open_graph(path) as g:
        t = g.triplet(tid)
        assert t.invalidated_at is not None and t.weight == pytest.approx(0.7)
        assert g.triplets(subject="Caroline") == []
        # stated again after seeing the invalidation: the next generation, live
        again = g.relate("Caroline", "lives_in", "Boston")
        assert again == triplet_id("e:caroline", "lives_in", "e:boston", 1)
        assert [t.id for t in g.triplets(subject="Caroline")] == [again]


def test_refresh_sees_what_others_wrote_since_open(tmp_path: Path) -> None:
    path = tmp_path / "kg"
    a, b = open_graph(path), open_graph(path)
    try:
        mine = a.relate("a", "calls", "b")
        theirs = b.relate("b", "calls", "c")
        b.mention("m9", ["c"])
        assert a.triplets(subject="c") == [] and a.memories_of("c") == ()
        assert a.refresh() == 2  # b's two entries
        assert {t.id for t in a.triplets()} == {mine, theirs}
        assert a.memories_of("c") == ("m9",)
        assert "m9" in a.spread({"m9": 1.0}).memories
        a.relate("c", "calls", "d")  # writing goes on after a refresh
        assert a.refresh() == 0
    finally:
        a.close()
        b.close()
    with open_graph(path) as g:
        assert len(g.triplets()) == 3


def test_compaction_never_deletes_a_live_writers_segments(tmp_path: Path) -> None:
    path = tmp_path / "kg"
    with open_graph(path) as g:  # a dead writer, whose segment compaction may delete
        for i in range(20):
            g.mention(f"old{i}", ["x"])
    a, b = open_graph(path), open_graph(path)
    try:
        for i in range(30):
            b.mention(f"b{i}", ["y"])
        b.log.writer.rotate()  # b has a sealed segment now, which a must leave alone
        c = open_graph(path)  # sees b's 30 entries (b is live)
        snap = c.compact()
        assert snap is not None
        b_segments = {p.name for p in (path / "wal").glob(f"{b.log.instance}_*.seg")}
        assert len(b_segments) == 2  # untouched although the snapshot covers the sealed one
        c.close()
        # a opened before c's snapshot and has not seen b's entries: compacting would hide
        # them, so it declines; after a refresh it may
        assert a.compact() is None
        a.refresh()
        assert a.compact() is not None
        for i in range(5):
            b.mention(f"late{i}", ["z"])  # b keeps writing after both compactions
    finally:
        a.close()
        b.close()
    with open_graph(path) as g:
        assert g.stats()["recovery_issues"] == []
        assert len(g.memories_of("x")) == 20 and len(g.memories_of("y")) == 30
        assert len(g.memories_of("z")) == 5


WORKER = r"""
import json, sys, time
from pathlib import Path
from soul.engines.resonance.graph.kg import KnowledgeGraph
path, name, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
g = KnowledgeGraph.open(path, flush_interval=None, durability="batch")
(path.parent / f"ready-{name}").touch()
while not (path.parent / "go").exists():
    time.sleep(0.001)
ids = {}
for i in range(n):
    ids[f"shared{i % 10}"] = g.relate(f"Shared{i % 10}", "likes", "thing", weight=0.01)
    ids[f"{name}-{i}"] = g.relate(f"{name}_{i}", "calls", f"x{i}", memory=f"{name}m{i}")
    g.mention(f"{name}m{i}", [f"ent{i % 7}", name])
    g.hebbian(["h1", "h2"], delta=0.0024)  # 0.012 per flush: above the floor
    g.hebbian([f"{name}m{i}", "hub"], delta=0.05)
    if i % 5 == 4:
        g.flush()
g.close()
print(json.dumps(ids))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    import soul  # the children must import the same `soul` as this test

    root = str(Path(soul.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def test_two_processes_write_concurrently_and_a_fresh_open_sees_everything(
        tmp_path: Path) -> None:
    path, n = tmp_path / "kg", 200
    env = _env()
    procs = {name: subprocess.Popen([sys.executable, "-c", WORKER, str(path), name, str(n)],
                                    stdout=subprocess.PIPE, env=env) for name in ("p", "q")}
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{k}").exists() for k in procs):
        assert time.monotonic() < deadline, "the writers did not open"
        time.sleep(0.01)
    (tmp_path / "go").touch()  # both opened before either wrote: neither sees the other
    ids = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        ids[name] = json.loads(out)
    with open_graph(path) as g:
        st = g.stats()
        assert st["recovery_issues"] == []
        assert st["recovered_entries"] == 2 * (3 * n + n // 5)  # one per write and flush
        # the same fact got the same id in both processes, merged into one triplet whose
        # weight is every reinforcement of both
        for k in range(10):
            assert ids["p"][f"shared{k}"] == ids["q"][f"shared{k}"]
            (t,) = g.triplets(subject=f"shared{k}")
            assert t.id == ids["p"][f"shared{k}"]
            assert t.weight == pytest.approx(0.01 * (n // 10) * 2)
        # every process's own facts, with the ids it was given, all distinct
        own = [ids[name][f"{name}-{i}"] for name in procs for i in range(n)]
        assert len(set(own)) == 2 * n
        for name in procs:
            for i in range(n):
                t = g.triplet(ids[name][f"{name}-{i}"])
                assert (t.subject, t.object, t.memory) == (f"{name}_{i}", f"x{i}",
                                                            f"{name}m{i}")
                assert set(g.entities_of(f"{name}m{i}")) == {f"ent{i % 7}", name}
        assert len(g.memories_of("ent3")) == 2 * len(range(3, n, 7))
        # Hebbian: one h1-h2 edge with both writers' deltas; one edge per memory to the hub
        (h,) = g.triplets(subject="m:h1", predicate="relates_to")
        assert h.weight == pytest.approx(0.0024 * 2 * n, rel=1e-3)
        hub = [t for t in g.triplets(predicate="relates_to") if "m:hub" in (t.subject,
                                                                            t.object)]
        assert len(hub) == 2 * n and len({t.id for t in g.triplets(include_invalid=True)}
                                          ) == len(g.triplets(include_invalid=True))
        assert all(t.weight == pytest.approx(0.05, rel=1e-3) for t in hub)
        assert len(g.triplets()) == 10 + 2 * n + 1 + 2 * n


KILLED = r"""
import sys
from pathlib import Path
from soul.engines.resonance.graph.kg import KnowledgeGraph
path, durability = Path(sys.argv[1]), sys.argv[2]
g = KnowledgeGraph.open(path, flush_interval=None, durability=durability)
print("ready", flush=True)
i = 0
while True:
    tid = g.relate(f"k{i}", "calls", "y", weight=0.5)
    g.mention(f"km{i}", [f"k{i}"])
    g.hebbian([f"km{i}", "anchor"], delta=0.1)
    g.flush()
    sys.stdout.write(f"{i} {tid}\n")  # acknowledged: every call above had returned
    sys.stdout.flush()
    i += 1
"""


@pytest.mark.parametrize("durability", ["fsync", "batch"])
def test_a_killed_writer_loses_nothing_it_acknowledged(tmp_path: Path,
                                                        durability: str) -> None:
    """SIGKILL mid-write while another writer is open: the killed one's acknowledged writes
    (durable: fsync per append; batch: already in the OS once append returned, which a
    process crash cannot lose) are all there, its torn tail is cut, the other goes on."""
    path = tmp_path / "kg"
    env = _env()
    other = open_graph(path, durability="fsync")
    other.relate("other", "calls", "before")
    acked: dict[int, int] = {}
    for trial in range(2):
        proc = subprocess.Popen([sys.executable, "-c", KILLED, str(path), durability],
                                stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(0.15 + 0.1 * trial)
        other.relate("other", "calls", f"during{trial}")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for line in proc.stdout.read().decode().splitlines():
            i, tid = map(int, line.split())
            acked[i] = tid  # the second trial rewrites the same facts: reinforcing them
        proc.stdout.close()
        assert acked
        with open_graph(path) as g:
            issues = g.stats()["recovery_issues"]
            assert all(i.startswith("torn_tail") for i in issues), issues
            for i, tid in acked.items():
                t = g.triplet(tid)
                assert (t.subject, t.object) == (f"k{i}", "y")
                assert g.entities_of(f"km{i}") == (f"k{i}",)
            anchored = {t.subject for t in g.triplets(obj="m:anchor")} | {
                t.object for t in g.triplets(subject="m:anchor")}
            assert {f"m:km{i}" for i in acked} <= anchored
    other.relate("other", "calls", "after")  # the surviving writer never noticed
    other.close()
    with open_graph(path) as g:
        assert {t.object for t in g.triplets(subject="other")} == {
            "before", "during0", "during1", "after"}


def _write_format1_snapshot(g: KnowledgeGraph, snap_dir: Path) -> Path:
    """A snapshot as the single-writer graph wrote them (format 1: a triplet's id is its
    position in the triplet columns, slot 0 unused), from a graph whose ids are 1..n."""
    import numpy as np

    from soul.engines.resonance.graph.adjacency import EdgeTable
    from soul.engines.resonance.graph.kg_snapshot import _DTYPES, COLUMN, HEADER, SEP, STRINGS
    from soul.engines.resonance.store.wal import SEGMENT_MAGIC, encode_entry

    st = g.state
    n_trip = max(st.trip) + 1
    trip_edge = np.full(n_trip, -1, "<i8")
    preds, mems = [""] * n_trip, [""] * n_trip
    for tid, t in st.trip.items():
        trip_edge[tid], preds[tid], mems[tid] = st.trip_edge[tid], t.predicate, t.memory or ""
    header = {"format": 1, "nodes": len(st.keys), "edges": st.edges.n, "triplets": n_trip,
              "covered": dict(g.log.covered), "max_hlc": g.log.max_hlc}
    entries = [(HEADER, json.dumps(header).encode())]
    entries += [(STRINGS, SEP.join(x).encode()) for x in (st.keys, st.display, preds, mems)]
    entries.append((COLUMN, st.entity[: len(st.keys)].astype("u1").tobytes()))
    entries += [(COLUMN, np.ascontiguousarray(getattr(st.edges, c)[: st.edges.n],
                                              _DTYPES[c]).tobytes()) for c in EdgeTable.COLS]
    entries.append((COLUMN, trip_edge.tobytes()))
    snap_dir.mkdir(parents=True, exist_ok=True)
    path = snap_dir / f"snap_{g.log.max_hlc + 1:020d}_legacy.snap"
    path.write_bytes(SEGMENT_MAGIC + b"".join(
        encode_entry(i, g.log.max_hlc + 1, op, p) for i, (op, p) in enumerate(entries, 1)))
    return path


def test_a_single_writer_era_log_and_snapshot_still_load(tmp_path: Path) -> None:
    """Graphs written before several writers were allowed: sequential ids, absolute weights
    (REINFORCE, HEBBIAN) and format-1 snapshots. They load as they were, and go on."""
    from soul.engines.resonance.graph import kg_log
    from soul.engines.resonance.store.wal import WalWriter

    path = tmp_path / "kg"
    w = WalWriter(path / "wal", durability="os")
    at = time.time()
    w.append(kg_log.RELATE, kg_log.encode_relate(kg_log.Relate(
        1, "a", "calls", "b", 0.4, 10.0, at, "m1", False)))
    w.append(kg_log.REINFORCE, kg_log.encode_reinforce(1, 0.6, at))
    w.append(kg_log.RELATE, kg_log.encode_relate(kg_log.Relate(
        2, "a", "lives_in", "c", 1.0, 10.0, at, None, False)))
    w.append(kg_log.INVALIDATE, kg_log.encode_invalidate(2, 20.0))
    w.append(kg_log.MENTION, kg_log.encode_mention("m1", ["a", "b"], at))
    w.append(kg_log.HEBBIAN, kg_log.encode_hebbian(kg_log.HebbianSet(at, ((3, 0.2, "m1",
                                                                            "m2"),))))
    w.append(kg_log.HEBBIAN, kg_log.encode_hebbian(kg_log.HebbianSet(at, ((3, 0.5, "m1",
                                                                            "m2"),))))
    w.close()
    with open_graph(path) as g:
        assert g.stats()["recovery_issues"] == []
        assert sorted(g.state.trip) == [1, 2, 3]
        assert g.triplet(1).weight == pytest.approx(0.6)
        assert g.triplet(2).invalidated_at == 20.0
        assert g.triplet(3).weight == pytest.approx(0.5, rel=1e-4)
        assert g.entities_of("m1") == ("a", "b")
        before = [(t.id, t.subject, t.object, t.invalidated_at) for t in
                  g.triplets(include_invalid=True)]
        snap = _write_format1_snapshot(g, path / "snapshots")
    for p in (path / "wal").glob("*.seg"):
        p.unlink()  # only the format-1 snapshot holds the graph now
    with open_graph(path) as g:
        assert g.stats()["snapshot"] == str(snap) and g.stats()["recovery_issues"] == []
        assert [(t.id, t.subject, t.object, t.invalidated_at) for t in
                g.triplets(include_invalid=True)] == before
        assert g.relate("A", "calls", "B", weight=0.1) == 1  # a legacy id, reinforced
        assert g.triplet(1).weight == pytest.approx(0.7)
        g.hebbian(["m2", "m1"], delta=0.1)
        g.flush()
        assert g.triplet(3).weight == pytest.approx(0.6, rel=1e-4)
        new = g.relate("x", "calls", "y")
        assert new == triplet_id("e:x", "calls", "e:y", 0)
    with open_graph(path) as g:
        assert g.triplet(1).weight == pytest.approx(0.7) and g.triplet(new).object == "y"


def test_two_fields_on_one_directory_both_link_their_memories(tmp_path: Path) -> None:
    """What made the graph multi-writer: a Field opens its graph on every remember, and a
    field may be open twice at once (two processes, or two souls in one)."""
    from word_embedder import WordEmbedder

    from soul.engines.resonance import Field

    path = tmp_path / "field"
    a = Field.open(path, WordEmbedder(), dedup_threshold=None)
    b = Field.open(path, WordEmbedder(), dedup_threshold=None)
    try:
        ma = a.remember("Caroline adopted a puppy named Biscuit from the shelter")
        mb = b.remember("Biscuit chewed through the new sofa cushions yesterday")
        assert "Biscuit" in a.graph.entities_of(ma) and "Biscuit" in b.graph.entities_of(mb)
    finally:
        a.close()
        b.close()
    with KnowledgeGraph.open(path / "graph", flush_interval=None) as g:
        assert set(g.memories_of("biscuit")) == {ma, mb}


def test_replay_merges_a_fact_logged_under_two_ids_and_never_reuses_a_dropped_id(
        tmp_path: Path) -> None:
    """The defensive merge rules of `GraphState.apply`, fed entries directly: a RELATE of a
    fact that is live under another id merges into it (the second id becomes an alias that
    later entries may use), and a RELATE carrying the id of a dropped Hebbian edge is stored
    under a fresh id. Both survive a snapshot."""
    from soul.engines.resonance.graph import kg_log
    from soul.engines.resonance.graph.kg_snapshot import read_snapshot, write_snapshot
    from soul.engines.resonance.graph.kg_state import GraphState

    st = GraphState(30 * 86400.0, 0.01)

    def apply(op: int, payload: bytes) -> None:
        st.apply(op, memoryview(payload))

    now = time.time()
    apply(kg_log.RELATE, kg_log.encode_relate(kg_log.Relate(
        111, "a", "calls", "b", 0.25, 1.0, now, None, False)))
    apply(kg_log.RELATE, kg_log.encode_relate(kg_log.Relate(
        222, "A", "calls", "B", 0.25, 2.0, now, None, False)))
    assert list(st.trip) == [111] and st.alias == {222: 111}
    apply(kg_log.REINFORCE_BY, kg_log.encode_reinforce_by(222, 0.25, now))
    assert st.trip[111].weight == pytest.approx(0.75) and st.get(222) is st.trip[111]
    apply(kg_log.HEBBIAN_BY, kg_log.encode_hebbian_by(kg_log.HebbianDeltas(now, (
        ("m1", "m2", 0.5),))))
    heb = st.live[("m:m1", "relates_to", "m:m2")]
    assert heb == triplet_id("m:m1", "relates_to", "m:m2", 0)
    apply(kg_log.FORGET_MEMORY, kg_log.encode_forget_memory("m1", now))  # drops it
    assert heb in st.retired and heb not in st.trip
    apply(kg_log.REINFORCE_BY, kg_log.encode_reinforce_by(heb, 0.1, now))  # a no-op now
    apply(kg_log.RELATE, kg_log.encode_relate(kg_log.Relate(  # a writer that missed the drop
        heb, "m:m1", "relates_to", "m:m2", 0.3, 3.0, now, None, False)))
    fresh = st.resolve(heb)
    assert fresh == triplet_id("m:m1", "relates_to", "m:m2", 1) and st.trip[fresh].weight == 0.3
    apply(kg_log.INVALIDATE, kg_log.encode_invalidate(222, 50.0))  # through the alias
    assert st.trip[111].invalidated_at == 50.0
    snap = write_snapshot(st, {"w": 7}, 9, tmp_path, "w", 10)
    back, covered, max_hlc = read_snapshot(snap, st.half_life, st.floor)
    assert (covered, max_hlc) == ({"w": 7}, 9)
    assert back.alias == st.alias and back.retired == st.retired
    assert list(back.trip.items()) == list(st.trip.items())
    assert back.new_id("m:m1", "relates_to", "m:m2") == triplet_id(
        "m:m1", "relates_to", "m:m2", 2)

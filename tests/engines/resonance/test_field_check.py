"""`Field.check` covers the whole field (issue 12.4, 12.11): the knowledge graph's log as well
as the store's, damage an earlier open set aside, killed compactions' temporary snapshots;
and a field with a malformed manifest or a folder named like a segment still opens."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import numpy as np

from soul.engines.resonance import Field, Store
from soul.engines.resonance.graph.kg import KnowledgeGraph


def _store_field(path: Path, n: int = 5) -> None:
    with Field.open(path, embedder=None) as field:
        for i in range(n):
            vec = np.zeros(8, np.float32)
            vec[i % 8] = 1.0
            field.remember(f"memory number {i} about topic {i}", embedding=vec)


def _graph(path: Path, n: int = 200) -> None:
    graph = KnowledgeGraph.open(path / "graph", flush_interval=None)
    for i in range(n):
        graph.relate(f"Entity{i}", "related_to", f"Other{i}", memory=f"m{i}")
    graph.close()


def test_graph_damage_fails_the_check_before_and_after_an_open(tmp_path: Path) -> None:
    field = tmp_path / "field"
    _store_field(field)
    _graph(field)
    assert Field.check(field).ok
    segment = max((field / "graph" / "wal").glob("*.seg"), key=lambda p: p.stat().st_size)
    data = bytearray(segment.read_bytes())
    data[len(data) // 3] ^= 0xFF
    segment.write_bytes(bytes(data))
    report = Field.check(field)
    assert not report.ok and any(segment.name in i.path for i in report.issues)
    graph = KnowledgeGraph.open(field / "graph", flush_interval=None)  # repairs: quarantines
    lost = graph.stats()["triplets"] < 200
    graph.close()
    report = Field.check(field)
    assert not report.ok, "damage the graph's open set aside must still fail the check"
    if lost:
        assert any(i.kind in ("quarantined", "corrupt") for i in report.issues)


def test_stats_shows_the_graph(tmp_path: Path) -> None:
    field = tmp_path / "field"
    _store_field(field)
    _graph(field, 3)
    with Field.open(field, embedder=None) as f:
        graph = f.stats()["graph"]
    assert graph["triplets"] >= 3 and graph["recovery_issues"] == [] and graph["quarantined"] == []


def test_killed_compaction_leftovers_are_reported_then_removed(tmp_path: Path) -> None:
    field = tmp_path / "field"
    _store_field(field)
    _graph(field, 3)
    tmps = [field / "snapshots" / "snap_1_x.snap.tmp", field / "graph" / "snapshots" / "snap_1_y.snap.tmp"]
    for tmp in tmps:
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(b"half a snapshot")
    report = Field.check(field)
    assert sorted(i.path for i in report.issues if i.kind == "stale_tmp") == sorted(map(str, tmps))
    assert all(t.exists() for t in tmps), "check changes nothing"
    # A compaction running now holds compact.lock: its temporary file is not touched.
    fd = os.open(field / "snapshots" / "compact.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert not [i for i in Field.check(field).issues if i.path == str(tmps[0])]
        Store.open(field).close()
        assert tmps[0].exists()
    finally:
        os.close(fd)
    Store.open(field).close()
    KnowledgeGraph.open(field / "graph", flush_interval=None).close()
    assert not any(t.exists() for t in tmps)
    assert Field.check(field).ok


def test_malformed_manifests_and_segment_named_folders_are_reported_not_fatal(tmp_path: Path) -> None:
    field = tmp_path / "field"
    _store_field(field)
    manifests = sorted((field / "wal").glob("*.manifest.json"))
    manifests[0].write_text(json.dumps([1, 2, 3]))  # valid JSON, wrong shape
    (field / "wal" / "deadbeef.manifest.json").write_text(json.dumps({"segments": 5}))
    (field / "wal" / "deadbeef_000001.seg").mkdir()
    with Store.open(field) as store:
        kinds = {i.kind for i in store.report.issues}
        assert len(store.state) == 5
    assert {"bad_manifest", "not_a_segment"} <= kinds
    report = Field.check(field)
    assert {"bad_manifest", "not_a_segment"} <= {i.kind for i in report.issues}

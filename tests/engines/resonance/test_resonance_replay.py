"""Replay of large logs (numba framing, ADD runs decoded as columns) equals the entry-by-entry
replay: same state, same issues, whatever the log holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from soul.engines.resonance import Store
from soul.engines.resonance.store import recovery
from soul.engines.resonance.store.ops import Row
from soul.engines.resonance.store.scan import scan_segment
from soul.engines.resonance.store.state import State

COLUMNS = ("ids", "kind", "flags", "text", "tags", "realm", "source", "meta", "created",
           "last_active", "mu", "var", "n", "access_count", "covered", "max_hlc", "alive")


def _row(i: int, text: str | None = None, prefix: str = "m") -> Row:
    extra = i % 4 == 0
    return Row(f"{prefix}{i:06d}", i % 26, 0, 1e9 + i, 0.5 + (i % 5) / 10, 0.04, i % 3,
               text or f"memory {i} · ünïcode {'x' * (i % 17)}", ("a", f"t{i % 3}") if i % 2
               else (), "work" if extra else None, "user" if i % 3 == 0 else None,
               json.dumps({"i": i}) if extra else None)


def _open(path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setattr(recovery, "FAST_BYTES", 0 if fast else 1 << 62)
    return Store.open(path, compact_after=10**9)


def _state(st: State) -> dict:
    out = {c: getattr(st, c) for c in COLUMNS}
    out = {c: list(v) if not isinstance(v, (int, dict)) else v for c, v in out.items()}
    out["rows"] = dict(st.rows)
    out["accessed"] = {k: list(v) for k, v in st.accessed.items()}
    out["vectors"] = st.vectors.tobytes()
    return out


def _write_mixed(path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    v = rng.random((400, 8), dtype=np.float32)
    with Store.open(path, segment_bytes=1 << 14) as a, Store.open(path, segment_bytes=1 << 13) as b:
        for i in range(120):  # a long run of single ADDs, interleaved across two writers
            (a if i % 7 else b).add(_row(i), v[i])
        a.add_many([_row(i) for i in range(120, 200)], v[120:200])
        a.observe("m000003", 1.0)
        b.access(["m000004", "m000005", "m000004"])
        a.forget("m000006")
        a.add(_row(200, "a text with a \x00 NUL inside"), v[200])  # not bulk-decodable
        for i in range(201, 260):
            a.add(_row(i), v[i])
        a.reembed("m000008", np.ones(8, np.float32))
        for i in range(260, 270):  # short runs between other ops: one by one
            b.add(_row(i), v[i])
            b.observe(f"m{i:06d}", 0.0)


def test_fast_and_entry_replay_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_mixed(tmp_path)
    with _open(tmp_path, False, monkeypatch) as slow:
        expect = _state(slow.state)
        assert slow.report.replayed > 200 and not slow.report.issues
    with _open(tmp_path, True, monkeypatch) as fast:
        assert _state(fast.state) == expect
        assert fast.report.replayed == slow.report.replayed and not fast.report.issues
        assert fast.state.text[fast.state.rows["m000200"]] == "a text with a \x00 NUL inside"


@pytest.mark.parametrize("where", ["middle", "tail"])
def test_damage_is_found_the_same_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      where: str) -> None:
    v = np.random.default_rng(1).random((300, 8), dtype=np.float32)
    with Store.open(tmp_path) as st:
        for i in range(300):
            st.add(_row(i), v[i])
    [seg] = sorted((tmp_path / "wal").glob("*.seg"))
    data = bytearray(seg.read_bytes())
    if where == "middle":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[:-50]
    seg.write_bytes(bytes(data))
    slow_scan, fast_scan = scan_segment(seg), scan_segment(seg, fast=True)
    assert slow_scan.damaged == fast_scan.damaged and slow_scan.tail_start == fast_scan.tail_start
    for name in ("hlc", "seq", "op", "off", "length"):
        np.testing.assert_array_equal(getattr(slow_scan, name), getattr(fast_scan, name))
    copy = tmp_path.parent / (tmp_path.name + "_copy")
    import shutil

    shutil.copytree(tmp_path, copy)
    with _open(tmp_path, False, monkeypatch) as slow, _open(copy, True, monkeypatch) as fast:
        assert _state(fast.state)["ids"] == _state(slow.state)["ids"]
        assert [(i.kind, i.offset) for i in fast.report.issues] == [
            (i.kind, i.offset) for i in slow.report.issues]
        assert fast.report.issues


def test_a_replayed_twice_run_keeps_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              ) -> None:
    v = np.random.default_rng(2).random((40, 8), dtype=np.float32)
    with Store.open(tmp_path) as st:
        for i in range(20):
            st.add(_row(i), v[i])
        for i in range(20):  # the same ids again (as a buggy writer would): first one stands
            st.add(_row(i, "changed text for a repeated id"), v[20 + i])
    with _open(tmp_path, True, monkeypatch) as fast:
        assert len(fast.state) == 20
        assert fast.state.text[0] != "changed text for a repeated id"
        np.testing.assert_array_equal(fast.state.vectors[:20], v[:20])

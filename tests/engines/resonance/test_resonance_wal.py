"""The write-ahead log: framing, rotation, manifests, torn tails and corruption in the middle."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from soul.engines.resonance import ConfigError, Store
from soul.engines.resonance.store.ops import Row
from soul.engines.resonance.store.recovery import scan_segment
from soul.engines.resonance.store.wal import SEGMENT_MAGIC, WalWriter, encode_entry


@pytest.fixture(autouse=True, params=["python", "kernels"])
def replay_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with both log walkers: the Python one and the numba one."""
    from soul.engines.resonance.store import recovery

    monkeypatch.setattr(recovery, "FAST_BYTES", 0 if request.param == "kernels" else 1 << 62)
    return request.param



def row(i: int) -> Row:
    return Row(f"m{i:06d}", 3, 0, time.time(), 0.7, 0.04, 0, f"memory number {i} here",
               ("t",), None, None, None)


def vec(i: int, dim: int = 8) -> np.ndarray:
    return np.random.default_rng(i).random(dim, dtype=np.float32)


def fill(path: Path, n: int, **config: object) -> None:
    with Store.open(path, compact_after=10**9, **config) as store:
        for i in range(n):
            store.add(row(i), vec(i))


def segments(path: Path) -> list[Path]:
    return sorted((path / "wal").glob("*.seg"))


def test_entry_round_trip(tmp_path: Path) -> None:
    seg = tmp_path / "a_000001.seg"
    seg.write_bytes(SEGMENT_MAGIC + encode_entry(1, 10, 1, b"hello") + encode_entry(2, 11, 4, b""))
    scan = scan_segment(seg)
    assert [(h, s, o, bytes(p)) for h, s, o, p in scan.entries] == [
        (10, 1, 1, b"hello"), (11, 2, 4, b"")]
    assert scan.damaged == []


def test_segments_rotate_and_manifest_records_them(tmp_path: Path) -> None:
    fill(tmp_path, 150, segment_bytes=4096)
    segs = segments(tmp_path)
    assert len(segs) >= 4
    manifest = json.loads(next((tmp_path / "wal").glob("*.manifest.json")).read_text())
    assert manifest["closed"] is True
    assert [s["name"] for s in manifest["segments"]] == [p.name for p in segs]
    assert sum(s["last_seq"] - s["first_seq"] + 1 for s in manifest["segments"]) == 150
    with Store.open(tmp_path) as store:
        assert len(store.state) == 150 and store.report.ok


@pytest.mark.parametrize("durability", ["fsync", "batch", "os"])
def test_durability_modes_all_recover(tmp_path: Path, durability: str) -> None:
    fill(tmp_path, 5, durability=durability)
    with Store.open(tmp_path) as store:
        assert sorted(store.state.rows) == [f"m{i:06d}" for i in range(5)]


def test_unknown_durability_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fsync, batch, os"):
        WalWriter(tmp_path, durability="sometimes")  # type: ignore[arg-type]


def test_batch_mode_syncs_in_the_background(tmp_path: Path) -> None:
    writer = WalWriter(tmp_path, durability="batch", sync_interval=0.01)
    writer.append(1, b"x" * 10)
    deadline = time.time() + 2
    while writer._dirty and time.time() < deadline:
        time.sleep(0.01)
    assert not writer._dirty
    writer.close()


def test_torn_tail_is_truncated_reported_and_kept(tmp_path: Path) -> None:
    fill(tmp_path, 10)
    seg = segments(tmp_path)[-1]
    good = seg.stat().st_size
    with open(seg, "ab") as fh:
        fh.write(encode_entry(11, 1, 1, b"z" * 100)[:50])  # a write cut short
    with Store.open(tmp_path) as store:
        assert len(store.state) == 10
        [issue] = store.report.issues
        assert issue.kind == "torn_tail" and issue.offset == good and issue.length == 50
        assert Path(issue.quarantined).read_bytes()[:2] == b"\xa7\x5e"
    assert seg.stat().st_size == good
    with Store.open(tmp_path) as store:  # repaired: nothing to report the second time
        assert store.report.ok
    # A crash's torn tail held nothing acknowledged: the kept bytes are no damage to check.
    assert Store.check(tmp_path).ok, Store.check(tmp_path).issues


@pytest.mark.parametrize("cut", [0, 3, len(SEGMENT_MAGIC)])
def test_a_segment_cut_inside_its_header_holds_nothing_and_is_no_damage(tmp_path: Path, cut: int) -> None:
    # SIGKILL right after a rotation created the next segment, before its header was written
    fill(tmp_path, 10)
    last = segments(tmp_path)[-1]
    instance, number = last.stem.rsplit("_", 1)
    torn = last.with_name(f"{instance}_{int(number) + 1:0{len(number)}d}.seg")
    torn.write_bytes(SEGMENT_MAGIC[:cut])
    with Store.open(tmp_path) as store:
        assert len(store.state) == 10
        assert store.report.ok, store.report.issues
    assert Store.check(tmp_path).ok


def test_flipped_byte_in_the_middle_is_quarantined_and_the_rest_kept(tmp_path: Path) -> None:
    fill(tmp_path, 20)
    seg = segments(tmp_path)[0]
    raw = bytearray(seg.read_bytes())
    entries = scan_segment(seg).entries
    victim = 7  # flip one byte inside the 8th entry's payload
    offset = bytes(raw).find(entries[victim][3].tobytes()) + 5
    raw[offset] ^= 0xFF
    seg.write_bytes(bytes(raw))
    with Store.open(tmp_path) as store:
        assert len(store.state) == 19
        assert "m000007" not in store.state.rows and "m000019" in store.state.rows
        issue, gap = store.report.issues  # the damage, and the seq it took with it
        assert issue.kind == "corrupt" and issue.path == str(seg)
        assert gap.kind == "seq_gap" and "from seq 7 to 9" in gap.detail
        assert "CRC32" in issue.detail
        kept = Path(issue.quarantined).read_bytes()
        assert raw[issue.offset : issue.offset + issue.length] == kept
    report = (tmp_path / "quarantine" / "report.jsonl").read_text().splitlines()
    assert json.loads(report[0])["offset"] == issue.offset
    check = Store.check(tmp_path)
    assert not check.ok and check.issues[0].offset == issue.offset


def test_garbage_length_field_does_not_crash(tmp_path: Path) -> None:
    fill(tmp_path, 6)
    seg = segments(tmp_path)[0]
    raw = bytearray(seg.read_bytes())
    raw[len(SEGMENT_MAGIC) + 2 : len(SEGMENT_MAGIC) + 6] = b"\xff\xff\xff\x7f"
    seg.write_bytes(bytes(raw))
    with Store.open(tmp_path) as store:
        assert len(store.state) == 5
        assert [i.kind for i in store.report.issues] == ["corrupt", "seq_gap"]


def test_a_live_writers_tail_is_left_alone(tmp_path: Path) -> None:
    live = Store.open(tmp_path, durability="fsync")
    live.add(row(1), vec(1))
    seg = segments(tmp_path)[-1]
    with open(seg, "ab") as fh:  # looks like a write in progress
        fh.write(b"\xa7\x5e\x10")
    size = seg.stat().st_size
    with Store.open(tmp_path) as other:
        assert "m000001" in other.state.rows
        assert other.report.ok and other.report.live_instances == {live.writer.instance}
    assert seg.stat().st_size == size
    live.close()


def test_check_reports_a_missing_sealed_segment(tmp_path: Path) -> None:
    fill(tmp_path, 150, segment_bytes=4096)
    segments(tmp_path)[1].unlink()
    kinds = {i.kind for i in Store.check(tmp_path).issues}
    assert {"missing_segment", "seq_gap"} <= kinds


def test_check_reports_but_never_repairs(tmp_path: Path) -> None:
    fill(tmp_path, 4)
    seg = segments(tmp_path)[-1]
    with open(seg, "ab") as fh:
        fh.write(b"\xa7\x5e\x01\x02")
    size = seg.stat().st_size
    report = Store.check(tmp_path)
    assert [i.kind for i in report.issues] == ["torn_tail"] and report.entries == 4
    assert seg.stat().st_size == size and not (tmp_path / "quarantine").exists()

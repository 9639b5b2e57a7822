"""`soul memory ingest|recall|stats|check` on a real field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soul.cli.main import main

pytest.importorskip("onnxruntime")


def test_ingest_recall_stats_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.md").write_text("# Cats\n\nMiso is a tabby cat who likes boxes.\n\nShe sleeps on the radiator.\n")
    (tmp_path / "items.jsonl").write_text('{"text": "The release is planned for March.", "kind": "milestone"}\n"Standup is at nine."\n"tiny"\n')
    (tmp_path / "lines.txt").write_text("Ada builds compilers for a living.\n\nBo writes poetry on weekends.\n")
    field = str(tmp_path / "field")
    assert main(["memory", "ingest", str(tmp_path / "notes.md"), "--field", field]) == 0
    assert main(["memory", "ingest", str(tmp_path / "items.jsonl"), "--field", field, "--tag", "work"]) == 0
    out = capsys.readouterr().out
    assert "2 of 3 remembered" in out and "1 refused" in out
    assert main(["memory", "ingest", str(tmp_path / "lines.txt"), "--field", field]) == 0
    capsys.readouterr()
    assert main(["memory", "recall", "which cat likes boxes", "--field", field, "-k", "2", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["text"] == "Cats: Miso is a tabby cat who likes boxes."
    assert {"semantic", "keyword"} <= set(hits[0]["components"])
    assert main(["memory", "recall", "release", "--field", field, "--mode", "keyword"]) == 0
    assert "[milestone] The release is planned for March." in capsys.readouterr().out
    assert main(["memory", "recall", "what does Miso like", "--field", field, "--mode", "resonate", "--explain", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "phases: semantic, keyword" in out and "spreading:" in out
    assert " 1. " in out and "Miso is a tabby cat who likes boxes." in out.split(" 2. ")[0]
    assert "hybrid " in out and "factors: " in out
    assert main(["memory", "stats", "--field", field]) == 0
    assert json.loads(capsys.readouterr().out)["memories"] == 6
    assert main(["memory", "check", "--field", field]) == 0
    assert "ok" in capsys.readouterr().out


def test_check_reports_a_damaged_segment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    field = tmp_path / "field"
    (tmp_path / "a.txt").write_text("\n".join(f"memory number {i} about something specific" for i in range(30)))
    assert main(["memory", "ingest", str(tmp_path / "a.txt"), "--field", str(field)]) == 0
    segment = max(field.rglob("*.seg"), key=lambda p: p.stat().st_size)
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["memory", "check", "--field", str(field)]) == 1
    out = capsys.readouterr().out
    assert segment.name in out and "problem" in out


def test_a_bad_jsonl_line_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.jsonl").write_text('"fine line here"\n{not json\n')
    assert main(["memory", "ingest", str(tmp_path / "bad.jsonl"), "--field", str(tmp_path / "f")]) == 1
    assert "bad.jsonl:2: not JSON" in capsys.readouterr().err

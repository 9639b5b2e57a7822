"""`soul memory themes`: what a field is about, read-only, biggest theme first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soul.cli.main import main

pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")

NOTES = [
    *(f"The tomato seedlings in greenhouse bed {i} need compost and daily watering." for i in range(12)),
    *(f"Cello rehearsal number {i} with the orchestra went through the slow sonata movement." for i in range(12)),
]


def test_themes_lists_the_fields_topics_biggest_first_and_changes_nothing(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "notes.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in NOTES))
    field = tmp_path / "field"
    assert main(["memory", "ingest", str(source), "--field", str(field)]) == 0
    capsys.readouterr()
    assert main(["memory", "stats", "--field", str(field)]) == 0
    memories = json.loads(capsys.readouterr().out)["memories"]  # near-copies were merged on ingest
    before = sorted((p.name, p.stat().st_mtime_ns) for p in field.rglob("*") if p.is_file())
    capsys.readouterr()
    assert main(["memory", "themes", "--field", str(field), "--json"]) == 0
    themes = json.loads(capsys.readouterr().out)
    assert len(themes) >= 2 and sum(t["size"] for t in themes) == memories
    assert [t["size"] for t in themes] == sorted((t["size"] for t in themes), reverse=True)
    words = " ".join(t["text"] for t in themes[:2])
    assert "tomato" in words and "Cello" in words  # the two topics, each by its representative
    assert main(["memory", "themes", "--field", str(field), "-n", "1"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1
    assert sorted((p.name, p.stat().st_mtime_ns) for p in field.rglob("*") if p.is_file()) == before

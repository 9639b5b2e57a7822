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


@pytest.mark.parametrize("verb", [["recall", "cats"], ["stats"], ["check"]])
def test_read_only_verbs_never_create_a_field(verb: list[str], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 12.15: --field TYPO used to create an empty field and answer "ok"."""
    typo = tmp_path / "feild"
    assert main(["memory", *verb, "--field", str(typo)]) == 1
    err = capsys.readouterr().err
    assert "names no folder" in err and "never create" in err and "Traceback" not in err
    assert not typo.exists()
    typo.mkdir()  # an existing folder that is not a field is refused too, and left empty
    assert main(["memory", *verb, "--field", str(typo)]) == 1
    assert "is not a memory field" in capsys.readouterr().err
    assert list(typo.iterdir()) == []


def test_ingest_says_how_many_were_new_and_merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.txt").write_text("Miso is a tabby cat who likes boxes.\n" * 3 + "Bo writes poetry on weekends.\n")
    assert main(["memory", "ingest", str(tmp_path / "a.txt"), "--field", str(tmp_path / "f")]) == 0
    assert "4 of 4 remembered into" in (out := capsys.readouterr().out)
    assert "(2 new, 2 merged into near-duplicates)" in out


def test_ingest_of_a_non_utf8_file_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "latin.txt").write_bytes("first line is fine\nsecond: caf\xe9 au lait\n".encode("latin-1"))
    assert main(["memory", "ingest", str(tmp_path / "latin.txt"), "--field", str(tmp_path / "f")]) == 1
    err = capsys.readouterr().err
    assert "latin.txt:2: not UTF-8" in err and "Traceback" not in err


@pytest.mark.parametrize(("line", "says"), [
    ('{"text": "a fine memory here", "tags": 5}', "tags must be"),
    ('{"text": "a fine memory here", "confidence": "high"}', "confidence must be"),
    ('{"text": "a fine memory here", "kind": "nonsense"}', "unknown memory kind"),
    ('{"text": "a fine memory here", "meta": [1]}', "meta must be"),
    ('{"text": "a fine memory here", "colour": "red"}', "unknown item key"),
    ('{"text": "a fine memory here", "embedding": "x"}', "embedding must be"),
    ("[" * 100_000, "not JSON"),
])
def test_ingest_of_a_bad_jsonl_field_names_the_line(line: str, says: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.jsonl").write_text('"a first fine line"\n' + line + "\n")
    assert main(["memory", "ingest", str(tmp_path / "x.jsonl"), "--field", str(tmp_path / "f")]) == 1
    err = capsys.readouterr().err
    assert "x.jsonl:2: " in err and says in err and "Traceback" not in err


@pytest.mark.parametrize("k", ["-1", "0", "10000000000", "ten"])
def test_recall_k_is_bounded(k: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["memory", "recall", "cats", "--field", str(tmp_path), "-k", k])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument -k" in err and "Traceback" not in err


def _tree(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every file and folder under root: size, mtime and (files) the bytes."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def _kill_a_writer(field: Path) -> str:
    """A writer killed before closing (manifest open, lock file left) whose last segment
    then ends in a torn entry; returns that segment's name."""
    import subprocess
    import sys

    code = ("import os, sys, numpy as np\nfrom soul.engines.resonance import Field\n"
            "f = Field.open(sys.argv[1], embedder=None, durability='fsync', entities=False)\n"
            "v = np.zeros(384, np.float32); v[3] = 1.0\n"
            "f.remember('a memory written by a writer that is killed', embedding=v)\nos._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(field)], check=True, timeout=120)
    [active] = [m["active"] for p in (field / "wal").glob("*.manifest.json") if not (m := json.loads(p.read_text()))["closed"]]
    with open(field / "wal" / active, "ab") as fh:
        fh.write(b"\xa7\x5e\x40\x00\x00")  # an entry header cut short
    return str(active)


def test_read_only_verbs_change_no_file_of_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 12: recall, stats, find-symbol, search-symbols, callers and check open the field
    read-only: no writer instance, manifest, lock or segment is left, no index saved, and a
    dead writer's torn tail is reported, not repaired."""
    pytest.importorskip("tree_sitter")
    field = tmp_path / "field"
    (tmp_path / "notes.txt").write_text("Miso is a tabby cat who likes boxes.\nAda builds compilers for a living.\n"
                                        "Bo writes poetry on weekends.\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "shapes.py").write_text("def square(x):\n    return x * x\n\n\ndef area(r):\n    return 3.14 * square(r)\n")
    assert main(["memory", "ingest", str(tmp_path / "notes.txt"), "--field", str(field)]) == 0
    assert main(["memory", "index-code", str(src), "--field", str(field)]) == 0
    assert main(["memory", "recall", "cat", "--field", str(field)]) == 0  # a writable era's index, for contrast
    torn = _kill_a_writer(field)
    capsys.readouterr()
    before = _tree(field)
    assert main(["memory", "recall", "which cat likes boxes", "--field", str(field), "-k", "1"]) == 0
    assert "Miso is a tabby cat" in capsys.readouterr().out
    assert main(["memory", "recall", "poetry", "--field", str(field), "--mode", "keyword"]) == 0
    assert main(["memory", "recall", "what does Ada build", "--field", str(field), "--mode", "resonate", "--explain"]) == 0
    capsys.readouterr()
    assert main(["memory", "stats", "--field", str(field)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["read_only"] is True and stats["writer"] is None and stats["memories"] == 4
    assert [i for i in stats["recovery"]["issues"] if torn in i and i.startswith("torn_tail")]
    assert main(["memory", "find-symbol", "square", "--field", str(field)]) == 0
    assert main(["memory", "search-symbols", "square", "--field", str(field)]) == 0
    assert main(["memory", "callers", "square", "--field", str(field)]) == 0
    assert "shapes.py" in capsys.readouterr().out
    assert main(["memory", "check", "--field", str(field)]) == 1  # the torn tail, still there
    assert torn in capsys.readouterr().out
    assert _tree(field) == before


def test_find_symbol_on_a_field_without_code_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    field = tmp_path / "field"
    (tmp_path / "notes.txt").write_text("Miso is a tabby cat who likes boxes.\n")
    assert main(["memory", "ingest", str(tmp_path / "notes.txt"), "--field", str(field)]) == 0
    capsys.readouterr()
    before = _tree(field)
    assert main(["memory", "find-symbol", "square", "--field", str(field)]) == 1
    err = capsys.readouterr().err
    assert "holds no code index" in err and "index-code" in err and "Traceback" not in err
    assert _tree(field) == before


def test_ingest_no_context_embeds_each_item_alone_and_the_default_chains_them(tmp_path: Path) -> None:
    import numpy as np

    from soul.engines.resonance import Embedder, Field

    lines = ["Ada builds compilers for a living.", "Bo writes poetry on weekends."]
    (tmp_path / "lines.txt").write_text("\n\n".join(lines) + "\n")
    own = Embedder.default().embed(lines).vectors
    stored = {}
    for name, flags in (("alone", ["--no-context"]), ("chained", [])):
        field = tmp_path / name
        assert main(["memory", "ingest", str(tmp_path / "lines.txt"), "--field", str(field), *flags]) == 0
        with Field.open(field, read_only=True) as f:
            hits = {text: f.recall(text, k=1, mode="keyword")[0] for text in lines}
            stored[name] = {text: np.array(f.get(hit.id).embedding) for text, hit in hits.items()}
    for text, vector in zip(lines, own, strict=True):
        np.testing.assert_allclose(stored["alone"][text], vector, atol=1e-5)
    np.testing.assert_allclose(stored["chained"][lines[0]], own[0], atol=1e-5)  # a chain starts unmixed
    assert float(np.dot(stored["chained"][lines[1]], own[1])) < 0.99  # the second carries the first


def test_recall_lists_only_the_memories_that_matched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hybrid recall once padded its k with 0.000 rows: memories with no signal at all
    (tmp_path / "notes.txt").write_text("I love painting watercolours by the sea.\nMy cat is called Miso.\n"
                                        "The lighthouse was built in 1890.\nCompilers turn source into machine code.\n")
    field = str(tmp_path / "field")
    assert main(["memory", "ingest", str(tmp_path / "notes.txt"), "--field", field]) == 0
    capsys.readouterr()
    assert main(["memory", "recall", "my cat", "--field", field]) == 0
    (line,) = capsys.readouterr().out.splitlines()  # one hit, not four
    assert line.startswith(" 1. ") and line.endswith("[episode] My cat is called Miso.")
    assert "0.000" not in line
    assert main(["memory", "recall", "my cat", "--field", field, "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["text"] for h in hits] == ["My cat is called Miso."]
    assert all(h["score"] > 0 for h in hits)

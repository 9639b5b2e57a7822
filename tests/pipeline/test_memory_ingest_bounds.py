"""`soul memory ingest` is bounded: a memory holds at most MEMORY_CHARS characters (a longer
line or paragraph becomes several memories, split at a word boundary), the file is read in
pieces (never whole, never a whole line), a JSONL line too long to parse is refused at its
FILE:LINE, and the process's memory does not grow with the length of a line."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from soul.cli.memory_files import JSONL_LINE_BYTES, MEMORY_CHARS, read_items
from soul.errors import SoulError

TESTS = Path(__file__).resolve().parents[1]


def words(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 11))) for _ in range(3000)]
    return " ".join(rng.choice(vocabulary) for _ in range(n))


def texts(path: Path) -> list[str]:
    return [item["text"] for item in read_items(path, "episode", [])]


def test_a_long_line_becomes_several_memories_split_between_words(tmp_path: Path) -> None:
    line = words(20_000)
    (tmp_path / "long.txt").write_text("short line before it\n" + line + "\nshort line after it\n")
    found = texts(tmp_path / "long.txt")
    assert found[0] == "short line before it" and found[-1] == "short line after it"
    chunks = found[1:-1]
    assert len(chunks) > 1 and all(0 < len(c) <= MEMORY_CHARS for c in chunks)
    assert " ".join(chunks) == line  # nothing lost, no word cut in two
    assert all(len(c) > MEMORY_CHARS * 0.8 for c in chunks[:-1])  # full memories, not crumbs


def test_a_line_without_spaces_is_cut_at_the_cap(tmp_path: Path) -> None:
    (tmp_path / "blob.txt").write_text("x" * (MEMORY_CHARS * 3 + 5) + "\n")
    assert [len(c) for c in texts(tmp_path / "blob.txt")] == [MEMORY_CHARS] * 3 + [5]


def test_multibyte_text_split_across_read_pieces_stays_whole(tmp_path: Path) -> None:
    line = " ".join(["żółć", "日本語のテキスト", "🙂🙃"] * 20_000)
    (tmp_path / "utf8.txt").write_text(line + "\n", encoding="utf-8")
    chunks = texts(tmp_path / "utf8.txt")
    assert " ".join(chunks) == line and all(len(c) <= MEMORY_CHARS for c in chunks)


def test_a_long_markdown_paragraph_is_split_and_keeps_its_heading(tmp_path: Path) -> None:
    body = words(5_000, seed=2)
    (tmp_path / "notes.md").write_text(f"# Garden\n\n{body}\n\nA short paragraph.\n")
    found = texts(tmp_path / "notes.md")
    assert len(found) > 2 and all(len(t) <= MEMORY_CHARS for t in found)
    assert all(t.startswith("Garden: ") for t in found)
    assert " ".join(t.removeprefix("Garden: ") for t in found[:-1]) == body
    assert found[-1] == "Garden: A short paragraph."


def test_a_jsonl_items_long_text_is_split_keeping_its_fields(tmp_path: Path) -> None:
    text = words(3_000, seed=3)
    (tmp_path / "items.jsonl").write_text(json.dumps({"text": text, "kind": "belief", "tags": ["t"]}) + "\n")
    items = list(read_items(tmp_path / "items.jsonl", "episode", []))
    assert len(items) > 1 and all(len(i["text"]) <= MEMORY_CHARS for i in items)
    assert all(i["kind"] == "belief" and i["tags"] == ["t"] for i in items)
    assert " ".join(i["text"] for i in items) == text


def test_a_jsonl_line_too_long_to_parse_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("w") as f:
        f.write('"a fine first line"\n')
        f.write(json.dumps({"text": "y " * (JSONL_LINE_BYTES // 2 + 10)}) + "\n")
    with pytest.raises(SoulError, match=r"huge\.jsonl:2: .*more than 1 MiB"):
        list(read_items(path, "episode", []))


def test_a_bad_byte_far_down_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "late.txt"
    path.write_bytes(b"".join(b"line %d of plain text\n" % i for i in range(1, 20_001)) + b"caf\xe9\n")
    with pytest.raises(SoulError, match=r"late\.txt:20001: not UTF-8 text \(byte 0xe9"):
        list(read_items(path, "episode", []))


def test_a_file_that_fails_late_writes_nothing(tmp_path: Path) -> None:
    from soul.cli.main import main

    pytest.importorskip("onnxruntime")
    path = tmp_path / "late.jsonl"
    path.write_text("".join(json.dumps(f"memory number {i} about the garden") + "\n" for i in range(600)) + "{oops\n")
    assert main(["memory", "ingest", str(path), "--field", str(tmp_path / "field")]) == 1
    assert not (tmp_path / "field").exists()


INGEST = """
import resource, sys
sys.path.insert(0, {words!r})
from word_embedder import WordEmbedder
import soul.engines.resonance as resonance
resonance.load_embedder = lambda spec=None, **options: WordEmbedder()  # no model: the test embedder
from soul.cli.main import main
code = main(["memory", "ingest", sys.argv[1], "--field", sys.argv[2], "--embedder", "words", "--no-context"])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)  # KiB on Linux
sys.exit(code)
"""


def _peak_kib(tmp_path: Path, source: Path, name: str) -> int:
    script = tmp_path / "ingest.py"
    script.write_text(INGEST.format(words=str(TESTS / "engines" / "resonance")))
    env = {**os.environ, "SOUL_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, str(script), str(source), str(tmp_path / name)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stderr.strip().splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB is Linux's")
def test_memory_stays_bounded_however_long_a_line_is(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    small = tmp_path / "small.txt"
    small.write_text(words(40_000, seed=5) + "\n")  # ~0.25 MB on one line
    big = tmp_path / "big.txt"
    with big.open("w") as f:  # ~4 MB on one line, written in pieces
        for seed in range(16):
            f.write(words(40_000, seed=seed) + " ")
        f.write("\n")
    grown = _peak_kib(tmp_path, big, "big") - _peak_kib(tmp_path, small, "small")
    added = big.stat().st_size - small.stat().st_size
    # one 4 MB memory took ~95 bytes of RAM per byte (a 20-50 MB line aborted the process);
    # bounded memories keep what the field itself holds
    assert grown * 1024 < 30 * added, f"peak RSS grew {grown} KiB for {added >> 10} KiB more input"

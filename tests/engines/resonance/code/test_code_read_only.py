"""A read-only CodeIndex (issue 12): every query answers, no file under the index changes
(SQLite's `-wal`/`-shm` files included), symbol vectors are not cached to the database, a
missing index is not created, and `index()` raises `ReadOnlyField`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("tree_sitter")

from letter_embedder import LetterEmbedder

from soul.engines.resonance import FieldNotFound, ReadOnlyField
from soul.engines.resonance.code import CodeIndex

FIXTURE = Path(__file__).parent / "fixture"

def tree(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns,
                                       p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def test_a_read_only_index_answers_and_changes_no_file(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(FIXTURE, src)
    with CodeIndex.open(tmp_path / "idx") as idx:
        idx.index(src)
    before = tree(tmp_path / "idx")
    assert set(before) == {"code.sqlite"}
    for _ in range(2):  # vectors computed read-only are not cached: computed again
        emb = LetterEmbedder()
        with CodeIndex.open(tmp_path / "idx", embedder=emb, read_only=True) as idx:
            assert [s.id for s in idx.find_symbol("geo::Circle")] == ["cpp/shapes.cpp#geo.Circle"]
            assert idx.search_symbols("total area", k=1)[0][0].qualified == "py.main.total_area"
            assert emb.calls == 2
            assert idx.symbol_callers("py.shapes.square")
            assert idx.stats()["calls"] == 54
            with pytest.raises(ReadOnlyField, match="cannot index a source tree"):
                idx.index(src)
        assert tree(tmp_path / "idx") == before


def test_a_read_only_open_never_creates_an_index(tmp_path: Path) -> None:
    with pytest.raises(FieldNotFound, match="holds no code index"):
        CodeIndex.open(tmp_path / "none", read_only=True)
    assert not (tmp_path / "none").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):  # a file in the way stays an OSError
        CodeIndex.open(tmp_path / "file" / "code", read_only=True)

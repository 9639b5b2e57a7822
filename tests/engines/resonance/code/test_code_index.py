"""CodeIndex: incremental indexing, skips, queries, symbol search, call-graph triplets in the
knowledge graph (with "as of" history), missing grammars, and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("tree_sitter")

from letter_embedder import LetterEmbedder

from soul.cli.main import main
from soul.engines.resonance.code import CodeIndex, CodeIndexMismatch, GrammarMissing
from soul.engines.resonance.code import languages as langs
from soul.engines.resonance.code.search import split_identifier

FIXTURE = Path(__file__).parent / "fixture"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "src")
    return tmp_path / "src"


def _bump(path: Path, text: str) -> None:
    """Rewrite a file so both its content and its mtime change."""
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))


def test_second_run_parses_nothing_and_an_edit_reparses_one_file(src: Path, tmp_path: Path) -> None:
    with CodeIndex.open(tmp_path / "idx") as idx:
        first = idx.index(src)
        assert (first.files_seen, first.files_parsed, first.files_skipped) == (11, 11, 0)
        assert (first.symbols, first.calls, first.resolved) == (95, 54, 42)
        again = idx.index(src)
        assert (again.files_parsed, again.files_removed, again.symbols, again.resolved) == (0, 0, 95, 42)
        # same bytes, new mtime: hashed, not parsed
        st = (src / "c/shapes.c").stat()
        os.utime(src / "c/shapes.c", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000))
        assert idx.index(src).files_parsed == 0
        main_py = src / "py/main.py"
        _bump(main_py, main_py.read_text() + "\n\ndef extra() -> float:\n    return square(2.0)\n")
        edited = idx.index(src)
        assert (edited.files_parsed, edited.symbols, edited.resolved) == (1, 96, 43)
        assert [c.caller for c in idx.symbol_callers("py.shapes.square")] == ["py/main.py#main", "py/main.py#extra", "py/shapes.py#Circle.area"]


def test_deleting_a_file_drops_its_symbols_and_unresolves_calls_into_it(src: Path, tmp_path: Path) -> None:
    with CodeIndex.open(tmp_path / "idx") as idx:
        idx.index(src)
        assert idx.symbol_callers("web.shapes.makeSquare")[0].caller == "web/app.ts#Board.area"
        (src / "web/shapes.js").unlink()
        report = idx.index(src)
        assert (report.files_removed, report.files_parsed) == (1, 0)
        assert idx.find_symbol("makeSquare") == []
        (call,) = [c for c in idx.symbol_callees("web.app.Board.area") if c.name == "makeSquare"]
        assert call.callee is None and call.reason == "external: imported from ./shapes"


def test_skips_are_counted_by_reason(src: Path, tmp_path: Path) -> None:
    (src / "notes.txt").write_text("not code")
    (src / "blob.py").write_bytes(b"x = 1\0\0\0")
    (src / "huge.py").write_text("x = 1\n" * 200_000)  # 1.2 MB
    for folder in ("node_modules/pkg", ".git", "venv", "build"):
        (src / folder).mkdir(parents=True)
        (src / folder / "hidden.py").write_text("def hidden():\n    pass\n")
    (src / "myenv").mkdir()
    (src / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (src / "myenv" / "lib.py").write_text("def in_venv():\n    pass\n")
    with CodeIndex.open(tmp_path / "idx") as idx:
        report = idx.index(src)
        assert report.files_seen == 14  # 11 + the three above; skipped folders never entered
        assert report.skipped == {"unknown language": 1, "binary": 1, "larger than 1 MiB": 1}
        assert idx.find_symbol("hidden") == [] and idx.find_symbol("in_venv") == []


def test_another_root_needs_reset(src: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_text("def only_here():\n    pass\n")
    with CodeIndex.open(tmp_path / "idx") as idx:
        idx.index(src)
        with pytest.raises(CodeIndexMismatch, match="--reset"):
            idx.index(other)
        report = idx.index(other, reset=True)
        assert report.symbols == 1 and [s.name for s in idx.find_symbol("only_here")] == ["only_here"]


def test_find_symbol_callers_and_callees(src: Path, tmp_path: Path) -> None:
    with CodeIndex.open(tmp_path / "idx") as idx:
        idx.index(src)
        assert [s.id for s in idx.find_symbol("Geometry::Circle")] == ["ruby/shapes.rb#Geometry.Circle"]
        assert [s.id for s in idx.find_symbol("py/shapes.py#Circle.area")] == ["py/shapes.py#Circle.area"]
        assert {s.language for s in idx.find_symbol("Circle")} == {"cpp", "csharp", "go", "java", "python", "ruby", "rust"}
        assert [(c.caller, c.line) for c in idx.symbol_callers("rust.shapes.Circle.area")] == [("rust/shapes.rs#biggest", 45)]
        callees = idx.symbol_callees("py.main.main")
        assert [(c.name, c.callee) for c in callees] == [
            ("Circle", "py/shapes.py#Circle"), ("print", None), ("total_area", "py/main.py#total_area"),
            ("describe", "py/shapes.py#Shape.describe"), ("print", None), ("square", "py/shapes.py#square"),
        ]
        assert idx.symbol_callers("no_such_symbol") == []


def test_split_identifier() -> None:
    assert split_identifier("parseHTTPResponse_v2") == "parse HTTP Response v 2"
    assert split_identifier("total_area") == "total area"


def test_search_symbols_by_words_of_names(src: Path, tmp_path: Path) -> None:
    with CodeIndex.open(tmp_path / "idx") as idx:
        idx.index(src)
        top = idx.search_symbols("total area", k=3)
        assert top[0][0].qualified == "py.main.total_area" and top[0][1] == pytest.approx(1.0)
        assert idx.search_symbols("make square", k=1)[0][0].qualified == "web.shapes.makeSquare"
        assert idx.search_symbols("plane shape", k=1)[0][0].qualified == "py.shapes.Shape"  # docstring
        scores = [s for _, s in idx.search_symbols("circle", k=10)]
        assert scores == sorted(scores, reverse=True)
        assert idx.search_symbols("zzzz", k=5) == []


def test_search_fuses_embedding_cosine_and_caches_vectors(src: Path, tmp_path: Path) -> None:
    emb = LetterEmbedder()
    with CodeIndex.open(tmp_path / "idx", embedder=emb) as idx:
        idx.index(src)
        hits = idx.search_symbols("total area", k=3)
        assert hits[0][0].qualified == "py.main.total_area"
        assert emb.calls == 2  # every symbol once, then the query
    emb2 = LetterEmbedder()
    with CodeIndex.open(tmp_path / "idx", embedder=emb2) as idx:
        idx.search_symbols("total area", k=3)
        assert emb2.calls == 1  # symbol vectors came from the database


def test_call_graph_triplets_with_history(src: Path, tmp_path: Path) -> None:
    from soul.engines.resonance.graph.kg import KnowledgeGraph

    graph = KnowledgeGraph.open(tmp_path / "graph", flush_interval=None)
    try:
        with CodeIndex.open(tmp_path / "idx", graph=graph) as idx:
            idx.index(src)
            calls = {(t.subject, t.object) for t in graph.triplets(predicate="calls")}
            assert ("py.main.main", "py.shapes.square") in calls
            assert ("rust.shapes.biggest", "rust.shapes.Circle.area") in calls
            assert {(t.subject, t.object) for t in graph.triplets(subject="web.app.Board", predicate="inherits")} == {
                ("web.app.Board", "web.app.Named"), ("web.app.Board", "web.shapes.Shape")}
            assert ("py.shapes.Circle", "py.shapes.Circle.area") in {(t.subject, t.object) for t in graph.triplets(predicate="contains")}
            assert ("py/main.py", "shapes") in {(t.subject, t.object) for t in graph.triplets(predicate="imports")}
            before = time.time()
            time.sleep(0.01)
            main_py = src / "py/main.py"
            _bump(main_py, main_py.read_text().replace("print(square(3.0), shapes.Color.RED)", "print(shapes.Color.RED)"))
            idx.index(src)
            now = {(t.subject, t.object) for t in graph.triplets(predicate="calls")}
            assert ("py.main.main", "py.shapes.square") not in now
            assert ("py.main.main", "py.shapes.Circle") in now  # unchanged edges stay valid
            then = {(t.subject, t.object) for t in graph.triplets(predicate="calls", as_of=before)}
            assert ("py.main.main", "py.shapes.square") in then
            again = idx.index(src)
            assert again.files_parsed == 0
            assert len(graph.triplets(predicate="calls")) == len(now)  # nothing re-related
    finally:
        graph.close()


def test_a_missing_grammar_names_the_package(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ruby = langs.spec_named("ruby")
    broken = type(ruby)(**{**ruby.__dict__, "module": "tree_sitter_ruby_not_installed"})
    monkeypatch.setitem(langs._BY_EXT, ".rb", broken)
    monkeypatch.setitem(langs._BY_NAME, "ruby", broken)
    monkeypatch.setattr(langs, "_PARSERS", {})  # parsers are cached per language
    with pytest.raises(GrammarMissing, match="pip install tree-sitter-ruby"):
        langs.parser_for(broken)
    with CodeIndex.open(tmp_path / "idx") as idx:
        report = idx.index(src)
    assert report.skipped == {"grammar missing: pip install tree-sitter-ruby": 1}
    assert report.files_parsed == 10


def test_cli(src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    field = str(tmp_path / "field")
    assert main(["memory", "index-code", str(src), "--field", field]) == 0
    out = capsys.readouterr().out
    assert "11 files seen, 11 parsed" in out and "95 symbols, 54 calls, 42 resolved (78%)" in out
    assert main(["memory", "index-code", str(src), "--field", field, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files_parsed"] == 0
    assert main(["memory", "find-symbol", "geo::Circle", "--field", field, "--json"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)] == ["cpp/shapes.cpp#geo.Circle"]
    assert main(["memory", "search-symbols", "total area", "--field", field, "-k", "1"]) == 0
    assert "py.main.total_area" in capsys.readouterr().out
    assert main(["memory", "callers", "py.shapes.square", "--field", field]) == 0
    assert capsys.readouterr().out.splitlines() == ["py/main.py:14  py/main.py#main", "py/shapes.py:30  py/shapes.py#Circle.area"]
    assert main(["memory", "callees", "web.shapes.Shape.describe", "--field", field, "--json"]) == 0
    assert [(c["name"], c["callee"], c["reason"]) for c in json.loads(capsys.readouterr().out)] == [
        ("format", None, "external: imported from ./util.js"), ("area", "web/shapes.js#Shape.area", "class scope")]
    assert main(["memory", "callers", "nope", "--field", field]) != 0
    assert "no symbol named 'nope'" in capsys.readouterr().err
    assert (tmp_path / "field" / "graph").is_dir()

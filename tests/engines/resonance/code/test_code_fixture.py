"""Code intelligence on the multi-language fixture: the exact symbols, call edges, unresolved
calls (with their reasons) and base types the index finds in all ten languages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("tree_sitter")

from soul.engines.resonance.code import CodeIndex

FIXTURE = Path(__file__).parent / "fixture"

SYMBOLS = {
    "c/shapes.c": [
        ('enum', 'kind', None, 5),
        ('struct', 'circle', None, 7),
        ('function', 'square', None, 11),
        ('function', 'circle_area', None, 15),
        ('function', 'circle_print', None, 19),
    ],
    "cpp/shapes.cpp": [
        ('enum', 'geo.Kind', None, 7),
        ('function', 'geo.square', None, 9),
        ('class', 'geo.Shape', None, 11),
        ('method', 'geo.Shape.area', 'geo.Shape', 13),
        ('method', 'geo.Shape.describe', 'geo.Shape', 14),
        ('class', 'geo.Circle', None, 17),
        ('method', 'geo.Circle.Circle', 'geo.Circle', 19),
        ('method', 'geo.Circle.area', 'geo.Circle', 26),
        ('struct', 'geo.Point', None, 30),
        ('method', 'geo.Point.norm', 'geo.Point', 32),
        ('function', 'main', None, 37),
    ],
    "csharp/Shapes.cs": [
        ('enum', 'Fixture.Sharp.Kind', None, 5),
        ('interface', 'Fixture.Sharp.IShape', None, 7),
        ('method', 'Fixture.Sharp.IShape.Area', 'Fixture.Sharp.IShape', 9),
        ('class', 'Fixture.Sharp.Base', None, 12),
        ('method', 'Fixture.Sharp.Base.Name', 'Fixture.Sharp.Base', 14),
        ('class', 'Fixture.Sharp.Circle', None, 17),
        ('method', 'Fixture.Sharp.Circle.Circle', 'Fixture.Sharp.Circle', 21),
        ('method', 'Fixture.Sharp.Circle.Area', 'Fixture.Sharp.Circle', 26),
        ('method', 'Fixture.Sharp.Circle.Describe', 'Fixture.Sharp.Circle', 31),
        ('class', 'Fixture.Sharp.Util', None, 37),
        ('method', 'Fixture.Sharp.Util.Square', 'Fixture.Sharp.Util', 39),
        ('method', 'Fixture.Sharp.Util.Total', 'Fixture.Sharp.Util', 44),
    ],
    "go/shapes.go": [
        ('interface', 'shapes.Shape', None, 10),
        ('method', 'shapes.Shape.Area', 'shapes.Shape', 11),
        ('struct', 'shapes.Base', None, 15),
        ('struct', 'shapes.Circle', None, 20),
        ('method', 'shapes.Circle.Area', 'shapes.Circle', 26),
        ('method', 'shapes.Circle.Describe', 'shapes.Circle', 31),
        ('function', 'shapes.Square', None, 36),
        ('function', 'shapes.NewCircle', None, 41),
        ('function', 'shapes.total', None, 45),
    ],
    "java/Shapes.java": [
        ('enum', 'fixture.shapes.Kind', None, 5),
        ('interface', 'fixture.shapes.Shape', None, 7),
        ('method', 'fixture.shapes.Shape.area', 'fixture.shapes.Shape', 8),
        ('class', 'fixture.shapes.Base', None, 11),
        ('method', 'fixture.shapes.Base.name', 'fixture.shapes.Base', 12),
        ('class', 'fixture.shapes.Circle', None, 17),
        ('method', 'fixture.shapes.Circle.Circle', 'fixture.shapes.Circle', 20),
        ('method', 'fixture.shapes.Circle.area', 'fixture.shapes.Circle', 24),
        ('method', 'fixture.shapes.Circle.describe', 'fixture.shapes.Circle', 28),
        ('class', 'fixture.shapes.Shapes', None, 33),
        ('method', 'fixture.shapes.Shapes.square', 'fixture.shapes.Shapes', 34),
        ('method', 'fixture.shapes.Shapes.total', 'fixture.shapes.Shapes', 38),
    ],
    "py/main.py": [
        ('function', 'py.main.total_area', None, 7),
        ('function', 'py.main.main', None, 11),
    ],
    "py/shapes.py": [
        ('enum', 'py.shapes.Color', None, 7),
        ('class', 'py.shapes.Shape', None, 12),
        ('method', 'py.shapes.Shape.area', 'py.shapes.Shape', 15),
        ('method', 'py.shapes.Shape.describe', 'py.shapes.Shape', 18),
        ('method', 'py.shapes.Shape.name', 'py.shapes.Shape', 21),
        ('class', 'py.shapes.Circle', None, 25),
        ('method', 'py.shapes.Circle.__init__', 'py.shapes.Circle', 26),
        ('method', 'py.shapes.Circle.area', 'py.shapes.Circle', 29),
        ('function', 'py.shapes.square', None, 33),
    ],
    "ruby/shapes.rb": [
        ('module', 'Geometry', None, 4),
        ('class', 'Geometry.Shape', 'Geometry', 5),
        ('method', 'Geometry.Shape.area', 'Geometry.Shape', 6),
        ('method', 'Geometry.Shape.describe', 'Geometry.Shape', 10),
        ('class', 'Geometry.Circle', 'Geometry', 15),
        ('method', 'Geometry.Circle.initialize', 'Geometry.Circle', 16),
        ('method', 'Geometry.Circle.area', 'Geometry.Circle', 20),
        ('method', 'Geometry.square', 'Geometry', 25),
        ('function', 'build', None, 30),
    ],
    "rust/shapes.rs": [
        ('enum', 'rust.shapes.Kind', None, 4),
        ('trait', 'rust.shapes.Shape', None, 9),
        ('method', 'rust.shapes.Shape.area', 'rust.shapes.Shape', 10),
        ('method', 'rust.shapes.Shape.describe', 'rust.shapes.Shape', 11),
        ('struct', 'rust.shapes.Circle', None, 17),
        ('method', 'rust.shapes.Circle.new', 'rust.shapes.Circle', 22),
        ('method', 'rust.shapes.Circle.area', 'rust.shapes.Circle', 28),
        ('method', 'rust.shapes.Circle.fmt', 'rust.shapes.Circle', 34),
        ('function', 'rust.shapes.square', None, 39),
        ('function', 'rust.shapes.biggest', None, 43),
    ],
    "web/app.ts": [
        ('enum', 'web.app.Mode', None, 4),
        ('interface', 'web.app.Named', None, 9),
        ('method', 'web.app.Named.label', 'web.app.Named', 10),
        ('class', 'web.app.Board', None, 13),
        ('method', 'web.app.Board.label', 'web.app.Board', 16),
        ('method', 'web.app.Board.area', 'web.app.Board', 20),
        ('function', 'web.app.run', None, 25),
        ('function', 'web.app.helper', None, 30),
    ],
    "web/shapes.js": [
        ('class', 'web.shapes.Shape', None, 4),
        ('method', 'web.shapes.Shape.area', 'web.shapes.Shape', 5),
        ('method', 'web.shapes.Shape.describe', 'web.shapes.Shape', 9),
        ('class', 'web.shapes.Square', None, 14),
        ('method', 'web.shapes.Square.constructor', 'web.shapes.Square', 15),
        ('method', 'web.shapes.Square.area', 'web.shapes.Square', 20),
        ('function', 'web.shapes.makeSquare', None, 25),
        ('function', 'web.shapes.double', None, 29),
    ],
}
# (caller id, called name, line, callee id), in file order
EDGES = [
    ('c/shapes.c#circle_area', 'square', 16, 'c/shapes.c#square'),
    ('c/shapes.c#circle_print', 'circle_area', 20, 'c/shapes.c#circle_area'),
    ('cpp/shapes.cpp#geo.Shape.describe', 'area', 14, 'cpp/shapes.cpp#geo.Shape.area'),
    ('cpp/shapes.cpp#geo.Circle.area', 'square', 27, 'cpp/shapes.cpp#geo.square'),
    ('cpp/shapes.cpp#geo.Point.norm', 'square', 32, 'cpp/shapes.cpp#geo.square'),
    ('cpp/shapes.cpp#geo.Point.norm', 'square', 32, 'cpp/shapes.cpp#geo.square'),
    ('cpp/shapes.cpp#main', 'area', 39, 'cpp/shapes.cpp#geo.Circle.area'),
    ('csharp/Shapes.cs#Fixture.Sharp.Circle.Area', 'Square', 28, 'csharp/Shapes.cs#Fixture.Sharp.Util.Square'),
    ('csharp/Shapes.cs#Fixture.Sharp.Circle.Describe', 'Name', 33, 'csharp/Shapes.cs#Fixture.Sharp.Base.Name'),
    ('csharp/Shapes.cs#Fixture.Sharp.Circle.Describe', 'Area', 33, 'csharp/Shapes.cs#Fixture.Sharp.Circle.Area'),
    ('csharp/Shapes.cs#Fixture.Sharp.Util.Total', 'Area', 46, 'csharp/Shapes.cs#Fixture.Sharp.Circle.Area'),
    ('csharp/Shapes.cs#Fixture.Sharp.Util.Total', 'Circle', 46, 'csharp/Shapes.cs#Fixture.Sharp.Circle'),
    ('go/shapes.go#Circle.Area', 'Square', 27, 'go/shapes.go#Square'),
    ('go/shapes.go#Circle.Describe', 'Area', 32, 'go/shapes.go#Circle.Area'),
    ('go/shapes.go#total', 'NewCircle', 50, 'go/shapes.go#NewCircle'),
    ('java/Shapes.java#Circle.area', 'square', 25, 'java/Shapes.java#Shapes.square'),
    ('java/Shapes.java#Circle.describe', 'name', 29, 'java/Shapes.java#Base.name'),
    ('java/Shapes.java#Circle.describe', 'area', 29, 'java/Shapes.java#Circle.area'),
    ('java/Shapes.java#Shapes.total', 'area', 41, 'java/Shapes.java#Shape.area'),
    ('java/Shapes.java#Shapes.total', 'area', 43, 'java/Shapes.java#Circle.area'),
    ('java/Shapes.java#Shapes.total', 'Circle', 43, 'java/Shapes.java#Circle'),
    ('py/main.py#main', 'Circle', 12, 'py/shapes.py#Circle'),
    ('py/main.py#main', 'total_area', 13, 'py/main.py#total_area'),
    ('py/main.py#main', 'describe', 13, 'py/shapes.py#Shape.describe'),
    ('py/main.py#main', 'square', 14, 'py/shapes.py#square'),
    ('py/shapes.py#Shape.describe', 'name', 19, 'py/shapes.py#Shape.name'),
    ('py/shapes.py#Shape.describe', 'area', 19, 'py/shapes.py#Shape.area'),
    ('py/shapes.py#Circle.area', 'square', 30, 'py/shapes.py#square'),
    ('ruby/shapes.rb#Geometry.Shape.describe', 'area', 11, 'ruby/shapes.rb#Geometry.Shape.area'),
    ('ruby/shapes.rb#Geometry.Circle.area', 'square', 21, 'ruby/shapes.rb#Geometry.square'),
    ('ruby/shapes.rb#build', 'describe', 31, 'ruby/shapes.rb#Geometry.Shape.describe'),
    ('ruby/shapes.rb#build', 'Circle', 31, 'ruby/shapes.rb#Geometry.Circle'),
    ('rust/shapes.rs#Shape.describe', 'area', 12, 'rust/shapes.rs#Shape.area'),
    ('rust/shapes.rs#Circle.area', 'square', 29, 'rust/shapes.rs#square'),
    ('rust/shapes.rs#biggest', 'new', 44, 'rust/shapes.rs#Circle.new'),
    ('rust/shapes.rs#biggest', 'area', 45, 'rust/shapes.rs#Circle.area'),
    ('web/app.ts#Board.area', 'makeSquare', 21, 'web/shapes.js#makeSquare'),
    ('web/app.ts#run', 'Board', 26, 'web/app.ts#Board'),
    ('web/app.ts#run', 'area', 27, 'web/app.ts#Board.area'),
    ('web/app.ts#run', 'helper', 27, 'web/app.ts#helper'),
    ('web/shapes.js#Shape.describe', 'area', 10, 'web/shapes.js#Shape.area'),
    ('web/shapes.js#makeSquare', 'Square', 26, 'web/shapes.js#Square'),
]
# (caller id, called name, line, why it is not resolved), in file order
UNRESOLVED = [
    ('c/shapes.c#circle_print', 'printf', 20, 'not in the index (builtin or external)'),
    ('cpp/shapes.cpp#geo.Shape.describe', 'to_string', 14, 'not in the index (builtin or external)'),
    ('cpp/shapes.cpp#main', 'static_cast', 39, 'not in the index (builtin or external)'),
    ('go/shapes.go#Circle.Describe', 'Sprintf', 32, 'external: fmt.Sprintf (module fmt is not in the index)'),
    ('go/shapes.go#total', 'Area', 48, "ambiguous: receiver 's' of unknown type, 2 methods named 'Area'"),
    ('go/shapes.go#total', 'Area', 50, "ambiguous: receiver 'NewCircle(1)' of unknown type, 2 methods named 'Area'"),
    ('py/main.py#total_area', 'sum', 8, 'not in the index (builtin or external)'),
    ('py/main.py#total_area', 'area', 8, "ambiguous: receiver 'item' of unknown type, 2 methods named 'area'"),
    ('py/main.py#main', 'print', 13, 'not in the index (builtin or external)'),
    ('py/main.py#main', 'print', 14, 'not in the index (builtin or external)'),
    ('web/app.ts#Board.area', 'area', 21, "ambiguous: receiver 'makeSquare(3)' of unknown type, 3 methods named 'area'"),
    ('web/shapes.js#Shape.describe', 'format', 10, 'external: imported from ./util.js'),
]
BASES = {
    ('geo.Circle', 'Shape', 'cpp/shapes.cpp#geo.Shape'),
    ('Fixture.Sharp.Circle', 'Base', 'csharp/Shapes.cs#Fixture.Sharp.Base'),
    ('Fixture.Sharp.Circle', 'IShape', 'csharp/Shapes.cs#Fixture.Sharp.IShape'),
    ('shapes.Circle', 'Base', 'go/shapes.go#Base'),
    ('fixture.shapes.Circle', 'Base', 'java/Shapes.java#Base'),
    ('fixture.shapes.Circle', 'Shape', 'java/Shapes.java#Shape'),
    ('py.shapes.Color', 'Enum', None),
    ('py.shapes.Circle', 'Shape', 'py/shapes.py#Shape'),
    ('Geometry.Circle', 'Shape', 'ruby/shapes.rb#Geometry.Shape'),
    ('rust.shapes.Circle', 'Shape', 'rust/shapes.rs#Shape'),
    ('rust.shapes.Circle', 'fmt.Display', None),
    ('web.app.Board', 'Named', 'web/app.ts#Named'),
    ('web.app.Board', 'Shape', 'web/shapes.js#Shape'),
    ('web.shapes.Square', 'Shape', 'web/shapes.js#Shape'),
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> CodeIndex:
    tmp = tmp_path_factory.mktemp("code")
    shutil.copytree(FIXTURE, tmp / "src")
    idx = CodeIndex.open(tmp / "index")
    idx.index(tmp / "src")
    return idx


def test_every_language_is_indexed(index: CodeIndex) -> None:
    assert index.stats()["files"] == {
        "c": 1, "cpp": 1, "csharp": 1, "go": 1, "java": 1, "javascript": 1, "python": 2,
        "ruby": 1, "rust": 1, "typescript": 1,
    }


@pytest.mark.parametrize("file", sorted(SYMBOLS))
def test_symbols_per_file(index: CodeIndex, file: str) -> None:
    rows = index._conn.execute(
        "SELECT kind, qualified, parent, start_line FROM symbols WHERE file = ? ORDER BY start_line, qualified", (file,)
    ).fetchall()
    assert [tuple(r) for r in rows] == SYMBOLS[file]


def test_resolved_call_edges(index: CodeIndex) -> None:
    rows = index._conn.execute(
        "SELECT caller, name, line, callee FROM calls WHERE callee IS NOT NULL ORDER BY file, line, col"
    ).fetchall()
    assert [tuple(r) for r in rows] == EDGES


def test_unresolved_calls_keep_a_reason(index: CodeIndex) -> None:
    rows = index._conn.execute(
        "SELECT caller, name, line, reason FROM calls WHERE callee IS NULL ORDER BY file, line, col"
    ).fetchall()
    assert [tuple(r) for r in rows] == UNRESOLVED


def test_bases(index: CodeIndex) -> None:
    rows = index._conn.execute("SELECT child, base, base_id FROM inherits").fetchall()
    assert {tuple(r) for r in rows} == BASES


def test_signatures_docs_and_line_spans(index: CodeIndex) -> None:
    (area,) = [s for s in index.find_symbol("shapes.Circle.Area") if s.language == "go"]
    assert area.signature == "func (c *Circle) Area() float64"
    assert area.doc == "Area of the circle."
    assert (area.start_line, area.end_line) == (26, 28)
    (shape,) = index.find_symbol("py.shapes.Shape")
    assert shape.doc == "A plane shape." and shape.signature == "class Shape"
    (out_of_line,) = index.find_symbol("geo::Circle::area")
    assert out_of_line.signature == "double Circle::area() const" and out_of_line.parent == "geo.Circle"

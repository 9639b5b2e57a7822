"""A damaged soul.db (garbage bytes, a truncated file, a folder in its place) or a data home
that cannot be a folder is one clear StoreError naming the path and the fix (issue 12.13)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from souls import claudius_reply

from soul.cli.main import main
from soul.errors import StoreError
from soul.store import SessionStore


def garbage(db: Path) -> None:
    db.write_bytes(os.urandom(8192))


def folder(db: Path) -> None:
    db.mkdir()


def truncated(db: Path) -> None:
    with SessionStore.open(db.parent) as store:
        for i in range(40):  # enough rows that the schema and data span many pages
            store.create_session("claudius", f"user{i}", initial_state={"pad": "x" * 2000})
    for wal in db.parent.glob("soul.db-*"):
        wal.unlink()
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])


def header_only(db: Path) -> None:
    db.write_bytes(b"SQLite format 3\x00" + b"\xff" * 84)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "garbage": garbage, "folder": folder, "truncated": truncated, "header_only": header_only,
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_database_is_a_store_error_with_the_fix(damage: str, soul_home: Path) -> None:
    db = soul_home / "soul.db"
    DAMAGE[damage](db)
    with pytest.raises(StoreError) as caught, SessionStore.open() as store:
        store.sessions()
    message = str(caught.value)
    assert str(db) in message and "move it aside" in message


@pytest.mark.parametrize("damage", DAMAGE)
def test_the_cli_reports_a_damaged_database_in_one_line(
    damage: str, soul_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    DAMAGE[damage](soul_home / "soul.db")
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump([claudius_reply()]))
    for argv in (["sessions", "list"], ["user-model", "show", "claudius"], ["run", "claudius", "--script", str(script), "-m", "hi"]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err, argv
        assert err.startswith("soul: error: ") and err.count("\n") == 1, argv
    assert main(["sessions", "list"]) == 1
    assert "move it aside" in capsys.readouterr().err


def test_a_data_home_that_is_a_file_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("SOUL_HOME", str(home))
    assert main(["sessions", "list"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(home) in err and "SOUL_HOME" in err

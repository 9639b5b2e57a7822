"""The data home: where soul keeps sessions, logs and memory fields.

`$SOUL_HOME` if set, else `~/.soul`. Layout:

    soul.db                     SQLite (WAL): sessions, messages, state, user models, ...
    logs/<session>/*.jsonl      the per-session JSONL mirror of the database
    fields/<name>/              resonance memory fields (the engine's own segment files)

Every function takes an optional `home` so tests and embedders can point elsewhere without
touching the environment.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from soul.errors import StoreError

DB_NAME = "soul.db"

# Session ids become folder names under logs/, so only plain characters are allowed.
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def soul_home() -> Path:
    """`$SOUL_HOME` or `~/.soul`, created on demand."""
    configured = os.environ.get("SOUL_HOME")
    home = Path(configured).expanduser() if configured else Path.home() / ".soul"
    return _made(home, "$SOUL_HOME" if configured else "the data home")


def data_home(home: Path | None = None) -> Path:
    """`home` if given (created on demand), else `soul_home()`."""
    if home is None:
        return soul_home()
    return _made(Path(home).expanduser(), "the data home")


def _made(home: Path, what: str) -> Path:
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file in its place, no permission, a read-only disk
        raise StoreError(
            f"{what} {home} cannot be used as a folder ({error.strerror or error}): "
            "point SOUL_HOME at a writable folder, or move what is there aside"
        ) from error
    return home


def db_path(home: Path | None = None) -> Path:
    """The SQLite file."""
    return data_home(home) / DB_NAME


def logs_dir(home: Path | None = None) -> Path:
    """The folder holding one log folder per session (not created here)."""
    return data_home(home) / "logs"


def session_logs_dir(session_id: str, home: Path | None = None) -> Path:
    """The JSONL log folder of one session (not created here)."""
    if not valid_session_id(session_id):
        raise ValueError(f"not a valid session id: {session_id!r}")
    return logs_dir(home) / session_id


def fields_dir(home: Path | None = None) -> Path:
    """The folder of resonance memory fields (not created here)."""
    return data_home(home) / "fields"


def valid_session_id(session_id: str) -> bool:
    """True if the id is safe as a folder name: letters, digits, `_` and `-`, at most 64."""
    return bool(_SESSION_ID.match(session_id))

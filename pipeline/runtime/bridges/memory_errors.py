"""The memory engine's errors and the field's OSErrors as one-line `MemoryFieldError`s that
name the field, what failed and how to fix it (the memory bridge and `soul memory` share it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from soul.errors import MemoryFieldError

__all__ = ["field_errors"]


@contextmanager
def field_errors(path: Path, doing: str, *, named: str, elsewhere: str) -> Iterator[None]:
    """Raise a MemoryFieldError (from the original) for a `ResonanceError` or `OSError`
    raised inside: `named` is how the user named the field (`memory.field './m'`, `--field
    m`), `doing` what failed ("open", "recall from"), `elsewhere` the fix when the path
    cannot hold a field (e.g. it is a file)."""
    try:
        yield
    except OSError as exc:
        raise MemoryFieldError(_os_message(exc, path, doing, named, elsewhere)) from exc
    except Exception as exc:
        from soul.engines.resonance import ResonanceError

        if not isinstance(exc, ResonanceError):
            raise
        raise MemoryFieldError(_engine_message(exc, path, doing, named)) from exc


def _os_message(exc: OSError, path: Path, doing: str, named: str, elsewhere: str) -> str:
    blocker = _file_in_the_way(path)
    if blocker == path:
        return f"{named} is a file, not a folder: {elsewhere}"
    if blocker is not None:
        return f"{named}: {blocker} is a file, not a folder: {elsewhere}"
    where = exc.filename or path
    reason = exc.strerror or str(exc)
    if isinstance(exc, PermissionError):
        return f"{named}: cannot {doing} the field: permission denied on {where}: make it writable by this user, or {elsewhere}"
    if isinstance(exc, FileExistsError | NotADirectoryError | IsADirectoryError):
        return (f"{named}: cannot {doing} the field: {where}: {reason}: the field's files are damaged; "
                f"{_check_hint(path)}, or move the folder away to start a new field")
    return f"{named}: cannot {doing} the field: {where}: {reason}: check the disk (space, permissions), then try again"


def _engine_message(exc: Exception, path: Path, doing: str, named: str) -> str:
    from soul.engines.resonance import ConfigError, EmbedderError, StoreClosed, StoreError

    if isinstance(exc, StoreClosed):  # used after close(): a bug of the caller, not damage
        return f"{named}: cannot {doing} the field: {exc}"
    if isinstance(exc, ConfigError):
        return f"{named}: the memory engine refused its options: {exc}: fix the blueprint's `memory:` block"
    if isinstance(exc, EmbedderError):
        return (f"{named}: cannot {doing} the field: the embedding model failed: {exc}: check the model named by "
                "memory.embedder / --embedder, or reinstall the memory extra (pip install 'soulgraph[memory]'), "
                "or recall with mode: keyword, which needs no model")
    if isinstance(exc, StoreError):
        return f"{named}: cannot {doing} the field, it is damaged: {exc}: {_check_hint(path)}, restore the folder from a backup, or move it away to start a new field"
    return f"{named}: cannot {doing} the field: {exc}"


def _check_hint(path: Path) -> str:
    return f"`soul memory check --field {path}` lists what is wrong"


def _file_in_the_way(path: Path) -> Path | None:
    """The path itself or the nearest existing ancestor, if it is not a folder."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None

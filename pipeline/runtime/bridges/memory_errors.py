"""A memory field's failures in the user's terms: an engine `ResonanceError`, or an `OSError`
from the field's files, becomes a `MemoryFieldError` that names the field as the user named it,
says what failed and how to fix it, with the original as its `__cause__` (the memory bridge
and `soul memory` / `soul code` use it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from soul.errors import MemoryFieldError


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


class FieldErrors:
    """`field_errors` whose path and names (`names()`: path, named, elsewhere) are worked out
    only when something fails: entering and leaving cost next to nothing, where a turn's
    every recall and write enters one."""

    __slots__ = ("_doing", "_names")

    def __init__(self, names: Callable[[], tuple[Path, str, str]], doing: str) -> None:
        self._names = names
        self._doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        if exc is None or not isinstance(exc, Exception):
            return
        path, named, elsewhere = self._names()
        with field_errors(path, self._doing, named=named, elsewhere=elsewhere):
            raise exc.with_traceback(traceback)


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

"""Paths someone else wrote, confined to a folder, and the text files behind them, bounded.

A blueprint is shared text, and several of its parts name files: templates, includes and the
persona (`soul.language.files`), the spec files of `scripted:` and `replay:`
(`soul.providers.files`), the memory field's folder (`soul.runtime.memory`). Each needs the
same care: resolve the path with symlinks followed *before* deciding, refuse what lands outside
the folder, open only regular files (a FIFO blocks, `/dev/zero` never ends), read at most a
limit even if the file grows meanwhile, and decode UTF-8. The checks live here once; a refusal
is `Refused` with a `reason` code, and each caller turns the code into its own error type and
message.

A leaf: it imports nothing of soul.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

__all__ = ["Reason", "Refused", "confine", "read_text"]

Reason = Literal[
    "nul",  # a NUL character in the name (no system can open it)
    "absolute",  # an absolute name where only names relative to the folder are allowed
    "unresolvable",  # resolving failed: a symlink loop, a name too long for the system
    "outside",  # the real path lies outside the folder
    "missing",  # nothing at the path
    "unreadable",  # the system refused (permission denied, ...)
    "not_regular",  # a folder, a FIFO, a device, a socket
    "too_large",  # over the byte limit (`size` says how big, when known)
    "not_utf8",  # not UTF-8 text (`byte` is where decoding failed)
]


class Refused(Exception):
    """Why a path or file was refused.

    `reason` is the code callers map to their own messages; `path` is the path as resolved
    (as given when it could not be); `folder` the confining folder, resolved; `detail` the
    system's words (an OSError's text); `size` the file's size for `too_large` (None when it
    grew past the limit while being read); `byte` the offset where UTF-8 decoding failed.
    """

    def __init__(
        self,
        reason: Reason,
        path: Path,
        *,
        folder: Path | None = None,
        detail: str = "",
        size: int | None = None,
        byte: int | None = None,
    ) -> None:
        super().__init__(f"{path}: {reason}" + (f" ({detail})" if detail else ""))
        self.reason: Reason = reason
        self.path = path
        self.folder = folder
        self.detail = detail
        self.size = size
        self.byte = byte


def confine(folder: Path, name: str | Path, *, absolute: bool = False) -> Path:
    """The real path of `name` (relative to `folder`), which must lie inside `folder`.

    Symlinks are followed, so a link inside the folder to a file inside stays allowed and a
    link to anything outside is refused. The path need not exist (the caller decides what
    missing means). An absolute `name` is refused (`absolute`) unless `absolute` is true, and
    then it too must resolve inside. Raises `Refused` with reason nul, absolute,
    unresolvable or outside.
    """
    given = Path(name)
    if "\0" in str(name):
        raise Refused("nul", given)
    root = folder.resolve()
    if given.is_absolute() and not absolute:
        raise Refused("absolute", given, folder=root)
    try:
        real = (root / given).resolve()  # an absolute `given` stays itself
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before 3.13), ENAMETOOLONG
        raise Refused("unresolvable", given, folder=root, detail=str(exc)) from exc
    if not real.is_relative_to(root):
        raise Refused("outside", real, folder=root)
    return real


def _words(exc: OSError) -> str:
    return exc.strerror or str(exc)


def read_text(path: Path, limit: int) -> str:
    """The UTF-8 text of the regular file at `path`, of at most `limit` bytes.

    The file is stat'ed before it is opened (a device is never opened: opening some has
    effects), opened without blocking (a FIFO swapped in meanwhile cannot stall) and checked
    again on the open descriptor, then read bounded. Raises `Refused` with reason missing,
    unreadable, not_regular, too_large or not_utf8.
    """
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise Refused("missing", path, detail=_words(exc)) from exc
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise Refused("unreadable", path, detail=_words(exc) if isinstance(exc, OSError) else str(exc)) from exc
    _check_regular(path, info, limit)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:  # removed since the stat
        raise Refused("missing", path, detail=_words(exc)) from exc
    except OSError as exc:
        raise Refused("unreadable", path, detail=_words(exc)) from exc
    with os.fdopen(fd, "rb") as handle:
        _check_regular(path, os.fstat(fd), limit)  # the file opened is the file checked
        try:
            raw = handle.read(limit + 1)  # bounded even if the file grew since the stat
        except OSError as exc:
            raise Refused("unreadable", path, detail=_words(exc)) from exc
    if len(raw) > limit:
        raise Refused("too_large", path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused("not_utf8", path, byte=exc.start, detail=exc.reason) from exc


def _check_regular(path: Path, info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise Refused("not_regular", path)
    if info.st_size > limit:
        raise Refused("too_large", path, size=info.st_size)

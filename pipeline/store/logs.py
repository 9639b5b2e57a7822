"""The JSONL mirror of a session, in AgentCSD's layout: one folder per session, one file per layer.

    logs/<session>/external_dialog.jsonl    layer "external"
                   internal_dialog.jsonl    layer "internal"
                   subconscious.jsonl       layer "subconscious"
                   mood_and_criteria.jsonl  messages tagged "mood_and_criteria" (any layer),
                                            and each mood a cycle commit sets
                   context_summaries.jsonl  each history a background process summarised
                   events.jsonl             layer "system", and one "commit" line per commit

A message line is one JSON object: commit, turn, [cycle], time, tag, step, verb, content, meta;
`cycle` is there when its commit has one (a background process's cycle, or the cycle a turn
saw). A mood line: commit, turn, cycle, time, process, mood, criteria. A summary line: commit,
turn, cycle, time, process, layer, summary, cycle_from, cycle_to, digest. `commit` is the id of
the database commit the line came from; it is what makes repair exact.

The database is the truth; the logs are written after its transaction commits. A writer holds
the folder's lock (`.lock`, flock) and marks the lock file dirty while it appends (its one
byte "1"; "0" or an empty file is clean); the store advances its cursor
(`sessions.logged_commit`) and then clears the mark. Only a holder of the lock moves the
cursor: a commit takes the lock before its transaction (once the folder exists) and reads
the cursor in it, so the cursor it read is still true when it appends. If a process dies in
between, the next writer sees the mark and truncates every file back to the last line at or
below the cursor before rewriting the missing commits: nothing lost, nothing duplicated.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple, Protocol

import orjson
from orjson import dumps as _ORJSON

from soul.store.connection import Connection

try:  # POSIX; elsewhere the lock is a no-op and only one writer per home is safe.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

LOG_FILES = (
    "external_dialog",
    "internal_dialog",
    "subconscious",
    "mood_and_criteria",
    "context_summaries",
    "events",
)
LAYER_FILES: Mapping[str, str] = {
    "external": "external_dialog",
    "internal": "internal_dialog",
    "subconscious": "subconscious",
    "system": "events",
}
LOCK_NAME = ".lock"
_DIRTY, _CLEAN = b"1", b"0"  # the lock file's one byte


class LogLine(NamedTuple):
    """One line to append: which file, and its text (one JSON object, newline included; its
    "commit" orders it). A named tuple, not a dataclass: a commit makes one per line."""

    file: str
    text: str

    @property
    def data(self) -> dict[str, Any]:
        """The line's JSON object."""
        return json.loads(self.text)  # type: ignore[no-any-return]


def file_for(layer: str, tag: str) -> str:
    """The log file (without `.jsonl`) a message of this layer and tag goes to."""
    if tag == "mood_and_criteria":
        return "mood_and_criteria"
    return LAYER_FILES.get(layer, "events")


def line(
    commit: int,
    turn: int,
    time: float,
    tag: str,
    content: str,
    *,
    step: str | None = None,
    verb: str | None = None,
    meta: Mapping[str, Any] | None = None,
    cycle: int | None = None,
) -> dict[str, Any]:
    """The JSON object of one log line (the key order is the file's column order); `cycle`
    is left out when None, so a session without background processes logs as it always did."""
    data: dict[str, Any] = {"commit": commit, "turn": turn}
    if cycle is not None:
        data["cycle"] = cycle
    data.update(
        {"time": time, "tag": tag, "step": step, "verb": verb, "content": content}
    )
    data["meta"] = dict(meta or {})
    return data


_STRING = json.encoder.encode_basestring  # the string escaper the standard library uses (C, when built)
# The standard library's encoder, refusing NaN and the infinities (`_standard` writes them as null)
_CHECKED = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
# The same C encoder without the check for circular references (the id of every dict and list
# put in and taken out of a dict: ~10% of a trace's encoding); None without the accelerator.
_CHUNKS = json.encoder.c_make_encoder and json.encoder.c_make_encoder(
    None, json.JSONEncoder().default, _STRING, None, ":", ",", False, False, False
)
# orjson, as strict as the standard library is (a dataclass or a datetime is not JSON to it);
# `dumps_fields` reads dataclasses, so only datetimes pass through to its fallback
_STRICT = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
_FIELDS = orjson.OPT_PASSTHROUGH_DATETIME


def dumps(value: Any) -> str:
    """Compact standard JSON, as every column of the store and every log line keeps it: UTF-8
    text (not \\u escapes), no spaces; what `json.dumps(value, ensure_ascii=False,
    separators=(",", ":"))` writes, and raises, but for two things. A NaN or an infinity (which
    JSON has no number for: `json.dumps` writes `NaN`, which JSON.parse, jq and PostgreSQL's
    json refuse) is written as null. A float below 1e-4 may be written in another notation of
    the same number (`0.00001` for `1e-05`): it reads back as the very same float.

    orjson writes it (a claudius turn's commit encodes ~16 KB: 3.4x faster than the standard
    library's C encoder, which spent ~0.4 µs on every float's repr); what orjson does not take —
    a key that is not a string, an int past 64 bits, a lone surrogate, nesting past 254 levels,
    a value that holds itself, a type that is not JSON — the standard library's encoder writes
    or refuses, as before. Two types orjson writes that the standard library refused: a UUID
    (as its text) and an enum member (as its value)."""
    try:
        return _ORJSON(value, option=_STRICT).decode()
    except TypeError:  # (orjson.JSONEncodeError is one)
        return _standard(value)


def dumps_fields(value: Any) -> str:
    """`dumps(value.to_dict())` of a dataclass of JSON data (a turn's trace, `Commit.trace`),
    without making the dict: orjson reads the fields (nested dataclasses, tuples as arrays, as
    `dataclasses.asdict` makes them); what it does not take is encoded from `to_dict()`. A dict
    is `dumps`'s."""
    if type(value) is dict:
        return dumps(value)
    try:
        return _ORJSON(value, option=_FIELDS).decode()
    except TypeError:
        return dumps(value.to_dict())


def _standard(value: Any) -> str:
    """`dumps` by the standard library's encoder (what orjson does not take)."""
    try:
        if _CHUNKS is None:
            return _CHECKED(value)
        try:
            return "".join(_CHUNKS(value, 0))
        except RecursionError:  # a value that holds itself: encoded checked, for its ValueError
            return _CHECKED(value)
    except ValueError as error:
        if not str(error).startswith("Out of range float"):
            raise
    return _CHECKED(_finite(value, set()))


def _finite(value: Any, path: set[int]) -> Any:
    """`value` with every NaN and infinity in it null (a float key: its `json.dumps` name), as
    plain dicts and lists; a value that holds itself is refused as `json.dumps` refuses it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict | list | tuple):
        if id(value) in path:
            raise ValueError("Circular reference detected")
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return {_finite_key(k): _finite(v, path) for k, v in value.items()}
            return [_finite(v, path) for v in value]
        finally:
            path.discard(id(value))
    return value


def _finite_key(key: Any) -> Any:
    if isinstance(key, float) and not math.isfinite(key):
        return "NaN" if key != key else ("Infinity" if key > 0 else "-Infinity")
    return key


def encode(data: Mapping[str, Any]) -> str:
    """One JSONL line, newline included (UTF-8 text, not \\u escapes, so the logs read well)."""
    return dumps(data) + "\n"


def _text(value: Any) -> str:
    """A str (or None) field as `encode` writes it."""
    if type(value) is str:
        return _STRING(value)
    return "null" if value is None else dumps(value)


def commit_lines(
    commit: int,
    turn: int,
    time: float,
    event: Mapping[str, Any],
    messages: Sequence[Any],
    *,
    cycle: int | None = None,
    process: str | None = None,
    mood: Any = None,
    summaries: Sequence[Any] = (),
    metas: Sequence[str] | None = None,
    event_json: str | None = None,
) -> list[LogLine]:
    """The lines of one commit: its messages in order, its mood, its summaries, then its
    "commit" event.

    `messages` are `MessageRecord`s (anything with layer, tag, content, step, verb, meta);
    `mood` a `MoodRecord` or None; `summaries` `SummaryRecord`s (layer, summary, cycle_from,
    cycle_to, digest). `metas` and `event_json`, when given, are each message's meta and the
    event already encoded as `encode` encodes `dict(meta or {})` and `event` (what the store
    wrote to its rows): spliced in, not encoded again.

    Each line is exactly `encode(line(...))` (or `encode` of the mood's and summary's
    objects), built from its pieces: the head (commit, turn, cycle, time) is encoded once for
    all of them, each string field by the encoder's own escaper.
    """
    head: dict[str, Any] = {"commit": commit, "turn": turn}
    if cycle is not None:
        head["cycle"] = cycle
    head["time"] = time
    opening = dumps(head)[:-1]  # '{"commit":1,"turn":1,"time":...' without its '}'
    out: list[LogLine] = []
    for i, m in enumerate(messages):
        meta = metas[i] if metas is not None else dumps(dict(m.meta or {}))
        out.append(LogLine(
            file_for(m.layer, m.tag),
            f'{opening},"tag":{_text(m.tag)},"step":{_text(m.step)},"verb":{_text(m.verb)},'
            f'"content":{_text(m.content)},"meta":{meta}}}\n',
        ))
    shared = {"commit": commit, "turn": turn, "cycle": cycle, "time": time, "process": process}
    if mood is not None:
        out.append(
            LogLine("mood_and_criteria", encode({**shared, "mood": mood.mood, "criteria": mood.criteria}))
        )
    for s in summaries:
        summary = {"layer": s.layer, "summary": s.summary, "cycle_from": s.cycle_from,
                   "cycle_to": s.cycle_to, "digest": bool(s.digest)}
        out.append(LogLine("context_summaries", encode({**shared, **summary})))
    if event_json is None:
        event_json = dumps(dict(event))
    out.append(LogLine(
        "events",
        f'{opening},"tag":"commit","step":null,"verb":null,"content":{_text(event["kind"])},'
        f'"meta":{event_json}}}\n',
    ))
    return out


def pending_lines(
    conn: Connection, session_id: str, cursor: int
) -> tuple[list[LogLine], int]:
    """Rebuild from the database the lines of a session's commits after `cursor`.

    Returns the lines and the last commit id they cover (`cursor` if there are none). The
    lines are exactly what `commit_lines` wrote at commit time, so a repaired log reads as if
    nothing had happened.
    """
    conn.execute("BEGIN")  # one read snapshot: commits and their messages agree
    try:
        commits = conn.execute(
            "SELECT id, turn, time, meta, cycle, process FROM commits"
            " WHERE session_id = ? AND id > ? ORDER BY id",
            (session_id, cursor),
        ).fetchall()
        rows = conn.execute(
            "SELECT commit_id, layer, tag, content, step, verb, meta FROM messages"
            " WHERE session_id = ? AND commit_id > ? ORDER BY id",
            (session_id, cursor),
        ).fetchall()
        moods = conn.execute(
            "SELECT commit_id, mood, criteria FROM mood_and_criteria"
            " WHERE session_id = ? AND commit_id > ? ORDER BY id",
            (session_id, cursor),
        ).fetchall()
        summaries = conn.execute(
            "SELECT commit_id, layer, summary, cycle_from, cycle_to, digest"
            " FROM context_summaries WHERE session_id = ? AND commit_id > ? ORDER BY id",
            (session_id, cursor),
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    mood_of = {
        cid: SimpleNamespace(mood=mood, criteria=criteria) for cid, mood, criteria in moods
    }
    summaries_of: dict[int, list[SimpleNamespace]] = {}
    for cid, layer, summary, cycle_from, cycle_to, digest in summaries:
        summaries_of.setdefault(cid, []).append(
            SimpleNamespace(
                layer=layer, summary=summary, cycle_from=cycle_from, cycle_to=cycle_to,
                digest=digest,
            )
        )
    by_commit: dict[int, list[SimpleNamespace]] = {}
    for cid, layer, tag, content, step, verb, meta in rows:
        by_commit.setdefault(cid, []).append(
            SimpleNamespace(
                layer=layer, tag=tag, content=content, step=step, verb=verb, meta=json.loads(meta)
            )
        )
    lines: list[LogLine] = []
    for cid, turn, at, meta, cycle, process in commits:
        lines += commit_lines(
            cid, turn, at, json.loads(meta), by_commit.get(cid, []),
            cycle=cycle, process=process, mood=mood_of.get(cid),
            summaries=summaries_of.get(cid, ()),
        )
    return lines, (commits[-1][0] if commits else cursor)


class Kept(Protocol):
    """A folder's descriptors kept open between writers (`soul.store.descriptors.Kept`): the
    log files by name, the folder's path with a separator, and `let_go`, which a writer calls
    once its flock is let go."""

    files: dict[str, int]
    prefix: str

    def let_go(self) -> None: ...


class Writer:
    """The locked writer of one session's folder (see `locked`); a context manager, which
    releases the lock when it ends."""

    def __init__(self, folder: Path, lock: int, kept: Kept | None = None) -> None:
        self.folder = folder
        # the folder's path and a separator (worked out once for a folder's kept descriptors)
        self._prefix = kept.prefix if kept is not None else os.path.join(folder, "")
        self._lock = lock  # the lock file's descriptor (-1 once released)
        # the folder's descriptors when a store keeps them open (`Descriptors`): not closed here
        self._kept = kept
        # A lock file holding "1" means a writer died between appending and advancing the
        # cursor ("0" or empty: clean). The mark is a byte rewritten in place, not the file's
        # size: the size stays 1, so setting and clearing it change no size (on ext4 a size
        # change is a journal handle, which waits behind any other process's fsync).
        self.dirty = os.pread(lock, 1, 0) == _DIRTY

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Let go of the folder's lock (idempotent)."""
        lock, self._lock = self._lock, -1
        if lock >= 0:
            kept = self._kept
            try:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)
            finally:
                if kept is None:
                    os.close(lock)
                else:
                    kept.let_go()

    def mark_dirty(self) -> None:
        """Record that appends are under way (cleared by `mark_clean` once the cursor moved)."""
        if not self.dirty:
            os.pwrite(self._lock, _DIRTY, 0)
            self.dirty = True

    def mark_clean(self) -> None:
        if self.dirty:
            os.pwrite(self._lock, _CLEAN, 0)
            self.dirty = False

    def truncate_after(self, cursor: int) -> None:
        """Cut every file back to its last complete line with commit <= cursor."""
        for name in LOG_FILES:
            _truncate_after(self.folder / f"{name}.jsonl", cursor)

    def append(self, lines: Sequence[LogLine]) -> None:
        """Append lines to their files, one write per file (`os.write` on an O_APPEND
        descriptor: what a text file's close wrote, without building one)."""
        chunks: dict[str, list[str]] = {}
        for name, text in lines:
            found = chunks.get(name)
            if found is None:
                chunks[name] = [text]
            else:
                found.append(text)
        folder = self._prefix
        files = self._kept.files if self._kept is not None else None
        for name, parts in chunks.items():
            data = "".join(parts).encode("utf-8")
            fd = files.get(name, -1) if files is not None else -1
            if fd < 0:
                fd = os.open(f"{folder}{name}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
                if files is not None:
                    files[name] = fd  # kept open, for the folder's next commit
            try:
                while data:  # a regular file takes it all at once; a short write goes on
                    data = data[os.write(fd, data):]
            finally:
                if files is None:
                    os.close(fd)


def locked(folder: Path) -> Writer:
    """Wait for and hold the session folder's lock (the folder and its lock file made on
    demand): its `Writer`, which releases it (`with locked(folder) as writer: ...`)."""
    writer = _hold(folder, create=True)
    assert writer is not None  # (made on demand)
    return writer


def locked_if_made(folder: Path) -> Writer | None:
    """`locked`, or None when the folder is not made yet (a session never mirrored): nothing
    is made for a session that may not exist."""
    return _hold(folder, create=False)


def open_lock(folder: Path, *, create: bool) -> int | None:
    """The folder's lock file, opened (made if need be); None when the folder is not made and
    `create` is False."""
    path = os.path.join(folder, LOCK_NAME)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except FileNotFoundError:  # the folder is made on the session's first commit
        if not create:
            return None
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)


def _hold(folder: Path, *, create: bool) -> Writer | None:
    fd = open_lock(folder, create=create)
    if fd is None:
        return None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        return Writer(folder, fd)
    except BaseException:
        os.close(fd)  # closing drops the lock too
        raise


def _truncate_after(path: Path, cursor: int) -> None:
    # Lines are appended in commit order, so the lines to drop form a tail: stop at the first
    # line that is incomplete, unreadable, or from a commit past the cursor.
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    keep = 0
    while keep < len(data):
        end = data.find(b"\n", keep)
        if end < 0:
            break
        try:
            commit = int(json.loads(data[keep:end])["commit"])
        except (ValueError, KeyError, TypeError):
            break
        if commit > cursor:
            break
        keep = end + 1
    if keep < len(data):
        with open(path, "r+b") as f:
            f.truncate(keep)


def read(folder: Path, name: str) -> list[dict[str, Any]]:
    """The lines of one log file as objects (empty if the file does not exist)."""
    path = folder / f"{name}.jsonl"
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(text) for text in f if text.strip()]

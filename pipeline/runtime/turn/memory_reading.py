"""What a session's working memory reads as at the start of a turn — its regions (the entries
and their texts, the conversation's own left out) and its turns after the running summary —
kept between turns, so a turn reads only the entries the commits added since the last one.

A session's working memory only grows between turns (a commit appends its entries; the store
hands the next snapshot the same entries and the new ones after them), so what the last turn
read is extended: the turn's start costs what the last commit added, not the conversation's
length (`benchmarks/long_conversation.py`; docs/benchmarks.md). Anything
else — entries expired by the TTL, another store's session of the same id, a different user —
is read from the start, so the reading is always exactly `history_of` and the regions of the
whole snapshot (tests/pipeline/test_memory_reading.py holds them to it).

A reading is never changed once made (each extension is a new one sharing the unchanged
parts), so sessions on several threads may read at once; at most `KEPT_SESSIONS` readings
holding `KEPT_ENTRIES` entries in all are kept, the least recently used dropped first (the
store keeps the same entries decoded within a like budget: `store/reading.py`'s `SEEN_ROWS`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from soul.records import MemoryEntry
from soul.runtime.conversation import (
    HISTORY_TYPES,
    SUMMARY_TYPE,
    ConversationSummary,
    HistoryReading,
    HistoryTurn,
)

KEPT_SESSIONS = 1024  # at most this many sessions' readings are kept,
KEPT_ENTRIES = 16384  # holding at most this many working-memory entries in all


class MemoryReading:
    """One session's working memory, read: `memory`, the entries read (in stored order);
    `regions` and `texts`, each region's entries and their texts (the conversation's turns
    and summary left out, regions in the order they first appear); `history`, its turns."""

    __slots__ = ("history", "memory", "regions", "texts")

    def __init__(self, user: str) -> None:
        self.memory: tuple[MemoryEntry, ...] = ()
        self.regions: dict[str, tuple[MemoryEntry, ...]] = {}
        self.texts: dict[str, tuple[str, ...]] = {}
        self.history = HistoryReading(user)

    def extended(self, memory: tuple[MemoryEntry, ...], user: str) -> MemoryReading:
        """The reading of `memory` (`user`'s session): this one when it read exactly these
        entries; one that reads on from it when they begin with the entries it read; else one
        that reads them from the start."""
        read = self.memory
        if memory is read and user == self.history.user:
            return self
        n = len(read)
        if n and len(memory) >= n and user == self.history.user and memory[:n] == read:
            other = MemoryReading.__new__(MemoryReading)
            other.regions, other.texts, other.history = self.regions, self.texts, self.history.copy()
            added = memory[n:]
        else:
            other, added = MemoryReading(user), memory
        other._read(added)
        other.memory = memory
        return other

    def _read(self, entries: Sequence[MemoryEntry]) -> None:
        found: dict[str, list[MemoryEntry]] = {}
        for entry in entries:
            kind = entry.entry_type
            if kind not in HISTORY_TYPES and kind != SUMMARY_TYPE:
                found.setdefault(entry.region, []).append(entry)
        if found:  # the regions that grew, made again (the reading it came from keeps its own)
            regions, texts = dict(self.regions), dict(self.texts)
            for region, more in found.items():
                regions[region] = regions.get(region, ()) + tuple(more)
                texts[region] = texts.get(region, ()) + tuple([entry.content for entry in more])
            self.regions, self.texts = regions, texts
        self.history.read(entries)

    def turns(self) -> tuple[tuple[HistoryTurn, ...], ConversationSummary | None]:
        """The turns after the latest summary, and that summary (`history_of`)."""
        return self.history.result()


_kept: dict[str, MemoryReading] = {}
_held = [0]  # the entries the kept readings hold, in all
_lock = threading.Lock()


def kept_reading(session: str) -> MemoryReading | None:
    """The reading last kept for `session` (None: none is kept)."""
    return _kept.get(session)


def memory_reading(session: str, memory: tuple[MemoryEntry, ...], user: str) -> MemoryReading:
    """The reading of `session`'s working memory `memory`, going on from the last one kept for
    the session (see the module's docstring)."""
    with _lock:
        last = _kept.pop(session, None)
        if last is not None:
            _held[0] -= len(last.memory)
    reading = (last or MemoryReading(user)).extended(memory, user)
    size = len(reading.memory)
    if size > KEPT_ENTRIES:  # more than the whole budget: read from the start each turn
        return reading
    with _lock:
        old = _kept.pop(session, None)  # (kept meanwhile by a turn on another thread)
        if old is not None:
            _held[0] -= len(old.memory)
        _kept[session] = reading  # the most recently used, last
        _held[0] += size
        while _held[0] > KEPT_ENTRIES or len(_kept) > KEPT_SESSIONS:
            _held[0] -= len(_kept.pop(next(iter(_kept))).memory)
    return reading

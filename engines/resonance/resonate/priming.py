"""Session priming's memory: what each session saw recently and the topics it touches.

`Field.resonate(..., session=...)` boosts these (phases.prime); the runtime also feeds it the
memories a turn remembered. Kept in memory only, bounded in sessions and in memories each.
"""

from __future__ import annotations

from collections import Counter, deque
from operator import itemgetter

__all__ = ["SessionPrimer"]


class SessionPrimer:
    """Recent observations and active topics per session (in memory, bounded)."""

    def __init__(self, size: int = 50, sessions: int = 256) -> None:
        self.size = size
        self.sessions = sessions
        self._recent: dict[str, deque[str]] = {}
        self._topics: dict[str, Counter[str]] = {}

    def observe(self, session: str, memory_ids: list[str], topics: list[str] = ()) -> None:
        """Record memories the session saw (recalled, remembered) and the topics they touch."""
        if session not in self._recent and len(self._recent) >= self.sessions:
            oldest = next(iter(self._recent))  # dicts keep insertion order: drop the oldest
            self._recent.pop(oldest)
            self._topics.pop(oldest, None)
        recent = self._recent.setdefault(session, deque(maxlen=self.size))
        recent.extend(memory_ids)
        if topics:
            counts = self._topics.setdefault(session, Counter())
            for name in list(counts):  # older topics fade as new ones arrive
                counts[name] *= 0.8
                if counts[name] < 0.1:
                    del counts[name]
            for name in topics:  # Counter.update's counting, without its type checks
                counts[name] = counts.get(name, 0) + 1

    def recent(self, session: str) -> frozenset[str]:
        return frozenset(self._recent.get(session, ()))

    def topics(self, session: str, n: int = 10) -> dict[str, float]:
        counts = self._topics.get(session)
        if not counts:
            return {}
        # most_common(n) is heapq.nlargest, documented as sorted(..., reverse=True)[:n]: the
        # sort, in C, of the few dozen topics a session's decay keeps is the cheaper of the two
        top = sorted(counts.items(), key=itemgetter(1), reverse=True)[:n]
        best = top[0][1]
        return {name: c / best for name, c in top}

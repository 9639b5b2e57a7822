"""Hebbian updates, queued: resonance strengthens links between co-recalled memories without
waiting for the graph's writer lock.

`KnowledgeGraph.hebbian` queues the pairs among a query's top memories; `KnowledgeGraph.flush`
(or its background flusher) drains the queue into one log entry, each pair with its summed
delta. A deque's append and popleft are atomic, so queueing takes no lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ..errors import ConfigError
from .kg_state import check_name

__all__ = ["HEBBIAN_MAX_IDS", "HebbianQueue"]

HEBBIAN_MAX_IDS = 5  # pairs among the first five: at most C(5, 2) = 10 per call


class HebbianQueue:
    """Memory pairs waiting to be strengthened, with their deltas."""

    def __init__(self) -> None:
        self._queue: deque[tuple[tuple[tuple[str, str], ...], float]] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, memory_ids: Sequence[str], delta: float) -> None:
        """Queue every pair among the first `HEBBIAN_MAX_IDS` distinct ids; `ConfigError`
        unless 0 < delta <= 1 and those ids are valid node names."""
        if not (0 < delta <= 1):
            raise ConfigError(f"Hebbian delta {delta}: must be in (0, 1]")
        ids = list(dict.fromkeys(memory_ids))[:HEBBIAN_MAX_IDS]
        for mid in ids:
            check_name(mid, "memory id")
        pairs = tuple((a, b) if a < b else (b, a)
                      for i, a in enumerate(ids) for b in ids[i + 1 :])
        if pairs:
            self._queue.append((pairs, delta))  # atomic: no lock

    def drain(self) -> tuple[tuple[str, str, float], ...]:
        """Empty the queue: each pair once, with the sum of its queued deltas."""
        total: dict[tuple[str, str], float] = {}
        while self._queue:
            pairs, delta = self._queue.popleft()
            for pair in pairs:
                total[pair] = total.get(pair, 0.0) + delta
        return tuple((a, b, d) for (a, b), d in total.items())

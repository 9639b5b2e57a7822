"""The temporal knowledge graph: triplets, entity mentions, Hebbian links, spreading activation.

A graph is a directory with its own write-ahead log (`kg_log`). Every write is logged first,
then applied through the same `GraphState.apply` recovery uses. Reads (`triplets`, `spread`,
`attractors`, ...) take no lock: they read append-only or swapped-whole structures and
immutable `Adjacency` views (see `kg_state`, `adjacency`).

Nodes: ``m:<memory id>`` and ``e:<normalised entity>``. Edges: triplets (subject–object,
weight ≤ 1; Hebbian ``relates_to`` edges between memories decay with a half-life) and
mentions (memory–entity, weight 1). Spreading treats every edge as undirected.

Several processes (or several objects in one process) may open the same directory at once,
with the memory store's semantics: each open is its own writer instance, sees what the others
wrote before it opened (or before its last `refresh`), and never waits for them. Triplet ids
are content-addressed (`kg_state.triplet_id`), so they agree across writers without any
coordination. ``read_only=True`` opens no writer instance and changes no file: every read
works (`kg_read`), writes raise `ReadOnlyField`, and Hebbian updates are dropped.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ReadOnlyField, StoreClosed
from ..store.wal import Durability
from . import kg_log, kg_state
from .activation import Spread, SpreadConfig, spread_nodes
from .adjacency import Adjacency
from .hebbian import HebbianQueue
from .kg_read import GraphReads, MentionRows, UnknownTriplet
from .kg_snapshot import SnapshotLoader, read_covered, write_snapshot
from .kg_state import MEMORY_PREFIX, GraphState, Triplet, check_name, entity_key, node_key

__all__ = [
    "PREDICATES",
    "Adjacency",
    "KnowledgeGraph",
    "Spread",
    "SpreadConfig",
    "Triplet",
    "UnknownTriplet",
    "spread_nodes",
]

PREDICATES = ("calls", "contains", "imports", "inherits", "corrects", "relates_to", "mentions")
_PREDICATE = re.compile(r"^[a-z][a-z0-9_]*$")


class KnowledgeGraph(GraphReads):
    """A temporal knowledge graph in a directory; open with `KnowledgeGraph.open`. The
    queries (`triplets`, `spread`, `attractors`, ...) are `GraphReads`'."""

    def __init__(self, path: str | Path, *, durability: Durability = "batch",
                 half_life_days: float = 30.0, floor: float = 0.01,
                 attractor_ttl: float = 60.0, flush_interval: float | None = 1.0,
                 spread: SpreadConfig | None = None, weights_max_age: float = 3600.0,
                 compact_after: int = 100_000, read_only: bool = False) -> None:
        self.path = Path(path).expanduser()
        if not 0 <= floor < 1:
            raise ConfigError(f"floor {floor}: must be in [0, 1)")
        self.half_life = kg_state.half_life_days(half_life_days)
        self.floor = floor
        self.attractor_ttl = attractor_ttl
        self.spread_config = spread or SpreadConfig()
        self.weights_max_age = weights_max_age
        self.state = GraphState(self.half_life, floor)
        self._wlock = threading.RLock()
        self._hebbian = HebbianQueue()
        self._asof: tuple[float, int, Adjacency] | None = None
        self._attr: tuple[int, float, int, list[tuple[str, float]]] | None = None
        self._mention_rows = MentionRows()
        self._closed = False
        self.attractor_refreshes = 0
        self.compact_after = compact_after
        self.read_only = read_only

        load = SnapshotLoader(self.state, self.half_life, floor)
        self.log = kg_log.GraphLog(self.path, self.state.apply, load_snapshot=load,
                                   durability=durability, read_only=read_only)
        self.state = load.state
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if flush_interval and not read_only:
            self._flusher = threading.Thread(target=self._flush_loop, args=(flush_interval,),
                                             name=f"kg-hebbian-{self.path.name}", daemon=True)
            self._flusher.start()

    @classmethod
    def open(cls, path: str | Path, *, durability: Durability = "batch",
             read_only: bool = False, **options: Any) -> KnowledgeGraph:
        """Open (creating if missing) the graph in directory `path`, replaying its log;
        ``read_only``: change no file (a missing directory reads as an empty graph).

        Options: ``half_life_days`` (30) and ``floor`` (0.01) of Hebbian decay,
        ``attractor_ttl`` (60 s), ``flush_interval`` (1 s; None: Hebbian updates wait for
        `flush`), ``spread`` (a `SpreadConfig`), ``weights_max_age`` (3600 s: how old the
        decayed Hebbian weights in the cached adjacency may get), ``compact_after`` (100,000
        log entries since the last snapshot: `close` compacts).
        """
        known = {"half_life_days", "floor", "attractor_ttl", "flush_interval", "spread",
                 "weights_max_age", "compact_after"}
        unknown = set(options) - known
        if unknown:
            raise ConfigError(f"unknown option(s) {', '.join(sorted(unknown))}; known: "
                              f"durability, read_only, {', '.join(sorted(known))}")
        return cls(path, durability=durability, read_only=read_only, **options)

    def refresh(self) -> int:
        """Rebuild the state from disk, to see what other processes wrote since this one
        opened; return how many more entries it holds than before.

        The same recovery as at open (newest snapshot, then every writer's entries, this
        one's included, in global order), so the result is exactly what a fresh open gives;
        it costs as much as an open (reading the whole log since the snapshot), so call it
        when needed, not per query. Queued Hebbian updates are flushed first. Nothing is
        repaired or quarantined here (that happens at open).
        """
        self.flush()
        with self._wlock:
            if self._closed:
                raise StoreClosed(f"the knowledge graph at {self.path} is closed")
            before = sum(self.log.covered.values())
            load = SnapshotLoader(GraphState(self.half_life, self.floor), self.half_life, self.floor)
            self.log.recover(load.state.apply, load, repair=False)
            self.state = load.state  # built aside, swapped whole: readers never see it half-done
            self._asof = None
            self._attr = None
            return sum(self.log.covered.values()) - before

    # -- writing -----------------------------------------------------------------------------

    def _writable(self, operation: str) -> None:
        if self.read_only:
            raise ReadOnlyField(operation, self.path)

    def _write(self, op: int, payload: bytes) -> None:
        # Callers hold _wlock: log first, then apply exactly as recovery would.
        if self._closed:
            raise StoreClosed(f"the knowledge graph at {self.path} is closed")
        self.log.append(op, payload)
        self.state.apply(op, memoryview(payload))

    def relate(self, subject: str, predicate: str, obj: str, *, weight: float = 1.0,
               valid_from: float | None = None, memory: str | None = None) -> int:
        """Add the fact (subject, predicate, obj); return its id.

        Relating a live (subject, predicate, obj) again reinforces it: its weight becomes
        ``min(1, weight_now + weight)`` and the same id is returned. Names starting with
        ``m:`` are memory nodes; any other name is an entity, matched case-insensitively.
        The id is content-addressed (`kg_state.triplet_id`): another process stating the
        same fact without having seen this one gets the same id, and the two merge.
        """
        self._writable("relate")
        check_name(subject, "subject")
        check_name(obj, "object")
        if not _PREDICATE.match(predicate):
            raise ConfigError(f"predicate {predicate!r}: use a lowercase identifier such as "
                              f"{', '.join(PREDICATES)}")
        if not (0 < weight <= 1):
            raise ConfigError(f"weight {weight}: must be in (0, 1]")
        now = time.time()
        spo = (node_key(subject)[0], predicate, node_key(obj)[0])
        with self._wlock:
            tid = self.state.live.get(spo)
            if tid is not None:
                self._write(kg_log.REINFORCE_BY, kg_log.encode_reinforce_by(tid, weight, now))
                return tid
            tid = self.state.new_id(*spo)
            r = kg_log.Relate(tid, subject, predicate, obj, weight,
                              now if valid_from is None else valid_from, now, memory, False)
            self._write(kg_log.RELATE, kg_log.encode_relate(r))
            return self.state.resolve(tid)

    def invalidate(self, triplet_id: int, at: float | None = None) -> None:
        """Mark a triplet no longer valid from `at` (now); it stays queryable "as of" before.
        Invalidating an invalidated triplet changes nothing."""
        self._writable("invalidate a triplet")
        with self._wlock:
            t = self.triplet(triplet_id)
            if t.invalidated_at is not None:
                return
            self._write(kg_log.INVALIDATE,
                        kg_log.encode_invalidate(t.id, time.time() if at is None else at))

    def mention(self, memory_id: str, entities: Iterable[str]) -> None:
        """Link a memory to the entities it mentions (edges of kind "mentions")."""
        self._writable("record mentions")
        check_name(memory_id, "memory id")
        with self._wlock:
            have = self.state.mentions.get(memory_id, {})
            new: dict[str, str] = {}
            for name in entities:
                # NUL separates strings in snapshots: never part of a name
                key, display = entity_key(name.replace("\x00", ""))
                n = self.state.index.get(key)
                if display and (n is None or n not in have) and key not in new:
                    new[key] = display
            if new:
                self._write(kg_log.MENTION,
                            kg_log.encode_mention(memory_id, list(new.values()), time.time()))

    def forget_memory(self, memory_id: str) -> None:
        """Drop a memory node's links: its mentions, and the triplets between it and other
        memories (Hebbian ones are removed, explicit ones invalidated). Facts it stated stay."""
        self._writable("forget a memory's links")
        with self._wlock:
            m = self.state.index.get(MEMORY_PREFIX + memory_id)
            if memory_id in self.state.mentions or (m is not None and self.state.by_node.get(m)):
                self._write(kg_log.FORGET_MEMORY,
                            kg_log.encode_forget_memory(memory_id, time.time()))

    def hebbian(self, memory_ids: Sequence[str], delta: float = 0.03) -> None:
        """Queue strengthening of every pair among the first five distinct `memory_ids`
        (a ``relates_to`` edge between the two memory nodes, +delta capped at 1, created
        if missing). Never blocks: `flush` (or the background flusher) applies the queue.
        Read-only: dropped, as learning from reading (resonance calls this) writes nothing."""
        if not self.read_only:
            self._hebbian.add(memory_ids, delta)

    def flush(self) -> None:
        """Apply the queued Hebbian updates, all in one log entry (each pair's summed delta;
        which edge it strengthens or creates is decided as the entry applies, so writers
        that flush the same pair concurrently add up instead of creating two edges)."""
        if not self._hebbian:
            return
        with self._wlock:
            pairs = self._hebbian.drain()
            if self._closed:
                return
            self._write(kg_log.HEBBIAN_BY, kg_log.encode_hebbian_by(
                kg_log.HebbianDeltas(time.time(), pairs)))

    def _flush_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            if self._hebbian:
                with contextlib.suppress(StoreClosed):
                    self.flush()
                    self.prepare()  # here, not in the next query

    def decay(self, now: float | None = None) -> int:
        """Remove Hebbian edges whose decayed weight is below the floor; return how many.

        Weights decay lazily (``w · 0.5 ** (age / half_life)`` when read), so this only
        reclaims memory: an edge below the floor already reads as absent everywhere.
        """
        t = time.time() if now is None else now
        with self._wlock:
            ids = self.state.decayed_away(t)
            self.state.drop(ids)
        return len(ids)

    # -- reading (the queries are GraphReads') ------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts of nodes, triplets, mentions, Hebbian edges; adjacency builds; recovery."""
        st = self.state
        trips = list(st.trip.values())
        live = sum(1 for t in trips if t.invalidated_at is None)
        stored = len(trips)
        n_ent = int(st.entity[: len(st.keys)].sum())
        rep = self.log.report
        return {
            "nodes": len(st.keys), "entities": n_ent, "memories": len(st.keys) - n_ent,
            "triplets": stored, "live_triplets": live, "invalidated_triplets": stored - live,
            "hebbian_edges": len(st.hebbian_ids), "mention_edges": st.n_mention_edges,
            "edges": st.edges.n, "hebbian_queued": len(self._hebbian),
            "adjacency_full_builds": st.cache.full_builds,
            "adjacency_delta_builds": st.cache.delta_builds,
            "attractor_refreshes": self.attractor_refreshes,
            "recovered_entries": rep.replayed,
            "snapshot": str(self.log.snapshot) if self.log.snapshot else None,
            "log_entries_since_snapshot": self.log.since_snapshot,
            "recovery_issues": [str(i) for i in rep.issues], "writer": self.log.instance,
        }

    # -- lifecycle -----------------------------------------------------------------------------

    def compact(self) -> Path | None:
        """Snapshot the whole graph, then delete the log segments and older snapshots it
        covers: the next open loads the snapshot and replays only what follows it.

        None, changing nothing, when another process is compacting this graph or has written
        a snapshot holding entries this one has not seen (`refresh` first). Segments of
        writers still open elsewhere are never deleted: only dead writers' and this one's.
        """
        self._writable("compact the knowledge graph")
        self.flush()
        with self._wlock:
            if self._closed:
                raise StoreClosed(f"the knowledge graph at {self.path} is closed")
            return self.log.compact(
                lambda snap_dir, covered, max_hlc, instance, hlc: write_snapshot(
                    self.state, covered, max_hlc, snap_dir, instance, hlc), read_covered)

    def sync(self) -> None:
        """Make everything logged so far durable, whatever the durability mode."""
        self.log.sync()

    def close(self) -> None:
        """Apply queued Hebbian updates, stop the flusher, close the log."""
        if self._closed:
            return
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        self.flush()
        with self._wlock:
            if not self.read_only and self.log.since_snapshot >= self.compact_after:
                with contextlib.suppress(OSError):
                    self.compact()
            self._closed = True
            self.log.close()

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return self._closed

    def __enter__(self) -> KnowledgeGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


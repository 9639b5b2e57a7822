"""The Field's association side: knowledge graph, full resonance, scoring, self-tuning.

A collaborator of `Field`, built with what it reads and writes: the field's folder, its
`Store`, its embedder, its indexes (for reading), the fusion and resonance configs. Every
part opens lazily: a field that is only ever recalled from never loads the graph, the
scorer or the learner.

On disk, beside the memory store, in the field's folder:
    graph/          the knowledge graph's own write-ahead log (graph/kg.py)
    scoring.json    the scoring pipeline's weights, hot-reloaded, read when created (scoring.py)
    learner.json    the Thompson learner's posteriors (learner.py), when learning is on
    code/           the code index (code/index.py), when code has been indexed

A read-only field (``store.read_only``) opens the graph and the code index read-only too,
and never saves the learner: reading such a field changes no file.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ReadOnlyField
from ..resonate.config import ResonanceConfig
from ..resonate.priming import SessionPrimer
from ..resonate.resonator import Resonator
from ..resonate.sources import Sources
from ..store.ops import FLAG_PENDING_EMBED
from .confidence import decayed_confidence
from .hits import Hit, memory_hit, symbol_hit

if TYPE_CHECKING:
    from ..graph.kg import KnowledgeGraph
    from ..recall.fusion import FusionConfig
    from ..resonate.learner import Draw, ThompsonLearner
    from ..resonate.scoring import Scorer
    from ..store.durable import Store
    from .config import FieldConfig
    from .context import ContextChain
    from .embedding import FieldEmbedder
    from .indexes import FieldIndexes

__all__ = ["Association"]

log = logging.getLogger("soul.engines.resonance")
_CREDITS = 2048  # memories whose surfacing draw is kept for feedback
_SESSIONS = 1024  # sessions whose last memory is kept for contiguity links


class Association:
    """The graph, the scorer, the learner and the code index of one field, and resonance
    over them. ``config`` (the Field's) says whether writes link entities and chain in time;
    ``resonance`` holds the defaults of `resonate()`."""

    def __init__(self, path: Path, store: Store, embedding: FieldEmbedder,
                 indexes: FieldIndexes, fusion: FusionConfig, config: FieldConfig,
                 resonance: ResonanceConfig) -> None:
        self.path = path
        self.store = store
        self.config = config
        self.resonance = resonance
        self.primer = SessionPrimer(resonance.priming_size)
        self._embedding = embedding
        self._graph: KnowledgeGraph | None = None
        self._graph_lock = threading.Lock()
        self._scorer: Scorer | None = None
        self._learner: ThompsonLearner | None = None
        self._code: Any = None
        self._no_code_until = 0.0  # monotonic time before which `code_index` reports none
        self._phrases: Any = None  # entities.PhraseCounter: noun phrases seen since opening
        self._credits: OrderedDict[str, tuple[Draw | None, int]] = OrderedDict()
        self._last_new: dict[str | None, tuple[str, float]] = {}  # session -> (id, when)
        self.sources = Sources(
            store=store, fusion=fusion, primer=self.primer, embed=embedding.query,
            indexes=indexes.for_reading, confidence=lambda rows, now: decayed_confidence(store.state, rows, now),
            graph=lambda: self.graph, scorer=lambda: self.scorer,
            code_index=partial(self.code_index, create=False),
        )

    # -- the parts, opened on first use --------------------------------------------------------

    @property
    def graph(self) -> KnowledgeGraph:
        """The field's knowledge graph (``<field>/graph``), opened on first use."""
        if self._graph is None:
            with self._graph_lock:
                if self._graph is None:
                    from ..graph.kg import KnowledgeGraph

                    durability = getattr(self.store.writer, "durability", "batch")
                    self._graph = KnowledgeGraph.open(self.path / "graph", durability=durability,
                                                      read_only=self.store.read_only)
        return self._graph

    def graph_stats(self) -> dict[str, Any] | None:
        """The graph's counts and recovery issues (None for a field without a graph): a
        damaged graph must show in `Field.stats`, not only in the graph's own."""
        if self._graph is None and not (self.path / "graph").exists():
            return None
        from ..store.check import quarantined_issues

        stats = self.graph.stats()
        keep = ("nodes", "triplets", "live_triplets", "recovered_entries", "recovery_issues")
        return {**{k: stats[k] for k in keep}, "quarantined": [
            str(i) for i in quarantined_issues(self.path / "graph" / "quarantine")]}

    @property
    def scorer(self) -> Scorer:
        """The scoring pipeline: ``<field>/scoring.json``, watched whether or not it exists
        yet (created, edited or removed while the field is open, it is read within a second),
        else the shipped defaults."""
        if self._scorer is None:
            from ..resonate.scoring import Scorer

            self._scorer = Scorer(self.path / "scoring.json", optional=True)
        return self._scorer

    @property
    def learner(self) -> ThompsonLearner:
        """The Thompson learner over the resonance parameters (``<field>/learner.json``)."""
        if self._learner is None:
            from ..resonate.learner import ThompsonLearner

            # resumes from the file; a damaged one is logged and learning starts afresh
            self._learner = ThompsonLearner(path=self.path / "learner.json")
        return self._learner

    def code_index(self, *, create: bool = True) -> Any:
        """The field's code index (``<field>/code``); None if there is none and not `create`
        (looked for on disk at most once a second: every resonance query asks)."""
        if self._code is None:
            if not create and time.monotonic() < self._no_code_until:
                return None
            where = self.path / "code"
            read_only = self.store.read_only
            if not where.exists():
                if not create:
                    self._no_code_until = time.monotonic() + 1.0
                    return None
                if read_only:
                    raise ReadOnlyField("create a code index", where)
            from ..code import CodeIndex

            self._code = CodeIndex.open(where, graph=self.graph, embedder=self._embedding.embedder,
                                        read_only=read_only)
        return self._code

    # -- writes ------------------------------------------------------------------------------

    def linked(self, ids: list[str | None], before: int, session: str | None) -> None:
        """After a write: link the memories it created (rows from `before` on) to their
        entities, and chain them in time (`follows` edges, see FieldConfig.contiguity)."""
        cfg = self.config
        st = self.store.state
        new = [m for m in dict.fromkeys(i for i in ids if i is not None) if st.rows[m] >= before]
        if not new or not (cfg.entities or cfg.contiguity is not None):
            return
        if cfg.entities:
            self.link_entities(new)
        if cfg.contiguity is None:
            return
        from ..graph.kg_state import MEMORY_PREFIX

        now = time.time()
        last = self._last_new.get(session)
        prev = last[0] if last is not None and now - last[1] <= cfg.contiguity else None
        for memory_id in new:
            if prev is not None and self._alive(prev):
                self.graph.relate(MEMORY_PREFIX + prev, "follows", MEMORY_PREFIX + memory_id,
                                  weight=cfg.contiguity_weight, memory=memory_id)
            prev = memory_id
        self._last_new[session] = (new[-1], now)
        if len(self._last_new) > _SESSIONS:
            self._last_new.pop(next(iter(self._last_new)))

    def prepare(self, accessed: Sequence[int] = ()) -> None:
        """After a write: the graph's read caches a query has built are rebuilt now
        (`GraphReads.prepare`), the graph nodes of the new rows looked up
        (`MemoryNodes.catch_up`), their metas and the access histories of the ``accessed``
        rows (those whose accesses were just logged) read for scoring (`Scorer.prepare`); a
        graph or scorer not opened stays closed."""
        if self._graph is not None:
            self._graph.prepare()
            self.sources.nodes.catch_up(self.store.state, self._graph.state)
        if self._scorer is not None:
            self._scorer.prepare(self.store.state, accessed)

    def context_chain(self, session: str | None) -> ContextChain | None:
        """The session context for the next write in `session` (field/context.py): it starts
        from the vector of the memory the next new one will follow (the `linked` rule);
        None when ``context_weight`` or ``contiguity`` is off."""
        cfg = self.config
        if not cfg.context_weight or cfg.contiguity is None:
            return None
        from .context import ContextChain

        last = self._last_new.get(session)
        if last is None or time.time() - last[1] > cfg.contiguity or not self._alive(last[0]):
            return ContextChain(cfg.context_weight)
        st = self.store.state
        row = st.rows[last[0]]
        vector = None if st.flags[row] & FLAG_PENDING_EMBED else st.vectors[row]
        return ContextChain(cfg.context_weight, vector)

    def link_entities(self, memory_ids: Iterable[str] | None = None) -> int:
        """Link memories to the entities their text names (done on every remember when
        ``entities`` is on); None: every memory not linked yet. Returns how many."""
        from ..graph.entities import PhraseCounter, extract_entities

        st = self.store.state
        graph = self.graph
        if self._phrases is None:
            self._phrases = PhraseCounter()
        ids = list(memory_ids) if memory_ids is not None else [
            st.ids[r] for r in range(st.n_rows) if st.is_alive(r)
            and not graph.entities_of(st.ids[r])]
        done = 0
        for memory_id in ids:
            row = st.rows.get(memory_id)
            if row is None or not st.is_alive(row):
                continue
            text = st.text[row]
            # a noun phrase becomes an entity once three memories hold it; the earlier ones
            # are linked to it then
            for phrase, holders in self._phrases.add(memory_id, text).items():
                for holder in holders:
                    if holder != memory_id and self._alive(holder):
                        graph.mention(holder, [phrase])
            names = extract_entities(text, phrases=self._phrases)
            if names:
                graph.mention(memory_id, names)
                done += 1
        return done

    def forgotten(self, memory_id: str) -> None:
        """Drop a forgotten memory from the graph (opening it only if it exists on disk)."""
        if self._graph is not None or (self.path / "graph").exists():
            self.graph.forget_memory(memory_id)

    def _alive(self, memory_id: str) -> bool:
        row = self.store.state.rows.get(memory_id)
        return row is not None and self.store.state.is_alive(row)

    # -- resonance -----------------------------------------------------------------------------

    def resonate(self, query: str, k: int, *, session: str | None, explain: bool,
                 tags: Iterable[str] | None, affect: Any, learn: bool | None,
                 overrides: dict[str, Any]) -> list[Hit]:
        """See `Field.resonate` (the Field checks it is open and queues the accesses)."""
        if k <= 0 or len(self.store.state) == 0:
            return []
        config = self.resonance
        if overrides:
            if "disabled" in overrides:
                overrides["disabled"] = frozenset(overrides["disabled"])
            try:
                config = ResonanceConfig(**{**_as_dict(config), **overrides})
            except TypeError as exc:
                raise ConfigError(f"resonate(): {exc}") from None
        draw = None
        if learn if learn is not None else config.learn:
            from ..resonate.learner import query_features

            draw = self.learner.sample(query_features(query))
            config = config.tuned(draw.params)
        rows, facts = Resonator(self.sources, config).run(
            query, k, session=session, tags=frozenset(tags or ()), affect=affect,
            explain=explain)
        st = self.store.state
        hits = []
        credited = []
        for rank, r in enumerate(rows):
            if r["kind"] == "symbol":
                hits.append(symbol_hit(r["id"], r["symbol"], r["score"],
                                       {"code": r["score"], "facts": facts} if explain else {}))
                continue
            comps = dict(r.get("explain") or {})
            if explain:
                comps["facts"] = facts
            hits.append(memory_hit(st, r["row"], r["score"], comps))
            credited.append((r["id"], rank))
        if credited and config.on("credit"):
            self._credit(credited, draw)
        return hits

    def _credit(self, ranked: list[tuple[str, int]], draw: Draw | None) -> None:
        """Keep the draw that surfaced each memory (id, rank), the latest `_CREDITS` only:
        evicting once after the batch keeps what evicting after each one kept (the
        least recently credited go first either way). A query with no draw (the learner
        off) credits nothing: its memories only lose the draw an earlier query kept for them
        (`credit` pops the same nothing), and a field that never learned keeps no entries."""
        credits = self._credits
        if draw is None:
            if credits:
                for memory_id, _ in ranked:
                    credits.pop(memory_id, None)
            return
        for memory_id, rank in ranked:
            credits[memory_id] = (draw, rank)
            credits.move_to_end(memory_id)
        while len(credits) > _CREDITS:
            credits.popitem(last=False)

    def credit(self, memory_id: str, useful: bool) -> None:
        """Credit the parameters that surfaced a memory (discounted by its rank) with whether
        it helped; nothing if no learned draw surfaced it."""
        draw, rank = self._credits.pop(memory_id, (None, 0))
        if draw is not None:
            self.learner.feedback(draw, useful, rank)

    def close(self) -> None:
        """Close the code index and the graph, save the learner."""
        if self._code is not None:
            self._code.close()
        if self._graph is not None:
            self._graph.close()
        if self._learner is not None and not self.store.read_only:
            try:
                self._learner.save()
            except OSError as exc:
                log.warning("could not save the learner of %s: %s", self.path, exc)


def _as_dict(config: ResonanceConfig) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in fields(config)}

"""The Field's association side: knowledge graph, full resonance, scoring, self-tuning.

A mixin of `Field` (kept apart so field.py stays about storing and recalling). Everything
here opens lazily: a field that is only ever recalled from never loads the graph, the
scorer or the learner.

On disk, beside the memory store, in the field's folder:
    graph/          the knowledge graph's own write-ahead log (kg.py)
    scoring.json    the scoring pipeline's weights, hot-reloaded if present (scoring.py)
    learner.json    the Thompson learner's posteriors (learner.py), when learning is on
    code/           the code index (code/index.py), when code has been indexed
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..resonate.resonator import ResonanceConfig, Resonator, SessionPrimer

if TYPE_CHECKING:
    from ..graph.kg import KnowledgeGraph
    from ..resonate.learner import Draw, ThompsonLearner
    from ..resonate.scoring import Scorer

__all__ = ["FieldResonance", "Resonance"]

log = logging.getLogger("soul.engines.resonance")
_CREDITS = 2048  # memories whose surfacing draw is kept for feedback
_SESSIONS = 1024  # sessions whose last memory is kept for contiguity links


@dataclass(frozen=True)
class Resonance:
    """What `Field.resonate(..., explain=True)` adds: facts about the query's phases."""

    hits: list[Any]
    facts: dict[str, Any]


class FieldResonance:
    """Mixin: needs `path`, `store`, `_lock`, `config`, `embed`, `indexes`, `_fusion`,
    `_confidence` and `flush_accesses` from Field."""

    path: Path
    _graph: KnowledgeGraph | None = None
    _scorer: Scorer | None = None
    _learner: ThompsonLearner | None = None
    _code: Any = None
    _phrases: Any = None  # entities.PhraseCounter: noun phrases seen since the field opened

    def _init_resonance(self, resonance: Mapping[str, Any] | None) -> None:
        names = {f.name for f in fields(ResonanceConfig)}
        given = dict(resonance or {})
        unknown = set(given) - names
        if unknown:
            raise ConfigError(f"unknown resonance option(s) {', '.join(sorted(unknown))}; "
                              f"known: {', '.join(sorted(names))}")
        if "disabled" in given:
            given["disabled"] = frozenset(given["disabled"])
        self.resonance = ResonanceConfig(**given)
        self.primer = SessionPrimer(self.resonance.priming_size)
        self._credits: OrderedDict[str, tuple[Draw | None, int]] = OrderedDict()
        self._last_new: dict[str | None, tuple[str, float]] = {}  # session -> (id, when)
        self._graph_lock = threading.Lock()

    # -- the parts, opened on first use --------------------------------------------------------

    @property
    def graph(self) -> KnowledgeGraph:
        """The field's knowledge graph (``<field>/graph``), opened on first use."""
        if self._graph is None:
            with self._graph_lock:
                if self._graph is None:
                    from ..graph.kg import KnowledgeGraph

                    durability = getattr(self.store.writer, "durability", "batch")
                    self._graph = KnowledgeGraph.open(self.path / "graph", durability=durability)
        return self._graph

    @property
    def scorer(self) -> Scorer:
        """The scoring pipeline: ``<field>/scoring.json`` (hot-reloaded) if it exists when the
        field opens, else the shipped defaults."""
        if self._scorer is None:
            from ..resonate.scoring import Scorer

            path = self.path / "scoring.json"
            self._scorer = Scorer(path if path.exists() else None)
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
        """The field's code index (``<field>/code``); None if there is none and not `create`."""
        if self._code is None:
            where = self.path / "code"
            if not create and not where.exists():
                return None
            from ..code import CodeIndex

            self._code = CodeIndex.open(where, graph=self.graph, embedder=self.embedder)
        return self._code

    # -- the graph from the Field ------------------------------------------------------------

    def relate(self, subject: str, predicate: str, obj: str, *, weight: float = 1.0,
               valid_from: float | None = None, memory: str | None = None) -> int:
        """State a fact (subject, predicate, object) in the knowledge graph; its id."""
        return self.graph.relate(subject, predicate, obj, weight=weight,
                                 valid_from=valid_from, memory=memory)

    def _link_new(self, ids: list[str | None], before: int, session: str | None) -> None:
        """After a write: link the memories it created (rows from `before` on) to their
        entities, and chain them in time (`follows` edges, see FieldConfig.contiguity)."""
        cfg = self.config  # type: ignore[attr-defined]
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
            if prev is not None and prev in self:  # type: ignore[operator]
                self.graph.relate(MEMORY_PREFIX + prev, "follows", MEMORY_PREFIX + memory_id,
                                  weight=cfg.contiguity_weight, memory=memory_id)
            prev = memory_id
        self._last_new[session] = (new[-1], now)
        if len(self._last_new) > _SESSIONS:
            self._last_new.pop(next(iter(self._last_new)))

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
                    if holder != memory_id and holder in self:  # type: ignore[operator]
                        graph.mention(holder, [phrase])
            names = extract_entities(text, phrases=self._phrases)
            if names:
                graph.mention(memory_id, names)
                done += 1
        return done

    # -- resonance -----------------------------------------------------------------------------

    def resonate(
        self, query: str, k: int = 10, *, session: str | None = None, explain: bool = False,
        tags: Iterable[str] | None = None, affect: Any = None, learn: bool | None = None,
        **overrides: Any,
    ) -> list[Any]:
        """Full resonance: the ``k`` memories that best answer ``query`` by content and by
        association (module resonate.py lists the phases).

        ``session`` primes with what that session saw recently; ``affect`` (a
        scoring.Affect, e.g. from Chetana) drives the mood factors; ``explain`` fills each
        hit's ``components`` with every phase's contribution; ``learn`` draws the parameters
        from the Thompson learner (default: the ``learn`` option of the resonance config);
        ``overrides``: ResonanceConfig fields for this query only (e.g. disabled={"spreading"}).
        """
        from ..memory import Kind
        from .field import Hit

        self._check_open()
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
        rows, facts = Resonator(self, config).run(
            query, k, session=session, tags=frozenset(tags or ()), affect=affect,
            explain=explain)
        st = self.store.state
        hits = []
        for rank, r in enumerate(rows):
            if r["kind"] == "symbol":
                sym = r["symbol"]
                hits.append(Hit(r["id"], f"{sym.kind} {sym.qualified} ({sym.file}:"
                                f"{sym.start_line}) {sym.signature}", r["score"], "symbol",
                                (), {"symbol": sym.qualified, "file": sym.file,
                                     "line": sym.start_line},
                                {"code": r["score"], "facts": facts} if explain else {}))
                continue
            row = r["row"]
            comps = dict(r.get("explain") or {})
            if explain:
                comps["facts"] = facts
            hits.append(Hit(r["id"], st.text[row], r["score"], Kind(st.kind[row]).label,
                            st.tags_at(row), st.meta_at(row), comps))
            if config.on("credit"):
                self._credit(r["id"], draw, rank)
        self._queue_accesses([h.id for h in hits if h.kind != "symbol"])  # type: ignore[attr-defined]
        return hits

    def _credit(self, memory_id: str, draw: Draw | None, rank: int) -> None:
        self._credits[memory_id] = (draw, rank)
        self._credits.move_to_end(memory_id)
        while len(self._credits) > _CREDITS:
            self._credits.popitem(last=False)

    def feedback(self, memory_id: str, useful: bool) -> None:
        """Say whether a recalled memory helped: its confidence observes it, and the learner
        credits the parameters that surfaced it (discounted by its rank)."""
        (self.strengthen if useful else self.weaken)(memory_id)  # type: ignore[attr-defined]
        draw, rank = self._credits.pop(memory_id, (None, 0))
        if draw is not None:
            self.learner.feedback(draw, useful, rank)

    def _close_resonance(self) -> None:
        if self._code is not None:
            self._code.close()
        if self._graph is not None:
            self._graph.close()
        if self._learner is not None:
            try:
                self._learner.save()
            except OSError as exc:
                log.warning("could not save the learner of %s: %s", self.path, exc)

    def _check_open(self) -> None:
        from ..errors import StoreClosed

        if self.store.closed:
            raise StoreClosed("the field is closed")


def _as_dict(config: ResonanceConfig) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in fields(config)}

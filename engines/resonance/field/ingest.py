"""Remembering: items checked by the quality gate, embedded in batches, merged when duplicate.

The gate (memory.gate_reason) refuses text under 10 characters. A duplicate — the same text
(whitespace and case aside) or a vector within ``dedup_threshold`` cosine of a stored memory
or of an earlier item of the same batch — is not stored again: the existing memory gets a
confidence observation of 1 and an access, and its id is returned.

With a `ContextChain` (field/context.py), each embedded item's vector is mixed with the
vector of the item before it in its session before the duplicate check and the log. Mixed
vectors of neighbours in a chain are closer than their texts, so then a merge by vector also
needs the texts' own vectors within ``dedup_threshold`` (a stored candidate's text is embedded
again for that check): distinct memories in one session are never merged for their context.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..memory import PRIOR_MU, PRIOR_VAR, Kind, gate_reason, parse_kind
from ..store import ops
from .embedding import unit_rows

if TYPE_CHECKING:
    from ..store.durable import Store
    from .config import FieldConfig
    from .context import ContextChain
    from .indexes import FieldIndexes

Embed = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]

__all__ = ["Ingest", "Item", "check_item"]

log = logging.getLogger("soul.engines.resonance")
_KEYS = {"text", "kind", "tags", "realm", "source", "confidence", "meta", "embedding"}


def _text_key(text: str) -> str:
    return " ".join(text.lower().split())


@dataclass(frozen=True, slots=True)
class Item:
    """One item to remember, validated; ``refused`` holds the gate's reason if it failed."""

    text: str
    kind: Kind
    tags: tuple[str, ...]
    realm: str | None
    source: str | None
    confidence: float | None
    meta: str | None
    embedding: np.ndarray | None
    refused: str | None = None

    @staticmethod
    def build(item: str | Mapping[str, Any]) -> Item:
        """Validate a string or a dict of remember()'s keywords."""
        if isinstance(item, str):
            item = {"text": item}
        unknown = set(item) - _KEYS
        if unknown:
            raise ConfigError(f"unknown item key(s) {sorted(unknown)}; known: {sorted(_KEYS)}")
        text = item.get("text")
        if not isinstance(text, str):
            raise ConfigError(f"an item needs a 'text' string, got {type(text).__name__}")
        text = text.replace("\x00", "")  # NUL separates values in the log: never content
        tags = item.get("tags") or ()
        if isinstance(tags, str):
            tags = (tags,)
        elif isinstance(tags, list | tuple | set | frozenset):
            tags = tuple(tags)
        else:
            raise ConfigError(f"tags must be a string or a list of strings, got {tags!r:.40}")
        tags = tuple(t for t in (re.sub(r"[\x00\x1f]", "", str(t)).strip() for t in tags) if t)
        meta = item.get("meta")
        if meta is not None and not isinstance(meta, Mapping):
            raise ConfigError(f"meta must be an object (a mapping), got {type(meta).__name__}")
        try:
            meta_json = json.dumps(dict(meta), ensure_ascii=False) if meta else None
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"meta must be JSON-serialisable: {exc}") from exc
        for key in ("realm", "source"):
            if item.get(key) is not None and not isinstance(item[key], str):
                raise ConfigError(f"{key} must be a string, got {type(item[key]).__name__}")
        kind = item.get("kind") or "episode"
        if not isinstance(kind, str | int) or isinstance(kind, bool):
            raise ConfigError(f"kind must be a kind's name, got {type(kind).__name__}")
        return Item(
            text, parse_kind(kind), tags, item.get("realm"), item.get("source"),
            _confidence(item.get("confidence")), meta_json, _embedding(item.get("embedding")),
            gate_reason(text),
        )


def _confidence(conf: Any) -> float | None:
    if conf is None:
        return None
    try:
        value = float(conf)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise ConfigError(f"confidence must be a number in [0, 1], got {conf!r:.40}")
    return value


def _embedding(emb: Any) -> np.ndarray | None:
    if emb is None:
        return None
    try:
        vec = np.asarray(emb, np.float32).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"embedding must be a list of numbers: {exc}") from None
    return vec


@dataclass(frozen=True, slots=True)
class Mixed:
    """A batch's text vectors before the session context was mixed in (``own``) and the
    rows the mixing changed."""

    own: np.ndarray
    changed: np.ndarray


def check_item(item: str | Mapping[str, Any]) -> None:
    """Raise ConfigError, saying which field is wrong, if `item` could not be remembered
    (unknown key, missing text, a field of the wrong type, an unknown kind). A caller
    reading items from a file checks each one so it can name the line."""
    Item.build(item)


class Ingest:
    """The write side of a Field: gate, embed, deduplicate, log.

    Built with what it writes through: the ``store``, the Field's ``lock`` (held while a
    batch is checked and logged), the ``indexes`` (their duplicate index), ``embed`` (texts ->
    (unit vectors, ok)) and the ``config`` (batch size, dedup threshold).
    """

    def __init__(self, store: Store, lock: threading.RLock, indexes: FieldIndexes,
                 embed: Embed, config: FieldConfig) -> None:
        self.store = store
        self.config = config
        self._lock = lock
        self._indexes = indexes
        self._embed = embed
        self._keys: dict[str, int] | None = None  # normalised text -> row, built on first use

    def _text_keys(self) -> dict[str, int]:
        if self._keys is None:
            st = self.store.state
            self._keys = {_text_key(t): r for r, t in enumerate(st.text) if st.is_alive(r)}
        return self._keys

    def forgetting(self, row: int) -> None:
        """Drop a row about to be forgotten from the exact-text map (its text is still there)."""
        if self._keys is not None:
            key = _text_key(self.store.state.text[row])
            if self._keys.get(key) == row:
                del self._keys[key]

    def remember_many(
        self, items: Iterable[str | Mapping[str, Any]],
        progress: Callable[[int, int], None] | None, chain: ContextChain | None = None,
    ) -> list[str | None]:
        """See Field.remember_many; `chain` carries the session context across batches."""
        built = [Item.build(i) for i in items]
        out: list[str | None] = [None] * len(built)
        todo: list[int] = []
        for i, item in enumerate(built):
            if item.refused:
                log.info("remember_many: item %d refused by the quality gate: %s", i, item.refused)
            else:
                todo.append(i)
        size = max(1, self.config.batch_size)
        done = len(built) - len(todo)
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            for i, memory_id in zip(chunk, self.run([built[i] for i in chunk], chain),
                                    strict=True):
                out[i] = memory_id
            done += len(chunk)
            if progress is not None:
                progress(done, len(built))
        if progress is not None and not todo:
            progress(done, len(built))
        return out

    def _vectors(self, items: list[Item], chain: ContextChain | None
                 ) -> tuple[np.ndarray, np.ndarray, Mixed | None]:
        """(stored vectors, ok, and — when the context changed any — the vectors before it
        was mixed in with the mask of the rows it changed)."""
        missing = [j for j, it in enumerate(items) if it.embedding is None]
        embedded, ok_part = self._embed([items[j].text for j in missing])
        dims = {it.embedding.shape[0] for it in items if it.embedding is not None}
        if missing:
            dims.add(embedded.shape[1])
        if len(dims) != 1:
            raise ConfigError(f"embeddings of several dimensions in one batch: {sorted(dims)}")
        vectors = np.zeros((len(items), dims.pop()), np.float32)
        ok = np.ones(len(items), bool)
        given = [j for j in range(len(items)) if items[j].embedding is not None]
        if given:
            vectors[given] = unit_rows(np.stack([items[j].embedding for j in given]))
            ok[given] = np.linalg.norm(vectors[given], axis=1) > 0
        if missing:
            vectors[missing], ok[missing] = embedded, ok_part
        own = None
        if chain is not None:
            made = np.zeros(len(items), bool)
            made[missing] = True
            own, vectors = vectors, chain.mix(vectors, ok, made)
            if own is vectors:  # nothing was mixed
                return vectors, ok, None
            changed = (own != vectors).any(axis=1)
            return vectors, ok, (Mixed(own, changed) if changed.any() else None)
        return vectors, ok, None

    def _same_text(self, mixed: Mixed | None, j: int, other: int | None, row: int | None,
                   seen: dict[int, np.ndarray]) -> bool:
        """Whether a merge of item `j` by vector stands. Always, unless the context changed
        `j`'s vector (or, for an earlier item `other` of the batch, either's): then their own
        text vectors must be within the threshold too (a stored `row`'s text is embedded
        again for that, once per run)."""
        if mixed is None:
            return True
        threshold = self.config.dedup_threshold
        assert threshold is not None
        if other is not None:
            if not (mixed.changed[j] or mixed.changed[other]):
                return True
            return float(mixed.own[j] @ mixed.own[other]) >= threshold
        if not mixed.changed[j]:
            return True
        assert row is not None
        if row not in seen:
            vec, good = self._embed([self.store.state.text[row]])
            seen[row] = vec[0] if good[0] else np.zeros_like(mixed.own[j])
        return float(mixed.own[j] @ seen[row]) >= threshold

    def run(self, items: list[Item], chain: ContextChain | None = None) -> list[str | None]:
        """Remember gate-approved items; return each one's id (new or merged into). With
        `chain`, embedded vectors carry their session context (field/context.py).

        An item merges into the most similar of the stored memories and the earlier new items
        of this batch if that one is within ``dedup_threshold`` — what remembering the items
        one by one would give — or into a memory with the same text.
        """
        from ..recall.dedup import single_thread_blas

        text_keys = [_text_key(item.text) for item in items]
        with self._lock:  # every item the text of a live memory: reinforcements, no vector
            known = self._known(text_keys)
            if known is not None:
                self._reinforce(known)
                return list(known)
        vectors, ok, mixed = self._vectors(items, chain)
        stored_own: dict[int, np.ndarray] = {}
        threshold = self.config.dedup_threshold
        n_items = len(items)
        with self._lock:
            st = self.store.state
            keys = self._text_keys()
            if threshold is not None and ok.any() and len(st):
                best, best_row = self._indexes.nearest(vectors)
            else:
                best, best_row = np.full(n_items, -2.0), np.full(n_items, -1)
            inner = None
            close_earlier = np.zeros(n_items, bool)  # some earlier item is within threshold
            if threshold is not None and n_items > 1:
                with single_thread_blas():
                    inner = vectors @ vectors.T
                close_earlier = np.tril(inner >= threshold, -1).any(axis=1)
            ids: list[str | None] = []
            rows: list[ops.Row] = []
            new_pos: list[int] = []  # positions in `items` of the new memories
            new_keys: dict[str, int] = {}  # their text keys -> position
            accepted = np.zeros(n_items, bool)  # new, with a real vector: merge targets
            merges: list[str] = []
            fresh = secrets.token_hex(8 * n_items)
            now = time.time()
            for j, item in enumerate(items):
                key = text_keys[j]
                target = keys.get(key)
                if target is not None and not st.is_alive(target):
                    target = None
                if target is None and threshold is not None and ok[j]:
                    earlier = -1
                    if inner is not None and close_earlier[j]:
                        sims = np.where(accepted[:j], inner[j, :j], -2.0)
                        earlier = int(sims.argmax())
                        if sims[earlier] < threshold or sims[earlier] <= best[j] or \
                                not self._same_text(mixed, j, earlier, None, stored_own):
                            earlier = -1
                    if earlier >= 0:
                        ids.append(ids[earlier])
                        merges.append(ids[earlier])  # type: ignore[arg-type]
                        continue
                    if best[j] >= threshold and st.is_alive(int(best_row[j])) and \
                            self._same_text(mixed, j, None, int(best_row[j]), stored_own):
                        target = int(best_row[j])
                if target is not None:
                    ids.append(st.ids[target])
                    merges.append(st.ids[target])
                    continue
                first = new_keys.get(key)
                if first is not None:  # the same text earlier in this batch
                    ids.append(ids[first])
                    merges.append(ids[first])  # type: ignore[arg-type]
                    continue
                memory_id = fresh[16 * j : 16 * j + 16]
                flags = 0 if ok[j] else ops.FLAG_PENDING_EMBED
                mu = PRIOR_MU if item.confidence is None else item.confidence
                rows.append(ops.Row(memory_id, int(item.kind), flags, now, mu, PRIOR_VAR, 0,
                                    item.text, item.tags, item.realm, item.source, item.meta))
                new_pos.append(j)
                new_keys[key] = j
                accepted[j] = ok[j]
                ids.append(memory_id)
            if not rows:
                added = []
            elif len(rows) == 1:
                added = [self.store.add(rows[0], vectors[new_pos[0]])]
            else:
                added = self.store.add_many(rows, vectors[new_pos])
            if threshold is not None:
                self._indexes.dup_added(added, new_pos, ok[new_pos])
            for row, pos in zip(added, new_pos, strict=True):
                keys.setdefault(text_keys[pos], row)
            self._reinforce(merges)
        return ids

    def _known(self, text_keys: list[str]) -> list[str] | None:
        """The live memory holding each text (by `_text_key`), or None unless every one is
        held (the caller holds the lock)."""
        keys, st = self._text_keys(), self.store.state
        out = []
        for key in text_keys:
            row = keys.get(key)
            if row is None or not st.is_alive(row):
                return None
            out.append(st.ids[row])
        return out

    def _reinforce(self, merges: list[str]) -> None:
        """The items merged into these memories: each observes a reinforcement (evidence the
        memory matters) and is accessed."""
        for memory_id in merges:
            self.store.observe(memory_id, 1.0)
            log.debug("merged a near-duplicate into %s", memory_id)
        if merges:
            self.store.access(merges)

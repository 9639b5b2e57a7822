"""The bridge to the resonance memory engine: the only runtime module that imports it.

`MemoryBridge` opens a soul's field on first use (numpy, numba and the embedder load only
then), writes a turn's memories after its commit, and hands steps a `MemoryReader`: recall
and resonate, nothing that writes. Where: the `memory.field` folder (relative to the
blueprint), else `$SOUL_HOME/fields/<soul>`.

On a PostgreSQL session store the field is partitioned by user, each partition owned by one
process at a time under a lease (`runtime/bridges/partitions.py`, docs/scale.md):
`for_user(user)` is the bridge a session of that user gets, whose field is its partition's;
`hold()` takes the lease before a turn and gives the fence its commit carries; its writes
are checked against the lease first.

Engine errors stop here: a `ResonanceError`, or an `OSError` from the field's files, leaves
the bridge as a `MemoryFieldError` that names the field, what failed and how to fix it, with
the engine's exception as its `__cause__` (`field_errors`, also used by `soul memory`).

Memory recalls on tape: a replayed turn must see the prompt the recorded turn saw, and the
prompt holds what memory recalled. Between the recording and the replay the field has changed
(the recorded run itself remembered its exchange), so recalls are part of what a cassette
records: while recording, every `recall`/`resonate` answer is written to the cassette; while
replaying, the same query (mode, k, text) gets the recorded hits back. Everything else
(remembering, stats, the graph) goes to the real field. A query the tape lacks falls through
to the live field: the model replay then says what differs, with the prompt diff.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from soul.errors import FileRefused, LeaseLost, MemoryFieldError
from soul.extras import require
from soul.language import Blueprint, field_folder
from soul.records import Fence
from soul.runtime.bridges.learning import RecallUse, judge, learn_config
from soul.runtime.bridges.memory_errors import FieldErrors, field_errors
from soul.runtime.bridges.memory_work import AT_ONCE_MEMORIES, Queries, Writes, run_query
from soul.runtime.bridges.partitions import Partition, Partitions
from soul.runtime.bridges.tape import TapedField
from soul.store import fields_dir, redact, secrets

if TYPE_CHECKING:
    from soul.engines.resonance import Hit
    from soul.providers import Cassette
    from soul.store import SessionStore

__all__ = [
    "MemoryBridge", "MemoryReader", "TapedField", "confined_field_path", "field_errors",
    "uses_memory",
]

log = logging.getLogger(__name__)

_FUSION_NAMES = {"method": "method", "semantic": "semantic_weight", "keyword": "keyword_weight", "tag": "tag_weight"}


def uses_memory(blueprint: Blueprint) -> bool:
    """True if any step of the turn, a subprocess or a process is a memory step."""
    groups = [blueprint.steps, *(sp.steps for sp in blueprint.subprocesses.values()), *(p.steps for p in blueprint.processes.values())]
    return any(step.uses.startswith("memory.") for steps in groups for step in steps.values())


def confined_field_path(where: str, folder: Path | None, *, allow: bool | None = None) -> Path:
    """Where a blueprint's `memory.field` points, kept inside the blueprint's folder.

    A blueprint is data someone may hand you: its field must not write to an absolute path,
    a `~` path or out of its folder through `..` or a symlink (resolved first). Such a path is
    a `MemoryFieldError` unless allowed: `allow=True` (`soul.load(..., allow_field_paths=True)`)
    or, when `allow` is None, the environment variable ``SOUL_ALLOW_FIELD_PATHS=1``. Without a
    blueprint folder (an inline blueprint) the current directory is the folder. The rule is
    `soul.language.field_folder`, which `soul validate` reports through too.
    """
    try:
        return field_folder(where, folder, allow=allow)
    except FileRefused as exc:
        raise MemoryFieldError(f"memory.field {where!r} is refused: {exc.reason}: {exc.hint}") from None


def _prepared(item: dict[str, Any], known: list[str], session: str | None) -> dict[str, Any]:
    """An item as the field gets it: its text redacted, the session in its meta."""
    text = item.get("text")
    item = {**item, "text": redact(text, known)} if isinstance(text, str) else dict(item)
    if session:
        item["meta"] = {**(item.get("meta") or {}), "session": session}
    return item


class MemoryBridge:
    """A soul's memory field, opened on first use; `tape` records or replays its recalls."""

    def __init__(self, blueprint: Blueprint, home: Path | None, tape: tuple[Cassette, Literal["record", "replay"]] | None = None,
                 *, allow_field_paths: bool | None = None, store: Callable[[], SessionStore] | None = None) -> None:
        self.blueprint = blueprint
        self.home = home
        self.allow_field_paths = allow_field_paths  # None: SOUL_ALLOW_FIELD_PATHS decides
        self._tape = tape
        self._field: Any = None
        self._opening = threading.Lock()  # steps query from worker threads: open the field once
        self._reader = MemoryReader(self)
        self._store = store  # the session store: on PostgreSQL, the field is partitioned by user
        self._partitions: Partitions | None = None
        self._partition: Partition | None = None  # set on a user's bridge (`for_user`)
        self._users: dict[str, MemoryBridge] = {}
        self._embedder: Any = None
        # a turn's memories are written after it returns (`Writes`); reads wait for them
        self.writes = Writes()
        self.queries = Queries()  # a turn's recall: on the loop when quick, else in a worker thread

    # -- partitions (a PostgreSQL store): docs/scale.md ---------------------------------------

    def partitions(self) -> Partitions | None:
        """The soul's partitioned field when its session store is PostgreSQL (None: one field)."""
        if self._partition is not None:
            return self._partition.owners
        wanted = uses_memory(self.blueprint) or bool(self.blueprint.memory)
        if self._partitions is None and self._store is not None and wanted and self._store().backend == "postgresql":
            self._partitions = Partitions(self.blueprint.name, self.path(), self._store, self._open_at, self._one_item)
        return self._partitions

    def for_user(self, user: str) -> MemoryBridge:
        """The bridge a session of `user` uses: its partition's, or this one when the field is
        not partitioned."""
        parts = self.partitions()
        if parts is None or self._partition is not None:
            return self
        with self._opening:
            child = self._users.get(user)
            if child is None:
                child = MemoryBridge(self.blueprint, self.home, self._tape, allow_field_paths=self.allow_field_paths)
                child._partition = parts.partition(user)
                self._users[user] = child
        return child

    @property
    def leased(self) -> bool:
        """Whether this is a user's bridge on a partitioned field (its turns hold a lease)."""
        return self._partition is not None

    def hold(self) -> Fence | None:
        """Before a turn: take or renew this user's partition lease (`LeaseHeld` when another
        live owner has it) and make its field ready; the fence the turn's commit carries.
        None when the field is not partitioned."""
        return self._partition.hold() if self._partition is not None else None

    def using(self) -> AbstractContextManager[None]:
        """Around a turn or cycle: its partition counts as in use (renewed, not handed away)."""
        return self._partition.using() if self._partition is not None else nullcontext()

    def _open_at(self, path: Path) -> Any:
        """A partition's field at `path` (one embedder for every partition of the soul)."""
        from soul.engines.resonance import Field, load_embedder

        with self.errors("open"):
            if self._embedder is None:
                self._embedder = self.embedder() or load_embedder(None)
            path.mkdir(parents=True, exist_ok=True)
            return Field.open(path, self._embedder, **self.config())

    def _one_item(self, item: dict[str, Any], session: str) -> dict[str, Any]:
        return _prepared(item, secrets(), session)

    def _fenced(self) -> bool:
        """Whether writing is allowed: always, unless this partition's lease moved on."""
        if self._partition is None:
            return True
        try:
            self._partition.check()
        except LeaseLost as exc:
            log.warning("%s", exc)
            return False
        return True

    @staticmethod
    def check_installed(blueprint: Blueprint) -> None:
        """A soul that uses memory needs the `memory` extra: say so at load, not mid-turn."""
        if not uses_memory(blueprint):
            return
        require("memory", f"soul '{blueprint.name}' (its memory steps)", ("numpy", "numba", "onnxruntime", "hnswlib"))

    def path(self) -> Path:
        """The field's folder: `memory.field` resolved inside the blueprint's folder, else
        `$SOUL_HOME/fields/<soul>`. See `confined_field_path` for what is refused. A user's
        bridge on a partitioned field: its partition's folder of the epoch it holds."""
        if self._partition is not None:
            return self._partition.folder()
        where = (self.blueprint.memory or {}).get("field")
        if where:
            return confined_field_path(str(where), self.blueprint.folder, allow=self.allow_field_paths)
        return fields_dir(self.home) / self.blueprint.name

    def config(self) -> dict[str, Any]:
        """The Field's options from the blueprint's `memory` block."""
        block: Mapping[str, Any] = self.blueprint.memory or {}
        fusion = block.get("fusion") or {}
        config = {_FUSION_NAMES[k]: v for k, v in fusion.items() if k in _FUSION_NAMES}
        if block.get("durability"):
            config["durability"] = block["durability"]
        if block.get("resonance"):
            config["resonance"] = dict(block["resonance"])
        if learn_config(block) is not None:  # learning from use: resonate draws from the learner
            config["resonance"] = {"learn": True, **config.get("resonance", {})}
        return config

    def embedder(self) -> Any:
        """The embedder the blueprint's `memory.embedder` block names (paths relative to the
        blueprint), or None: the field loads the bundled default on first use. A field that
        holds another model's vectors refuses it (`EmbedderMismatch`, a MemoryFieldError
        here) and says to run `soul memory reembed`."""
        spec = (self.blueprint.memory or {}).get("embedder")
        if not spec:
            return None
        from soul.engines.resonance import BUILTIN_EMBEDDERS, load_embedder

        spec = dict(spec) if isinstance(spec, Mapping) else {"model": str(spec)}
        for key in ("model", "tokenizer"):  # files a blueprint names stay in its folder
            where = spec.get(key)
            if isinstance(where, str) and where.lower() not in (*BUILTIN_EMBEDDERS, "default"):
                try:
                    spec[key] = str(field_folder(where, self.blueprint.folder, allow=self.allow_field_paths))
                except FileRefused as exc:
                    raise MemoryFieldError(f"memory.embedder.{key} {where!r} is refused: {exc.reason}: {exc.hint}") from None
        with self.errors("load the embedder of"):
            return load_embedder(spec)

    def field(self) -> Any:
        """The resonance Field (opened on first use); raises MemoryFieldError if it cannot be.
        A user's bridge on a partitioned field: its partition's, held first. Waits for the
        writes submitted before (`writes`), unless called by one of them."""
        self.writes.wait()
        if self._partition is not None:
            live = self._partition.open_field()
            if self._tape is None:
                return live
            with self._opening:
                if self._field is None or self._field.live is not live:
                    self._field = TapedField(live, *self._tape)
                return self._field
        field = self._field
        if field is not None:  # open already (set once, under the lock below)
            return field
        with self._opening:
            if self._field is None:
                from soul.engines.resonance import Field

                path = self.path()
                with self.errors("open"):
                    path.mkdir(parents=True, exist_ok=True)
                    field = Field.open(path, self.embedder(), **self.config())
                self._field = TapedField(field, *self._tape) if self._tape is not None else field
        return self._field

    def warm(self, text: str) -> None:
        """At a turn's start: embed the recall query `text` in a worker thread (`Queries`),
        when the field is open already and neither a tape's nor a partition's."""
        field = self._field
        if field is None or self._tape is not None or self._partition is not None:
            return

        def embed(query: str) -> None:  # into the embedder's cache, where the query finds it
            field.embed_query(query)

        # asked of the field, which loads no model to answer (this runs on the event loop)
        self.queries.warm(text, embed, known=field.knows(text))

    def answers_at_once(self) -> bool:
        """Whether a warmed query may run on the event loop: the field open and small, no write
        pending (`memory_work.py`)."""
        field = self._field
        return (field is not None and self._tape is None and self._partition is None
                and self.writes.idle and len(field) <= AT_ONCE_MEMORIES)

    def reader(self) -> MemoryReader:
        """What steps may use of the field: recall and resonate (`soul.kinds.Recall`)."""
        return self._reader

    def reader_for(self, recalled: list[str]) -> MemoryReader:
        """A reader for one turn: its recalls log no access; the ids they found go to
        `recalled`, for `touch` once the turn has committed (a failed turn touches nothing)."""
        return MemoryReader(self, recalled)

    def touch(self, memory_ids: Sequence[str]) -> None:
        """Log the accesses of a committed turn's recalls (use is evidence a memory matters)."""
        if not memory_ids or not self._fenced():
            return
        field = self.field()
        with self.errors("log recalls in"):
            field.touch(list(dict.fromkeys(memory_ids)))

    def feedback(self, use: RecallUse) -> tuple[list[str], list[str]]:
        """Tell the field which of a committed turn's recalled memories were used (`use`,
        judged by `soul.runtime.recall_use`): `Field.feedback` strengthens or weakens each,
        and credits the learner's draw that surfaced it (resonate recalls). The learner is
        saved when it moved, so `soul memory stats` in another process sees it. Returns
        (used ids, unused ids); memories forgotten since the recall are skipped."""
        if not self._fenced():
            return [], []
        field = self.field()
        live = field.live if isinstance(field, TapedField) else field

        def cosines(written: str, texts: Sequence[str]) -> list[float]:
            vectors, _ = live.embed([written, *texts])
            return [float(v) for v in vectors[1:] @ vectors[0]]

        with self.errors("learn from the recalls in"):
            used, unused = judge(use, cosines)
            learner = live.learner
            rounds = learner.rounds
            for ids, useful in ((used, True), (unused, False)):
                for memory_id in ids:
                    if memory_id in live:  # a replayed or since-forgotten hit: nothing to credit
                        live.feedback(memory_id, useful)
            if learner.rounds != rounds:
                learner.save()
        return used, unused

    def remember(self, items: list[dict[str, Any]], session: str | None = None, commit: int | None = None) -> list[str | None]:
        """Write items to the field (after a turn has committed); with `session`, they prime
        that session's next resonance queries, and each one's vector carries the memory
        remembered before it in that session (the previous exchange or dialogue line) as
        context — the field's `context_weight`, docs/memory.md "Session context".

        On a partitioned field `commit` (the turn's commit id) marks them written, so a
        partition rebuilt from the store does not write them twice, and the write is refused
        (`LeaseLost`) when the partition's lease has moved on."""
        if not items:
            return []
        # a key quoted in a turn must not reach the field's log (the store redacts the same way);
        # with `session`, recall can tell this conversation's memories from older ones
        known = secrets()
        items = [_prepared(item, known, session) for item in items]
        if self._partition is not None:
            with self.errors("remember into"):
                return self._partition.remember(items, session, commit)
        field = self.field()
        with self.errors("remember into"):
            ids: list[str | None] = field.remember_many(items, session=session)
            if session:
                field.primer.observe(session, [i for i in ids if i is not None])
        return ids

    def errors(self, doing: str) -> AbstractContextManager[None]:
        """Translate the engine's errors (and OSErrors) raised inside into MemoryFieldError
        (named only when something fails: this wraps every recall and write of a turn)."""
        return FieldErrors(self._names, doing)

    def _names(self) -> tuple[Path, str, str]:
        """The field's path, how the user named it, and where else to put it."""
        raw = (self.blueprint.memory or {}).get("field")
        path = self.path()
        home_field = f"$SOUL_HOME/fields/{self.blueprint.name}"
        if raw:
            named = f"soul '{self.blueprint.name}': memory.field {raw!r}" + (f" ({path})" if str(path) != raw else "")
            elsewhere = f"point memory.field at a folder (it is created), or remove it to use {home_field}"
        else:
            named = f"soul '{self.blueprint.name}': the memory field {path}"
            elsewhere = f"move {path} away (the field's folder is created there), or set memory.field to a folder"
        return path, named, elsewhere

    def close(self) -> None:
        """Close the field (and every partition's), once the pending writes have run."""
        self.writes.wait()
        if self._partitions is not None:  # every partition's field closed, its lease given up
            self._partitions.close()
        if self._partition is not None:
            self._field = None
            return
        if self._field is not None:
            field, self._field = self._field, None
            with self.errors("close"):
                field.close()


class MemoryReader:
    """The read-only view of a soul's field that steps get (it satisfies `soul.kinds.Recall`):
    recall and resonate, with the engine's errors translated; nothing that writes, forgets
    or compacts. The field opens on the first query."""

    __slots__ = ("_bridge", "_recalled")

    def __init__(self, bridge: MemoryBridge, recalled: list[str] | None = None) -> None:
        self._bridge = bridge
        # None: the field logs accesses as it recalls (outside a turn); a list: they wait for
        # the turn's commit (see `MemoryBridge.reader_for`)
        self._recalled = recalled

    def _found(self, hits: list[Hit]) -> list[Hit]:
        if self._recalled is not None:
            self._recalled.extend(h.id for h in hits if getattr(h, "kind", None) != "symbol")
        return hits

    def _deferred(self) -> dict[str, Any]:
        return {"touch": False} if self._recalled is not None else {}

    def recall(self, query: str, k: int = 10, *, mode: str = "hybrid", tags: Sequence[str] | None = None) -> list[Hit]:
        """The `k` memories most relevant to `query` (mode: hybrid, semantic or keyword)."""
        field = self._bridge.field()
        with self._bridge.errors("recall from"):
            hits: list[Hit] = field.recall(query, k, mode=mode, tags=tags, **self._deferred())
        return self._found(hits)

    async def recall_soon(self, query: str, k: int = 10, *, mode: str = "hybrid",
                          tags: Sequence[str] | None = None) -> list[Hit]:
        """`recall`, on the event loop when it is quick, else in a worker thread (`memory_work.py`)."""
        return await self._soon(query, partial(self.recall, query, k, mode=mode, tags=tags))

    async def resonate_soon(self, query: str, k: int = 10, *, session: str | None = None, tags: Sequence[str] | None = None,
                            affect: Mapping[str, float] | None = None) -> list[Hit]:
        """`resonate`, on the event loop when it is quick, else in a worker thread (`memory_work.py`)."""
        return await self._soon(query, partial(self.resonate, query, k, session=session, tags=tags, affect=affect))

    async def _soon(self, query: str, ask: Callable[[], list[Hit]]) -> list[Hit]:
        bridge = self._bridge
        return await run_query(bridge.queries, query, bridge.answers_at_once, ask)  # type: ignore[no-any-return]

    def resonate(self, query: str, k: int = 10, *, session: str | None = None, tags: Sequence[str] | None = None,
                 affect: Mapping[str, float] | None = None) -> list[Hit]:
        """Full resonance; `affect` (valence, arousal, frustration, confidence) drives the
        scoring's mood factors."""
        field = self._bridge.field()
        with self._bridge.errors("resonate in"):
            hits: list[Hit] = field.resonate(query, k, session=session, tags=tags, affect=_engine_affect(affect),
                                             **self._deferred())
        return self._found(hits)


_AFFECT: list[Any] = []  # the engine's Affect, imported by the first recall that has one


def _engine_affect(affect: Mapping[str, float] | None) -> Any:
    if affect is None:
        return None
    if not _AFFECT:  # a `from ... import` per recall went through the import machinery
        from soul.engines.resonance import Affect

        _AFFECT.append(Affect)
    return _AFFECT[0](**affect)

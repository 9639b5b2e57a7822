"""Re-embedding a field with another model: staged beside the field, then one atomic switch.

    open the store (a writer; refused while another process has the field open)
    ─► embed every live memory's text with the target model, `batch` at a time, appending
       the vectors to ``<field>/reembed/vectors.f32`` (fsynced) and the rows done to
       ``progress.json`` — the field itself is not touched, so a crash here leaves it as it
       was, on its old model
    ─► switch: the vectors and the new model's record replace the old ones in the state, the
       saved HNSW index is deleted (rebuilt at the next recall), and one snapshot is written
       (temporary file, fsync, rename): the record travels inside it with the vectors, so a
       crash before the rename leaves the old field, after it the new one — never a mix
    ─► the staging folder is removed.

With session context (``context_weight``, field/context.py) each memory is mixed with the
new vector of the memory it follows in its session, replaying remember's chain from the
graph's ``follows`` edges (field/replay.py says what the replay cannot know). Rows are staged
in row order and a predecessor is always an earlier row, so a resumed run reads the
predecessors it needs from what was staged and stages exactly what one run would.

Restartable: a run that finds a staging folder for the same target model resumes after the
last row it recorded, as long as those rows are still the same memories (their ids; a row's
text never changes); memories written since are embedded after them. A different target
starts again. Nothing else may write the field during the run: writers
alive at the start or at the switch are refused (`FieldInUse`), and so is a switch that finds
entries a writer logged while the run went on (they would replay over the new vectors);
the next run keeps what was staged.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbedderError, FieldInUse, FieldNotFound
from ..recall.models import EmbedderIdentity, identity_of
from ..store import ops
from ..store.durable import Store
from ..store.state import State, alloc_vectors
from .embedding import unit_rows
from .replay import links_at, mix_into

__all__ = ["ReembedReport", "reembed_field"]

STAGE = "reembed"


@dataclass(frozen=True)
class ReembedReport:
    """What a `reembed_field` run did."""

    path: str
    held: str | None  # the model before (described), None if the field had no record
    target: str  # the model after (described)
    memories: int  # live memories the field holds
    embedded: int  # memories embedded by this run (the rest were staged by an earlier one)
    resumed_from: int  # rows an earlier, interrupted run had staged
    seconds: float
    switched: bool  # False: the field already held the target model, nothing was done


def reembed_field(path: str | Path, embedder: Any, *, batch: int = 256,
                  progress: Callable[[int, int], None] | None = None,
                  context_weight: float | None = 0.5,
                  **store_options: Any) -> ReembedReport:
    """Re-embed every memory of the field at `path` with `embedder` and record its model
    (the module docstring says how it stays atomic and restartable). `context_weight` is the
    field's (`FieldConfig.context_weight`): the session chains are replayed with it (None or
    0: each text alone). `progress(done, total)` after each batch, in rows. Raises
    `FieldNotFound`, `FieldInUse`, or `EmbedderError` when the model fails on a text (what was
    staged is kept for the next run)."""
    path = Path(path)
    started = time.perf_counter()
    if not ((path / "wal").is_dir() or (path / "snapshots").is_dir()):
        raise FieldNotFound(path, hint="pass the folder of an existing field to re-embed")
    target = identity_of(embedder)
    store = Store(path, **store_options)
    try:
        _refuse_other_writers(store)
        st = store.state
        held = EmbedderIdentity.from_record(st.embedder) if st.embedder else None
        if held is not None and held.same_model(target) and not st.pending_rows():
            return ReembedReport(str(path), held.describe(), target.describe(), len(st), 0, 0,
                                 time.perf_counter() - started, switched=False)
        stage = path / STAGE
        plan: dict[str, Any] = {"target": target.record()}
        weight = float(context_weight or 0.0)
        if weight:
            plan["context_weight"] = weight  # staged rows of another weight do not resume
        links = links_at(path, st) if weight else {}
        done = _resume(stage, plan, st, target.dim)
        resumed = done
        vectors_file = stage / "vectors.f32"
        vectors = np.zeros((st.n_rows, target.dim), np.float32)
        if done:  # the chain goes on from the staged rows: their vectors are final
            vectors[:done] = np.fromfile(vectors_file, dtype="<f4",
                                         count=done * target.dim).reshape(done, target.dim)
        with open(vectors_file, "r+b" if done else "wb") as fh:
            fh.truncate(done * target.dim * 4)
            fh.seek(0, os.SEEK_END)
            for start in range(done, st.n_rows, batch):
                stop = min(st.n_rows, start + batch)
                block = _embed_rows(st, range(start, stop), embedder, target.dim)
                if links:  # in row order: a memory's predecessor is an earlier row
                    mix_into(block, range(start, stop), links, weight,
                             lambda r: vectors[r] if st.is_alive(r) else None)
                vectors[start:stop] = block
                fh.write(block.tobytes())
                fh.flush()
                os.fsync(fh.fileno())
                _write_json(stage / "progress.json", {"plan": plan, "done": stop, "ids": _ids_crc(st, stop)})
                if progress is not None:
                    progress(stop, st.n_rows)
        _switch(store, vectors, target)
        shutil.rmtree(stage, ignore_errors=True)
        return ReembedReport(str(path), held.describe() if held else None, target.describe(),
                             len(st), st.n_rows - resumed, resumed,
                             time.perf_counter() - started, switched=True)
    finally:
        store.close()


def _embed_rows(st: State, rows: range, embedder: Any, dim: int) -> np.ndarray:
    """Unit vectors of the rows' texts (zeros for forgotten rows); `EmbedderError` if the
    model fails on any of them."""
    block = np.zeros((len(rows), dim), np.float32)
    alive = [i for i, r in enumerate(rows) if st.is_alive(r)]
    if not alive:
        return block
    out = embedder.embed([st.text[rows[i]] for i in alive])
    vecs = np.asarray(getattr(out, "vectors", out), dtype=np.float32)
    ok = getattr(out, "ok", None)
    ok = np.linalg.norm(vecs, axis=1) > 0 if ok is None else np.asarray(ok, bool)
    if vecs.shape != (len(alive), dim) or not ok.all():
        bad = len(alive) - int(ok.sum()) if vecs.shape[0] == len(alive) else len(alive)
        raise EmbedderError(
            f"the embedding model failed on {bad} of {len(alive)} memories (rows {rows.start}"
            f"–{rows.stop - 1}); nothing was switched and the rows before were kept: run "
            "reembed again to resume")
    block[alive] = unit_rows(vecs)
    return block


def _switch(store: Store, vectors: np.ndarray, target: EmbedderIdentity) -> None:
    """Replace the state's vectors and record, and make it durable as one snapshot; on any
    failure the state in memory is put back and nothing on disk has changed."""
    _refuse_other_writers(store)
    _refuse_unseen_entries(store)
    st = store.state
    n, dim = vectors.shape
    saved = (st._vectors, st.dim, bytearray(st.flags), st.embedder)
    fresh = alloc_vectors(max(n, 1024), dim)
    fresh[:n] = vectors
    st._vectors, st.dim, st.embedder = fresh, dim, target.record()
    for row in range(n):
        if st.is_alive(row):
            st.flags[row] &= ~ops.FLAG_PENDING_EMBED
        else:
            fresh[row] = 0.0  # forgotten after it was staged: a tombstone keeps no vector
    index = store.path / "index" / "vectors.hnsw"
    for stale in (index, index.with_name(index.name + ".meta.json")):
        stale.unlink(missing_ok=True)  # built from the old vectors: rebuilt on next recall
    try:
        written = store.compact()
    except BaseException:
        st._vectors, st.dim, st.flags, st.embedder = saved
        raise
    if written is None:
        st._vectors, st.dim, st.flags, st.embedder = saved
        raise FieldInUse(store.path, "another process is compacting it")


def _refuse_other_writers(store: Store) -> None:
    """`FieldInUse` if a writer other than this store holds its lock (a live process)."""
    own = store.writer.instance if store.writer is not None else None
    for lock in sorted(store.wal_dir.glob("*.lock")):
        if lock.stem == own:
            continue
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise FieldInUse(store.path, f"writer {lock.stem} is alive") from None
        finally:
            os.close(fd)


def _refuse_unseen_entries(store: Store) -> None:
    """`FieldInUse` if the log holds entries this store never read (a writer that opened,
    wrote and closed during the run): a snapshot now would hide them."""
    with Store(store.path, read_only=True) as now:
        own = store.writer.instance if store.writer is not None else None
        theirs = {k: v for k, v in now.state.covered.items() if k != own}
        ours = {k: v for k, v in store.state.covered.items() if k != own}
    if theirs != ours:
        raise FieldInUse(store.path, "another process wrote to it during the re-embedding "
                         "(run reembed again: it starts over from the new state)")


def _ids_crc(st: State, rows: int) -> int:
    """Identifies the first `rows` rows: a row's text never changes, so vectors staged for
    them stay valid while these ids hold these rows (accesses, observations, new memories
    and forgetting since do not matter; forgotten rows are zeroed at the switch)."""
    return zlib.crc32("\n".join(st.ids[:rows]).encode())


def _resume(stage: Path, plan: dict[str, Any], st: State, dim: int) -> int:
    """Rows an earlier run staged for the same target model and the same rows (0, with a
    fresh staging folder, if none)."""
    try:
        progress = json.loads((stage / "progress.json").read_text())
        done = int(progress["done"])
        size = (stage / "vectors.f32").stat().st_size
        if (progress["plan"] == plan and size >= done * dim * 4 and done <= st.n_rows
                and progress["ids"] == _ids_crc(st, done)):
            return done
    except (OSError, ValueError, KeyError, TypeError):
        pass
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    return 0


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)

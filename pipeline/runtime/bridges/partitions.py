"""A memory field past one machine: split by (soul, user), each partition opened only under its
lease, moved to a new owner without losing what the session store holds (docs/scale.md).

On a PostgreSQL session store a memory soul's field is not one folder but one per user, each
owned by one process at a time through a row of `field_leases` (`soul.store.partitions`):

    <root>/users/<user>/e<epoch>/      the field of (soul, user) as its epoch-<epoch> owner keeps it
    <root>/users/<user>/e<epoch>/partition.json   what of the store it holds: per session, the
                                       last commit whose memories were written

`<root>` is `$SOUL_SHARED_FIELDS/<soul>` when the deployment has storage every worker mounts,
else the soul's field folder under this process's data home (`memory.field`, or
`$SOUL_HOME/fields/<soul>`). `<user>` is the user id made safe for a path, plus a hash.

- **Holding.** `Partition.hold()` takes or renews the lease (one statement); a live lease of
  another owner is `LeaseHeld`. Each turn holds its partition before it runs and commits with
  the lease's fence (`Fence`): the store refuses the commit if the lease has moved on.
- **A new epoch, a new folder.** Each owner writes only its own epoch's folder. On taking the
  lease, the new owner fills `e<epoch>` from the newest older epoch's folder under `<root>`
  (copied, under that field's compaction lock, its `partition.json` first), or starts it
  empty when there is none; then it catches up from the store: every commit of the
  partition's sessions past `partition.json` is remembered again, in commit order
  (`partition_memories`; each turn records its items, `commits.remember`), with progress
  logged and a rate, saved as it goes so an interrupted rebuild resumes where it stopped.
  A stale owner's late write lands in its own old epoch's folder, which nobody reads again
  once a newer one exists: never merged. Before writing, the lease is checked (`LeaseLost`).
- **What moves and what is lost.** Memories of committed turns are never lost: whatever the
  new owner's folder lacks, the store's commits give back. With shared storage the new owner
  starts from the old owner's folder, so its learned state (confidence observations,
  accesses, the learner, relations) comes along. Without it, that state is lost since this
  machine last owned the partition (or all of it, on a machine that never did), and so are
  memories written into the field by other means than a turn (`soul memory ingest` into a
  partition's folder).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from hashlib import blake2b
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soul.errors import LeaseHeld, LeaseLost
from soul.records import Fence

if TYPE_CHECKING:
    from soul.store import Lease, SessionStore

log = logging.getLogger(__name__)

STATE = "partition.json"
SHARED_ENV = "SOUL_SHARED_FIELDS"
DEFAULT_TTL = 30.0
KEEP_OPEN = 64  # partitions with an open field per soul; the least recently used closes first
_EPOCH = re.compile(r"^e(\d+)$")


def process_owner() -> str:
    """This process's owner id when it is no `soul worker` (a worker uses its executor id)."""
    return f"proc:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def user_folder(user: str) -> str:
    """A user id as one safe path component: its plain characters, then a hash of all of it
    (two ids that differ only in unsafe characters stay apart)."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", user)[:40].lstrip(".") or "_"
    return f"{plain}-{blake2b(user.encode('utf-8', 'surrogatepass'), digest_size=6).hexdigest()}"


@dataclass
class Progress:
    """How a partition's field was made ready for its epoch, as logged."""

    source: str = ""  # kept (this owner's folder of this epoch), copied (an older epoch's), empty
    copied_from: int | None = None  # the epoch copied
    commits: int = 0  # commits remembered again from the store
    items: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        """Commits remembered again per second."""
        return self.commits / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Partition:
    """One (soul, user) partition of a soul's field, as this process owns it (or not)."""

    owners: Partitions
    user: str
    lease: Lease | None = None
    opened: Any = None  # the open Field of `lease.epoch`
    marks: dict[str, int] = field(default_factory=dict)  # session -> last commit remembered
    progress: Progress = field(default_factory=Progress)
    used: float = 0.0
    busy: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def soul(self) -> str:
        return self.owners.soul

    @property
    def base(self) -> Path:
        return self.owners.root() / "users" / user_folder(self.user)

    def folder(self, epoch: int | None = None) -> Path:
        """The field's folder of `epoch` (the lease's, by default)."""
        chosen = epoch if epoch is not None else (self.lease.epoch if self.lease is not None else 0)
        return self.base / f"e{chosen}"

    # -- the lease -------------------------------------------------------------------------

    def hold(self) -> Fence:
        """Take or renew the lease; make the field ready for its epoch. `LeaseHeld` when
        another live owner has it."""
        owners = self.owners
        with self.lock:
            lease = owners.store().take_lease(self.soul, self.user, owners.owner, owners.ttl)
            if lease is None:
                other = owners.store().lease(self.soul, self.user)
                who, until = (other.owner, other.expires) if other is not None else ("?", 0.0)
                raise LeaseHeld(
                    f"memory partition {self.soul}/{self.user} is owned by {who} (its lease runs until"
                    f" {time.strftime('%H:%M:%S', time.localtime(until))}): its turns run there; send them"
                    f" through the workers (SOUL_RUNNER=dbos), or wait until that owner stops", owner=who, expires=until)
            if self.lease is None or self.lease.epoch != lease.epoch or self.opened is None:
                self._close_field()
                self.lease = lease
                self._ready()
            self.lease = lease
            self.used = time.time()
            return lease.fence

    def open_field(self) -> Any:
        """The field, held: the lease renewed first when it is past half its time."""
        with self.lock:
            lease = self.lease
            if self.opened is None or lease is None or lease.expires - time.time() < self.owners.ttl / 2:
                self.hold()
            self.used = time.time()
            return self.opened

    def check(self) -> None:
        """`LeaseLost` unless this owner still holds the lease at its epoch (read from the
        store: what is checked right before a write)."""
        lease = self.lease
        row = self.owners.store().lease(self.soul, self.user)
        if lease is None or row is None or row.owner != lease.owner or row.epoch != lease.epoch:
            now = f"{row.owner} holds epoch {row.epoch}" if row is not None else "nobody holds it"
            self.owners.forget(self.user)
            raise LeaseLost(f"memory partition {self.soul}/{self.user}: the lease this process held"
                            f" (epoch {lease.epoch if lease else '?'}) has moved on ({now}): nothing written")

    @contextlib.contextmanager
    def using(self) -> Iterator[None]:
        """A turn or cycle runs on this partition: its lease is renewed with the heartbeat
        meanwhile, and it is not handed away."""
        with self.lock:
            self.busy += 1
        try:
            yield
        finally:
            with self.lock:
                self.busy -= 1
                self.used = time.time()

    # -- writing ---------------------------------------------------------------------------

    def remember(self, items: list[dict[str, Any]], session: str | None, commit: int | None) -> list[str | None]:
        """Write a committed turn's items (fenced); a commit already caught up is skipped."""
        with self.lock:
            field_ = self.open_field()
            if commit is not None and session is not None and commit <= self.marks.get(session, 0):
                return []
            self.check()
            ids: list[str | None] = field_.remember_many(items, session=session)
            if session:
                field_.primer.observe(session, [i for i in ids if i is not None])
                if commit is not None:
                    self.marks[session] = commit
                    self._save()
            return ids

    # -- making the field ready for an epoch -----------------------------------------------

    def _ready(self) -> None:
        assert self.lease is not None
        started = time.perf_counter()
        epoch, target = self.lease.epoch, self.folder()
        progress = Progress()
        if (target / STATE).is_file():
            progress.source = "kept"
        else:
            older = self._older_epochs(epoch)
            if older:
                progress.source, progress.copied_from = "copied", older[-1]
                self._copy(self.folder(older[-1]), target)
            else:
                progress.source = "empty"
                target.mkdir(parents=True, exist_ok=True)
                _write_state(target, {"soul": self.soul, "user": self.user, "epoch": epoch, "sessions": {}})
        state = _read_state(target)
        self.marks = {str(k): int(v) for k, v in (state.get("sessions") or {}).items()}
        self.opened = self.owners.open_at(target)
        self._catch_up(progress, started)
        for old in self._older_epochs(epoch):  # this epoch is ready: the older folders are done with
            shutil.rmtree(self.folder(old), ignore_errors=True)
        progress.seconds = time.perf_counter() - started
        self.progress = progress
        log.info("memory partition %s/%s, epoch %d (%s%s): %d commit(s) remembered again in %.1f s",
                 self.soul, self.user, epoch, progress.source,
                 f" from epoch {progress.copied_from}" if progress.copied_from is not None else "",
                 progress.commits, progress.seconds)

    def _older_epochs(self, epoch: int) -> list[int]:
        if not self.base.is_dir():
            return []
        found = []
        for child in self.base.iterdir():
            match = _EPOCH.match(child.name)
            if match and int(match.group(1)) < epoch and (child / STATE).is_file():
                found.append(int(match.group(1)))
        return sorted(found)

    def _copy(self, source: Path, target: Path) -> None:
        """`source` copied to `target` whole or not at all: its state first (it never claims
        more than the files copied after it hold), under its compaction lock (no snapshot
        replaces segments mid-copy)."""
        temporary = target.with_name(f"{target.name}.copy-{uuid.uuid4().hex[:8]}")
        state = _read_state(source)
        snapshots = source / "snapshots"
        snapshots.mkdir(parents=True, exist_ok=True)
        with open(snapshots / "compact.lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            shutil.copytree(source, temporary, ignore=shutil.ignore_patterns(STATE, "*.lock", "*.copy-*"))
        _write_state(temporary, {**state, "epoch": self.lease.epoch if self.lease else 0})
        os.replace(temporary, target)

    def _catch_up(self, progress: Progress, started: float) -> None:
        """Remember again, in commit order, what the store holds past this folder's marks;
        saved every few commits, so an interrupted catch-up resumes."""
        field_ = self.opened
        store = self.owners.store()
        last_log = saved = time.monotonic()
        for cid, sid, items in store.partition_memories(self.soul, self.user):
            if cid <= self.marks.get(sid, 0):
                continue
            if items:
                prepared = [self.owners.prepare(item, sid) for item in items]
                ids = field_.remember_many(prepared, session=sid)
                field_.primer.observe(sid, [i for i in ids if i is not None])
                progress.items += len(items)
            self.marks[sid] = cid
            progress.commits += 1
            now = time.monotonic()
            if now - saved > 1.0:
                self._save()
                saved = now
            if now - last_log > 5.0:
                elapsed = time.perf_counter() - started
                log.info("memory partition %s/%s: %d commit(s) remembered again, %.1f a second",
                         self.soul, self.user, progress.commits, progress.commits / max(elapsed, 1e-9))
                last_log = now
        if progress.commits:
            self._save()

    def _save(self) -> None:
        epoch = self.lease.epoch if self.lease is not None else 0
        _write_state(self.folder(), {"soul": self.soul, "user": self.user, "epoch": epoch, "sessions": self.marks})

    def _close_field(self) -> None:
        field_, self.opened = self.opened, None
        if field_ is not None:
            with contextlib.suppress(Exception):
                field_.close()

    def close(self) -> None:
        with self.lock:
            self._close_field()
            self.lease = None


@dataclass
class Partitions:
    """A soul's partitioned field: its partitions by user, this process's owner id and lease
    time, where the folders are, and how a field is opened (given by the memory bridge)."""

    soul: str
    local_root: Path
    store: Callable[[], SessionStore]
    open_at: Callable[[Path], Any]
    prepare: Callable[[dict[str, Any], str], dict[str, Any]]
    owner: str = field(default_factory=process_owner)
    ttl: float = DEFAULT_TTL
    claimed: bool = False  # a `soul worker` owns partitions here under its executor id
    _parts: dict[str, Partition] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def root(self) -> Path:
        """Where the partitions' folders are: shared storage when `$SOUL_SHARED_FIELDS` names
        it, else this data home's field folder of the soul."""
        shared = os.environ.get(SHARED_ENV, "").strip()
        return Path(shared).expanduser() / self.soul if shared else self.local_root

    def claim_as(self, owner: str, ttl: float) -> None:
        """Own partitions as `owner` (a worker's executor id) with leases of `ttl` seconds."""
        if owner != self.owner:
            self.release()
        self.owner, self.ttl, self.claimed = owner, ttl, True

    def partition(self, user: str) -> Partition:
        with self._lock:
            part = self._parts.get(user)
            if part is None:
                part = self._parts[user] = Partition(self, user)
                self._trim()
            return part

    def _trim(self) -> None:
        open_ = sorted((p.used, u) for u, p in self._parts.items() if p.opened is not None and not p.busy)
        for _, user in open_[:max(0, len(open_) - KEEP_OPEN)]:
            self._parts[user].close()

    def forget(self, user: str) -> None:
        """This process lost `user`'s partition: close its field."""
        part = self._parts.get(user)
        if part is not None:
            part.close()

    def held(self) -> list[str]:
        """The users whose partitions this process holds a lease on (as it last knew)."""
        return sorted(u for u, p in list(self._parts.items()) if p.lease is not None)

    def renew(self, now: float | None = None) -> int:
        """Renew the leases of the partitions in use or used within the lease time (the
        heartbeat's call); an idle one is left to lapse. How many were renewed."""
        at = time.time() if now is None else now
        users = [u for u, p in list(self._parts.items()) if p.lease is not None and (p.busy or at - p.used < self.ttl)]
        if not users:
            return 0
        done = self.store().renew_leases(self.owner, [(self.soul, u) for u in users], self.ttl, at)
        for user in users:
            part = self._parts[user]
            if part.lease is not None:
                part.lease = dataclasses.replace(part.lease, expires=at + self.ttl)
        return done

    def release(self, keep: Callable[[str], bool] | None = None) -> list[str]:
        """Close and give up the partitions not in use that `keep` says to let go (all, when
        None): their leases lapse now, for their next owner. The users released."""
        gone = [u for u, p in list(self._parts.items())
                if p.lease is not None and not p.busy and (keep is None or not keep(u))]
        if not gone:
            return []
        for user in gone:
            self._parts[user].close()
        self.store().release_leases(self.owner, [(self.soul, u) for u in gone])
        return gone

    def close(self) -> None:
        """Close every partition's field and give its lease up."""
        with contextlib.suppress(Exception):
            self.release()
        for part in list(self._parts.values()):
            part.close()


def _read_state(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_state(folder: Path, state: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".{STATE}.{uuid.uuid4().hex[:8]}"
    temporary.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
    os.replace(temporary, folder / STATE)


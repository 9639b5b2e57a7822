"""A memory partition changing owner, measured: how fast a new owner gets it back, and what it
loses without shared storage.

One user's partition of claudius on a real PostgreSQL (started as the tests start it): N
committed turns, each recording the exchange it wrote to the field (`commits.remember`, as a
turn does), spread over S sessions. The first owner (data home A) builds the partition, then
uses it: R recalls (each logs its hits as accesses) and F feedbacks (a confidence observation
each, as `memory.learn` gives). Then it lets the lease go and another process takes it:

- **without shared storage** (data home B, nothing of the partition on its disk): the new
  owner rebuilds it from the store, re-remembering every turn in commit order. Reported: the
  rebuild's rate (commits and items a second), and what did not come along: accesses and
  confidence observations (the learned state, which no commit records);
- **with shared storage** (`SOUL_SHARED_FIELDS`, both owners on it): the new owner copies the
  old owner's folder. Reported: the copy's time, and that nothing was lost;
- **resumed**: a rebuild stopped half-way (the process killed) and taken up again by the same
  owner: reported, the commits the second run remembered (only the rest).

    python benchmarks/partitions.py                      # 2,000 turns in 20 sessions
    python benchmarks/partitions.py --turns 500 --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOPICS = ["lighthouse", "harbour", "raven", "storm", "jetty", "ledger", "lantern", "tide", "compass", "anchor"]
WORDS = [
    "amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "hazel", "indigo", "juniper", "kelp", "lichen",
    "marble", "nectar", "onyx", "pewter", "quartz", "russet", "saffron", "thistle", "umber", "velvet", "willow",
    "xylem", "yarrow", "zephyr", "acorn", "bramble", "cobalt", "dune", "estuary", "fennel", "glacier", "heron", "iris",
    "jasper", "kestrel", "lagoon", "meadow", "nettle", "orchard", "pebble", "quill", "reed", "sorrel", "tundra",
    "urchin", "vale", "wren", "yew", "zinnia",
]


def _sentence(n: int) -> str:
    """Words picked by `n`: every turn says something of its own (no two are near-duplicates)."""
    picks, x = [], n * 2654435761 + 97
    for _ in range(9):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        picks.append(WORDS[x % len(WORDS)])
    return " ".join(picks)


def _soul(home: Path) -> Any:
    import soul
    from soul.providers import ScriptedProvider

    return soul.load("claudius", provider=ScriptedProvider([]), home=home)


def _commit_turns(url: str, home: Path, turns: int, sessions: int, user: str) -> None:
    from soul.records import Commit, MessageRecord
    from soul.store import SessionStore

    store = SessionStore.open(home, url=url)
    ids = [store.create_session("claudius", user).id for _ in range(sessions)]
    for n in range(turns):
        sid = ids[n % len(ids)]
        topic = TOPICS[n % len(TOPICS)]
        said = f"Note {n} on the {topic}: {_sentence(n)}."
        exchange = f"{user}: {said}\nclaudius: Noted, {topic} {n}."
        store.commit(Commit(session_id=sid, base_turn=n // len(ids), messages=(MessageRecord("external", "user", said),),
                            remember=({"text": exchange, "kind": "episode", "source": "turn"},)))
    store.close()


def _learned(field: Any) -> tuple[int, int]:
    """(accesses logged, confidence observations made) over the whole field."""
    accesses = observations = 0
    for mid in field.store.state.rows:
        memory = field.get(mid)
        accesses += memory.access_count
        observations += memory.confidence.n
    return accesses, observations


def _use(field: Any, recalls: int, feedbacks: int) -> None:
    hits: list[str] = []
    for i in range(recalls):
        found = field.recall(f"the {TOPICS[i % len(TOPICS)]} keeper's note", 5)
        hits += [h.id for h in found]
    field.flush_accesses()
    for mid in hits[:feedbacks]:
        field.feedback(mid, True)
    field.sync()


def _take(home: Path, user: str) -> tuple[Any, Any, float]:
    s = _soul(home)
    started = time.perf_counter()
    bridge = s.memory.for_user(user)
    bridge.hold()
    return s, bridge, time.perf_counter() - started


def scenario(url: str, work: Path, args: argparse.Namespace, shared: bool) -> dict[str, Any]:
    user = f"ann-{'shared' if shared else 'local'}"
    if shared:
        os.environ["SOUL_SHARED_FIELDS"] = str(work / "shared")
    else:
        os.environ.pop("SOUL_SHARED_FIELDS", None)
    _commit_turns(url, work / "setup", args.turns, args.sessions, user)
    first, bridge, built = _take(work / f"a-{user}", user)
    part = bridge._partition
    _use(bridge.field(), args.recalls, args.feedbacks)
    before = _learned(bridge.field())
    memories = len(bridge.field())
    first.close()  # its lease given up
    second, moved, seconds = _take(work / f"b-{user}", user)
    after = _learned(moved.field())
    progress = moved._partition.progress
    out = {
        "memories": memories,
        "first_build": {"source": part.progress.source, "commits": part.progress.commits, "seconds": round(built, 2),
                        "commits_per_s": round(part.progress.rate, 1)},
        "move": {"source": progress.source, "commits_remembered_again": progress.commits, "seconds": round(seconds, 2),
                 "commits_per_s": round(progress.rate, 1) if progress.commits else None},
        "memories_after_move": len(moved.field()),
        "accesses": {"before": before[0], "after": after[0], "lost": before[0] - after[0]},
        "confidence_observations": {"before": before[1], "after": after[1], "lost": before[1] - after[1]},
    }
    second.close()
    return out


def resumed(url: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """A rebuild killed half-way, then taken up again by the same owner (same data home)."""
    os.environ.pop("SOUL_SHARED_FIELDS", None)
    user = "ann-resumed"
    _commit_turns(url, work / "setup", args.turns, args.sessions, user)
    home = work / "c"
    child = subprocess.Popen([sys.executable, __file__, "--role", "rebuild", "--url", url, "--home", str(home), "--user", user],
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    from soul.runtime.bridges.partitions import STATE, user_folder
    from soul.store import SessionStore

    store = SessionStore.open(work / "setup", url=url)
    ids = [cid for cid, _, _ in store.partition_memories("claudius", user)]
    halfway = ids[len(ids) // 2]
    state = home / "fields" / "claudius" / "users" / user_folder(user) / "e1" / STATE
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and child.poll() is None:
        try:
            marks = json.loads(state.read_text()).get("sessions", {}) if state.is_file() else {}
        except ValueError:
            marks = {}
        if marks and max(marks.values()) >= halfway:  # saved past half-way: kill it there
            break
        time.sleep(0.05)
    child.kill()
    child.wait()
    lease = store.lease("claudius", user)
    store.release_leases(lease.owner)  # the killed process's lease, as if it had lapsed; same owner id
    store.close()
    first_run = sum(1 for cid in ids if cid <= max(json.loads(state.read_text())["sessions"].values()))
    owner = lease.owner
    s = _soul(home)
    s.memory.partitions().claim_as(owner, 30.0)  # the same owner id: the same epoch, its folder kept
    bridge = s.memory.for_user(user)
    started = time.perf_counter()
    bridge.hold()
    progress = bridge._partition.progress
    out = {"turns": args.turns, "source": progress.source, "first_run_commits_about": first_run,
           "second_run_commits": progress.commits,
           "seconds": round(time.perf_counter() - started, 2), "memories": len(bridge.field())}
    s.close()
    return out


def rebuild_child(args: argparse.Namespace) -> int:
    os.environ["SOUL_STORE"] = args.url
    s = _soul(Path(args.home))
    s.memory.partitions().claim_as("resume-owner", 30.0)
    s.memory.for_user(args.user).hold()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=2000)
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--recalls", type=int, default=200)
    p.add_argument("--feedbacks", type=int, default=100)
    p.add_argument("--json", action="store_true")
    p.add_argument("--role", default="run", choices=("run", "rebuild"), help=argparse.SUPPRESS)
    for hidden in ("--url", "--home", "--user"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "rebuild":
        return rebuild_child(args)
    sys.path.insert(0, str(ROOT / "tests"))
    import postgres_server

    work = Path(tempfile.mkdtemp(prefix="soul-partitions-"))
    url = postgres_server.server().url
    os.environ["SOUL_STORE"] = url
    try:
        result = {"turns": args.turns, "sessions": args.sessions, "recalls": args.recalls, "feedbacks": args.feedbacks,
                  "without_shared_storage": scenario(url, work, args, shared=False),
                  "with_shared_storage": scenario(url, work, args, shared=True),
                  "resumed": resumed(url, work, args), "load": os.getloadavg(), "cores": os.cpu_count()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2) if args.json else "\n".join(f"{k:>24}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

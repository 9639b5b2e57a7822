"""Past one machine, measured: N sessions whose subconscious ticks every 60 s, run by W `soul
worker` processes (DBOS) on one PostgreSQL, then one worker killed mid-run.

The sessions are csd's, with the subconscious on an `interval` loop (`--interval`, 60 s) and
both model slots on the scripted provider answering after `--latency` (200 ms) — a model's
wait, no model. The sessions are created over the first interval (N/interval a second), so
their cycles spread over the minute as real sessions' would. After `--minutes` one worker is
SIGKILLed while it holds a cycle in flight (a PENDING workflow); the others go on for `--after` minutes, take over its in-flight cycles once it has
been silent for `--dead-after` seconds, then everything stops and the store is read:

- lag: a cycle's start (its commit time minus the cycle's own duration, from its trace) minus
  its due time (the previous cycle's commit plus the interval); p50/p95/max, before the kill
  and after it;
- cycles lost: sessions whose last cycle is older than interval + dead-after + 10 s at the end
  (each such session missed at least one due cycle), plus any gap in a session's cycle numbers;
- cycles run twice: cycle numbers committed more than once (the store; goal 0), and cycle
  workflows dispatched more than once: the killed worker's in-flight ones, put back on their
  queue by the survivor (its `recovered`; DBOS's `resume_workflows` resets
  `recovery_attempts`, so that column no longer counts them) and each re-run as a no-op or
  as its first complete run;
- store rows per second: rows added to the session store's tables, and to DBOS's;
- CPU: PostgreSQL's (the postmaster, its live backends, and its reaped children) against the
  workers' (each one's own user+system time, from /proc) and the scheduler's tick time;
- the split: how many shards each worker holds, how many sessions each poll reads (its
  shards' only), and how many shards moved when a worker joined or died.

PostgreSQL is started as the tests start it (`tests/postgres_server.py`: initdb in a temp dir,
fsync off) unless `--url` names one (then its CPU is not measured). Usage:

    python benchmarks/scale.py                                   # 1,000 sessions, 2 workers, 10 min
    python benchmarks/scale.py --sessions 100 --minutes 2 --after 1   # a short validation run
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUB = ("<M_AND_C><mood>calm</mood><criteria>listen</criteria></M_AND_C>"
       "<S_loud></S_loud><S_quiet>a quiet note</S_quiet><trigger>false</trigger>")
CON = "<ID_quiet>a private thought</ID_quiet><ID_loud>hello there</ID_loud>"
STORE_TABLES = ("sessions", "commits", "messages", "traces", "mood_and_criteria", "context_summaries",
                "state", "persona_cores", "working_memory", "user_models")
HZ = os.sysconf("SC_CLK_TCK")


def blueprint(folder: Path, interval: float) -> Path:
    """csd with an interval subconscious and scripted slots (the workers replace the scripts)."""
    import yaml

    from soul.language.finding import builtin_folder

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("csd.md", "csd_core.md"):
        shutil.copy(builtin_folder() / name, folder / name)
    data = yaml.safe_load((builtin_folder() / "csd.yaml").read_text())
    data["models"] = {"conscious": "scripted:conscious.yaml", "subconscious": "scripted:sub.yaml"}
    data["processes"]["subconscious"].update(loop="interval", interval_seconds=interval)
    (folder / "csd.yaml").write_text(yaml.safe_dump(data))
    (folder / "conscious.yaml").write_text(json.dumps([CON]))
    (folder / "sub.yaml").write_text(json.dumps([SUB]))
    return folder / "csd.yaml"


# -- a worker (this script run with --role worker) ------------------------------------------


def worker_main(args: argparse.Namespace) -> int:
    """`soul worker`'s engine and scheduler, with scripted slots that wait `latency`, writing
    its counters to `--summary` every few seconds (a SIGKILLed worker leaves its last ones)."""
    import soul
    from soul.providers import ScriptedProvider
    from soul.runtime.durable.engine import Engine
    from soul.runtime.durable.recovery import Heartbeat
    from soul.runtime.durable.worker import Worker
    from soul.store import SessionStore

    replies = 200_000
    slots = {"subconscious": ScriptedProvider([SUB] * replies, latency=args.latency),
             "conscious": ScriptedProvider([CON] * replies, latency=args.latency)}
    s = soul.load(args.blueprint, home=args.home, provider=slots)
    engine = Engine(s, args.url, executor=args.executor, poll_seconds=min(args.poll, 1.0))
    engine.launch()
    store = SessionStore.open(url=args.url)
    worker = Worker(s, engine, store, poll=args.poll,
                    heartbeat=Heartbeat(store, engine, args.executor, s.name, args.dead_after))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: worker.stop())
    ticks: list[float] = []
    polled: list[float] = []
    written = 0.0

    def summary() -> None:
        data = {"executor": args.executor, "ticks": len(ticks), "tick_ms": _spread([t * 1000 for t in ticks]),
                "polled": _spread(polled[-200:]), "shards": len(worker.shards or ()), "moved": worker.moved,
                "enqueued": worker.enqueued, "model_calls": slots["subconscious"].calls,
                "cpu_s": _cpu(os.getpid()), "taken_over": worker.heartbeat.taken if worker.heartbeat else [],
                "recovered": worker.heartbeat.recovered if worker.heartbeat else 0}
        Path(args.summary).write_text(json.dumps(data))

    try:
        while not worker.stopping.is_set():
            started = time.perf_counter()
            assert worker.heartbeat is not None
            worker.heartbeat.tick()
            worker.tick()
            ticks.append(time.perf_counter() - started)
            polled.append(float(worker.polled))
            if time.monotonic() - written > 3:
                summary()
                written = time.monotonic()
            worker.stopping.wait(args.poll)
    finally:
        summary()
        engine.shutdown()
    return 0


# -- the run ---------------------------------------------------------------------------------


def _cpu(pid: int, children: bool = False) -> float:
    """User+system CPU seconds of a process (with `children`, its reaped children's too)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / HZ


def _postgres_cpu(postmaster: int) -> float:
    total = _cpu(postmaster, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == postmaster:
                total += _cpu(int(entry.name))
    return total


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(values), "p50": round(statistics.median(ordered), 1),
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
            "max": round(ordered[-1], 1)}


def _pending(conn: Any, executor: str) -> int:
    return int(conn.execute("SELECT count(*) FROM dbos.workflow_status WHERE status = 'PENDING'"
                            " AND executor_id = %s", (executor,)).fetchone()[0])


def _rows(conn: Any) -> tuple[int, int]:
    store = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in STORE_TABLES)
    if conn.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()[0] is None:
        return int(store), 0  # no worker launched DBOS yet
    dbos = sum(conn.execute(f"SELECT count(*) FROM dbos.{t}").fetchone()[0]
               for t in ("workflow_status", "operation_outputs"))
    return int(store), int(dbos)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    sys.path.insert(0, str(ROOT / "tests"))
    import postgres_server

    import soul

    work = Path(tempfile.mkdtemp(prefix="soul-scale-"))
    home = work / "home"
    postmaster = None
    if args.url:
        url = args.url
    else:
        server = postgres_server.server()
        url, postmaster = server.url, server.process.pid
    os.environ["SOUL_STORE"] = url
    path = blueprint(work / "csd", args.interval)
    s = soul.load(path, home=home)
    s.store  # noqa: B018 - migrated before the workers start
    env = {**os.environ, "SOUL_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(ROOT / "benchmarks"), *sys.path])}
    workers = []
    for i in range(1, args.workers + 1):
        summary = work / f"worker{i}.json"
        cmd = [sys.executable, __file__, "--role", "worker", "--executor", f"w{i}", "--url", url,
               "--blueprint", str(path), "--home", str(home), "--summary", str(summary),
               "--latency", str(args.latency), "--poll", str(args.poll), "--dead-after", str(args.dead_after)]
        log = (work / f"worker{i}.log").open("w")
        workers.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), summary))
    pg_cpu0 = _postgres_cpu(postmaster) if postmaster else 0.0
    started = time.time()
    with psycopg.connect(url, autocommit=True) as conn:
        rows0 = _rows(conn)
        per_second = args.sessions / args.interval
        for n in range(args.sessions):  # spread over the first interval
            s.session(user=f"user{n}")
            wait = started + (n + 1) / per_second - time.time()
            if wait > 0:
                time.sleep(wait)
        print(f"{args.sessions} sessions created in {time.time() - started:.0f} s", flush=True)
        kill_at = started + args.minutes * 60
        while time.time() < kill_at:
            time.sleep(1)
        victim = workers[0][0]
        deadline = time.time() + 60  # kill it mid-cycle: while it holds a PENDING workflow
        while _pending(conn, "w1") == 0 and time.time() < deadline:
            time.sleep(0.02)
        victim_cpu = _cpu(victim.pid)
        killed = time.time()
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        in_flight = _pending(conn, "w1")  # after the kill: what it left PENDING
        print(f"killed w1 at {killed - started:.0f} s with {in_flight} workflow(s) in flight;"
              f" going on for {args.after} min", flush=True)
        time.sleep(args.after * 60)
        ended = time.time()
        pg_cpu = (_postgres_cpu(postmaster) - pg_cpu0) if postmaster else None
        cpus = [victim_cpu] + [_cpu(p.pid) for p, _ in workers[1:]]
        for p, _ in workers[1:]:
            p.send_signal(signal.SIGTERM)
        for p, _ in workers[1:]:
            p.wait(timeout=120)
        rows = _rows(conn)
        result = measure(conn, args, started, killed, ended)
        result["in_flight_at_kill"] = in_flight
        summaries = [json.loads(summary.read_text()) if summary.exists() else {} for _, summary in workers]
        result["dispatched_twice"] = sum(int(w.get("recovered", 0)) for w in summaries)
        result.update(rows_per_s={"store": round((rows[0] - rows0[0]) / (ended - started), 1),
                                  "dbos": round((rows[1] - rows0[1]) / (ended - started), 1)},
                      cpu_s={"postgres": round(pg_cpu, 1) if pg_cpu is not None else None,
                             "workers": [round(c, 1) for c in cpus]},
                      workers=[json.loads(summary.read_text()) if summary.exists() else None for _, summary in workers],
                      old_poll_ms=old_poll(s, args.sessions, args.workers))
    s.close()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    result.update(sessions=args.sessions, n_workers=args.workers, minutes=args.minutes, after=args.after,
                  interval=args.interval, latency=args.latency, seconds=round(ended - started),
                  load=os.getloadavg(), cores=os.cpu_count(), work=str(work))
    return result


def measure(conn: Any, args: argparse.Namespace, started: float, killed: float, ended: float) -> dict[str, Any]:
    """Lag, lost and twice-run cycles, read from the store and DBOS's tables."""
    rows = conn.execute(
        "SELECT c.session_id, c.cycle, c.time, t.json FROM commits c JOIN traces t ON t.commit_id = c.id"
        " WHERE c.kind = 'cycle' AND c.process = 'subconscious' ORDER BY c.session_id, c.cycle, c.id"
    ).fetchall()
    by_session: dict[str, list[tuple[int, float, float]]] = {}
    for sid, cycle, at, trace in rows:
        total = json.loads(trace).get("total_ms", 0.0) / 1000
        by_session.setdefault(sid, []).append((int(cycle), float(at), float(at) - total))
    sessions = [r[0] for r in conn.execute("SELECT id FROM sessions").fetchall()]
    before, after, twice, gaps, lost = [], [], 0, 0, 0
    grace = args.interval + args.dead_after + 10
    for sid in sessions:
        cycles = by_session.get(sid, [])
        numbers = [c[0] for c in cycles]
        twice += len(numbers) - len(set(numbers))
        gaps += (max(numbers) - len(set(numbers))) if numbers else 0
        if not cycles or ended - cycles[-1][1] > grace:
            lost += 1
        for (_, prev_end, _), (_, _, start) in itertools.pairwise(cycles):
            lag = start - (prev_end + args.interval)
            (before if start < killed else after).append(lag * 1000)
    return {"cycles": len(rows), "lag_ms_before_kill": _spread(before), "lag_ms_after_kill": _spread(after),
            "sessions_behind_at_end": lost, "cycle_gaps": gaps, "committed_twice": twice}


def old_poll(s: Any, sessions: int, workers: int) -> dict[str, float]:
    """What the first scheduler read on each poll (a mind_history per session), timed once,
    against one query of every session (the second scheduler) and one of a worker's shards
    (this one, with `workers` live)."""
    from soul.store.shards import share

    started = time.perf_counter()
    ids = [info.id for info in s.store.sessions(s.name)]
    for sid in ids:
        s.store.mind_history(sid, "subconscious")
    old = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    s.store.session_marks(s.name)
    every = (time.perf_counter() - started) * 1000
    mine = share("w1", [f"w{i}" for i in range(1, workers + 1)])
    started = time.perf_counter()
    s.store.session_marks(s.name, mine)
    return {"old_reads_ms": round(old, 1), "all_sessions_ms": round(every, 1),
            "own_shards_ms": round((time.perf_counter() - started) * 1000, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--minutes", type=float, default=10.0, help="minutes before one worker is killed")
    p.add_argument("--after", type=float, default=2.0, help="minutes the others go on after the kill")
    p.add_argument("--interval", type=float, default=60.0, help="seconds between a session's cycles")
    p.add_argument("--latency", type=float, default=0.2, help="seconds each model call waits")
    p.add_argument("--poll", type=float, default=0.5, help="the workers' --poll")
    p.add_argument("--dead-after", type=float, default=15.0, help="the workers' --dead-after")
    p.add_argument("--url", help="an existing PostgreSQL (default: start one in a temp dir)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (worker logs and summaries)")
    p.add_argument("--role", default="run", choices=("run", "worker"), help=argparse.SUPPRESS)
    for hidden in ("--executor", "--blueprint", "--home", "--summary"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "worker":
        return worker_main(args)
    if args.workers < 2:
        p.error("--workers: at least 2 (one is killed)")
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

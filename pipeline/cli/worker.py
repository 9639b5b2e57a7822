"""`soul worker [SOUL_OR_PATH]`: run the background cycles of a soul's sessions as durable
workflows on DBOS, from the PostgreSQL session store (`SOUL_STORE`). See docs/scale.md."""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any

from soul.cli.terminal import say
from soul.errors import SoulError


def add_parser(sub: Any, cycles: Any) -> None:
    p = sub.add_parser(
        "worker", help="run a soul's background cycles as durable workflows (DBOS, PostgreSQL)",
        description="Run the due background cycles of every session of a soul stored in SOUL_STORE "
        "(PostgreSQL), one DBOS workflow per cycle, and the spontaneous turns its triggers fire: a worker "
        "killed mid-cycle loses nothing and runs nothing twice once another worker takes over "
        "(--dead-after) or it restarts with the same --executor. Workers split the sessions among "
        "themselves by shard. For a soul with memory, each worker owns the memory partitions of its "
        "shards' users and runs their turns, which `soul run` and `soul serve` send with SOUL_RUNNER=dbos "
        "(docs/scale.md).",
    )
    p.add_argument("blueprint", metavar="SOUL_OR_PATH", nargs="?", default="csd", help="the soul (default: csd)")
    p.add_argument("--model", help="use this model for every step (overrides the blueprint and SOUL_MODEL)")
    p.add_argument("--script", metavar="FILE", help="scripted replies, as `soul run --script`")
    p.add_argument("--executor", default="local",
                   help="this worker's id, unique per worker; a worker restarted with its id finishes its cycles (default: local)")
    p.add_argument("--dead-after", type=float, default=30.0, metavar="SECONDS",
                   help="a worker silent this long is dead: a survivor re-enqueues its in-flight workflows"
                   " (default 30; 0: never take over)")
    p.add_argument("--rate", metavar="CYCLES/SECONDS", help="start at most this many cycles per period across all workers (e.g. 600/60)")
    p.add_argument("--poll", type=float, default=0.5, metavar="SECONDS", help="how often due cycles are looked for (default 0.5)")
    p.add_argument("--cycles", type=cycles, metavar="N", help="stop once every session has N cycles of each process (or nothing to react to)")
    p.set_defaults(func=worker_command, record=None, replay=None)


def worker_command(args: argparse.Namespace) -> int:
    from soul.cli.run import _soul_for
    from soul.extras import require
    from soul.runtime import DurableEngine as Engine
    from soul.runtime import DurableHeartbeat as Heartbeat
    from soul.runtime import DurableWorker as Worker
    from soul.runtime import parse_rate, system_database_url
    from soul.store import SessionStore

    url = os.environ.get("SOUL_STORE", "")
    system_database_url(url)  # refuses the SQLite default before anything loads
    require("durable", "soul worker", ("dbos", "psycopg"))
    rate = parse_rate(args.rate) if args.rate else None
    if args.poll <= 0:
        raise SoulError(f"--poll {args.poll}: give a positive number of seconds")
    if args.dead_after < 0:
        raise SoulError(f"--dead-after {args.dead_after}: give seconds (0: never take over a dead worker)")
    soul = _soul_for(args)
    parts = soul.memory.partitions()
    if not soul.blueprint.processes and parts is None:
        raise SoulError(f"soul '{soul.name}' has no background process and no memory: a worker has nothing to run for it")
    if parts is not None:  # its users' memory partitions are owned under this executor's name
        parts.claim_as(args.executor, args.dead_after or 30.0)
    engine = Engine(soul, url, executor=args.executor, rate=rate, poll_seconds=min(args.poll, 1.0))
    store = SessionStore.open(url=url)
    engine.prepare()  # DBOS's tables made before this worker is seen live (its first beat)
    beat = Heartbeat(store, engine, args.executor, soul.name, args.dead_after) if args.dead_after else None
    if beat is not None:
        # its id its own again before the engine may run anything under it: a worker restarted
        # with the id of one a survivor took over, killed between launch and its first beat,
        # would leave what it ran pending under an id marked taken, which no survivor claims again
        beat.claim()
    engine.launch()
    worker = Worker(soul, engine, store, poll=args.poll, cycles=args.cycles, heartbeat=beat)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: worker.stop())
    say(f"soul worker: {soul.name}, executor {args.executor!r}", flush=True)
    try:
        worker.run()
    finally:
        engine.shutdown()
        soul.close()  # a memory soul's partitions closed and their leases given up, for the next owner
    say(f"soul worker: stopped after enqueuing {worker.enqueued} cycles and {worker.fired} spontaneous turns", flush=True)
    return 0

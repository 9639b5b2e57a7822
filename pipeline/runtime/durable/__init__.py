"""Durable execution: background cycles and triggers as DBOS workflows in `soul worker`
processes, across processes and machines.

`engine` registers the workflows and enqueues cycles; `worker` is a worker's loop (its
sessions' schedules, the queue); `recovery` beats a heartbeat and takes over a dead worker's
pending cycles; `triggers` fires triggers in workers, idempotently; `feed` hears commits made
in other processes (PostgreSQL LISTEN/NOTIFY) for `soul run` and `soul serve`. Built on the
background mind, never the reverse.
"""

from soul.runtime.durable.engine import Engine, parse_rate, system_database_url
from soul.runtime.durable.feed import CommitFeed, Heard, commit_events, feed_for, refresh_minds
from soul.runtime.durable.recovery import Heartbeat
from soul.runtime.durable.worker import Worker

__all__ = [
    "CommitFeed",
    "Engine",
    "Heard",
    "Heartbeat",
    "Worker",
    "commit_events",
    "feed_for",
    "parse_rate",
    "refresh_minds",
    "system_database_url",
]

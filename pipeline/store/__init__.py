"""Persistence under the data home (`$SOUL_HOME`, default `~/.soul`): the SQLite session store
(sessions, messages, state, versioned user models, working memory; one transaction a turn),
its migrations, export, and the JSONL log mirror; and the redaction of secret values that
every writer of soul applies (`redact`), and a store locator's passwords masked in messages
(`mask_passwords`)."""

from soul.store.conninfo import mask_passwords
from soul.store.due import Impulse, SessionMark, TriggerMarks
from soul.store.home import (
    data_home,
    db_path,
    fields_dir,
    session_logs_dir,
    soul_home,
    valid_session_id,
)
from soul.store.minds import MindHistory, MindMessage, MindMood, PersonaCore
from soul.store.notify import ORIGIN, Listener, Notice, StoredCommit, channel
from soul.store.partitions import Lease
from soul.store.redaction import (
    REDACTED,
    StreamRedactor,
    redact,
    redact_commit,
    redact_data,
    remember,
    secrets,
)
from soul.store.sessions import SessionStore
from soul.store.shards import SHARDS, assignment, moves, owner_of, shard_of, share

__all__ = [
    "ORIGIN",
    "REDACTED",
    "SHARDS",
    "Impulse",
    "Lease",
    "Listener",
    "MindHistory",
    "MindMessage",
    "MindMood",
    "Notice",
    "PersonaCore",
    "SessionMark",
    "SessionStore",
    "StoredCommit",
    "StreamRedactor",
    "TriggerMarks",
    "assignment",
    "channel",
    "data_home",
    "db_path",
    "fields_dir",
    "mask_passwords",
    "moves",
    "owner_of",
    "redact",
    "redact_commit",
    "redact_data",
    "remember",
    "secrets",
    "session_logs_dir",
    "shard_of",
    "share",
    "soul_home",
    "valid_session_id",
]

"""The type of what the store's SQL runs on: an sqlite3 connection, or the PostgreSQL adapter
(`soul.store.postgres.PgConnection`), which speaks the same few methods."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from soul.store.postgres import PgConnection

Connection: TypeAlias = "sqlite3.Connection | PgConnection"

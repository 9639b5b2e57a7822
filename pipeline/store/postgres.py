"""The PostgreSQL backend of the session store (`SOUL_STORE=postgresql://…`), on psycopg 3.

`connect(url)` returns a `PgConnection`: the handful of `sqlite3.Connection` methods the store
uses (`execute`, `executemany`, `in_transaction`, `close`), each statement translated once by
`soul.store.dialect.postgres_sql`, and every string written and text read through the
connection's adapters (`escape_text`, `unescape_text`: PostgreSQL's TEXT refuses NUL, which
SQLite stores). The connection is in autocommit mode; the store opens every
transaction itself (`BEGIN` ... `COMMIT`), exactly as it does on SQLite.

psycopg is imported here, lazily: only a postgresql URL loads it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from soul.errors import StoreError
from soul.store.conninfo import mask_passwords, passwords
from soul.store.dialect import POSTGRES, Dialect, escape_text, postgres_sql, unescape_text
from soul.store.redaction import remember

SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT = 10  # seconds; a server that does not answer is an error, not a hang
INSTALL = "pip install 'soulgraph[postgres]'"


def store_url(url: str | None = None) -> str | None:
    """The store URL to use: `url` if given, else `$SOUL_STORE`; None for the SQLite file.

    An empty value means SQLite too. Anything but a postgresql:// URL is a StoreError. The
    URL's passwords join the secrets every text soul writes is redacted of (`conninfo`)."""
    chosen = url if url is not None else os.environ.get("SOUL_STORE", "")
    chosen = chosen.strip()
    if not chosen:
        return None
    for password in passwords(chosen):
        remember(password)
    scheme = chosen.split(":", 1)[0].lower() if ":" in chosen else ""
    if scheme not in SCHEMES or not chosen[len(scheme):].startswith("://"):
        form = (" (a libpq key=value string: write it as a URL, its password percent-encoded)"
                if "=" in chosen and "://" not in chosen else "")
        raise StoreError(
            f"SOUL_STORE={shown_url(chosen)!r} is not a store URL{form}: use"
            " postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE, or unset SOUL_STORE to keep"
            " the sessions in the SQLite file of the data home"
        )
    try:
        parts = urlsplit(chosen)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as error:
        raise StoreError(
            f"SOUL_STORE={shown_url(chosen)!r} is not a valid URL ({mask_passwords(str(error), chosen)}): use"
            " postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
        ) from cleaned(error, chosen)
    return chosen


def shown_url(url: str) -> str:
    """The store's URL (or any libpq connection string) with its passwords as `***`."""
    return mask_passwords(url, url)


def cleaned(error: BaseException, url: str) -> BaseException:
    """`error` to chain a StoreError to: itself when its message shows no password of `url`,
    else a copy of its type with the message masked (and no chain of its own), so a
    traceback (`--debug`, a server's log) prints no password either."""
    text = str(error)
    shown = mask_passwords(text, url)
    if shown == text and error.__cause__ is None and error.__context__ is None:
        return error
    try:
        copy = type(error)(shown)
    except Exception:  # a type whose constructor wants more: the message is what matters
        copy = RuntimeError(f"{type(error).__name__}: {shown}")
    copy.__cause__ = copy.__context__ = None
    copy.__suppress_context__ = True
    return copy.with_traceback(error.__traceback__)


class PgConnection:
    """A psycopg connection speaking the store's SQL (see the module doc)."""

    dialect: Dialect = POSTGRES
    isolation_level = None  # autocommit, like the store's sqlite3 connections

    def __init__(self, conn: Any, url: str) -> None:
        self._conn = conn
        self.url = url

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """Run one statement; a psycopg cursor (fetchone, fetchall, iteration, rowcount)."""
        with self._reported():
            return self._conn.execute(postgres_sql(sql), tuple(args) or None, prepare=False)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        rows = list(rows)
        cursor = self._conn.cursor()
        if rows:
            with self._reported():
                cursor.executemany(postgres_sql(sql), rows)
        return cursor

    @contextmanager
    def _reported(self) -> Iterator[None]:
        # The server's own failures as StoreErrors naming it and the fix. A deadlock or a
        # serialisation failure keeps its type: the store retries the transaction on those.
        import psycopg

        try:
            yield
        except psycopg.errors.TransactionRollback:
            raise
        except psycopg.OperationalError as error:
            raise StoreError(
                f"lost the PostgreSQL session store at {shown_url(self.url)}:"
                f" {_first_line(error, self.url)}; check that the server runs, then try again"
            ) from cleaned(error, self.url)
        except psycopg.errors.InsufficientPrivilege as error:
            raise StoreError(
                f"the PostgreSQL session store at {shown_url(self.url)} refused:"
                f" {_first_line(error, self.url)}; the URL's user needs to create tables in its"
                " database (or schema) and write to them"
            ) from cleaned(error, self.url)

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self._conn.info.transaction_status != TransactionStatus.IDLE

    def close(self) -> None:
        self._conn.close()

    @property
    def closed(self) -> bool:
        return bool(self._conn.closed)


def connect(url: str) -> PgConnection:
    """Connect to the PostgreSQL at `url` (autocommit); typed StoreErrors for every failure."""
    try:
        import psycopg
    except ImportError as error:
        raise StoreError(
            f"SOUL_STORE points at PostgreSQL ({shown_url(url)}) but psycopg is not"
            f" installed: {INSTALL}"
        ) from cleaned(error, url)
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.ProgrammingError as error:  # a malformed conninfo
        raise StoreError(
            f"SOUL_STORE={shown_url(url)!r} is not a valid PostgreSQL URL"
            f" ({_first_line(error, url)}): use postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
        ) from cleaned(error, url)
    except psycopg.OperationalError as error:
        raise StoreError(
            f"cannot reach the PostgreSQL session store at {shown_url(url)}:"
            f" {_first_line(error, url)}; check that the server runs and the URL's host, port,"
            " user, password and database are right (or unset SOUL_STORE for SQLite)"
        ) from cleaned(error, url)
    _adapt_text(conn)
    return PgConnection(conn, url)


def _adapt_text(conn: Any) -> None:
    """Strings written through `conn` are escaped, text read is unescaped (see the module doc)."""
    from psycopg.types.string import StrDumperUnknown, TextLoader

    class EscapedStr(StrDumperUnknown):
        def dump(self, obj: str) -> bytes:
            return escape_text(obj).encode(self._encoding)

    class UnescapedText(TextLoader):
        def load(self, data: Any) -> Any:
            text = super().load(data)
            return unescape_text(text) if isinstance(text, str) else text

    conn.adapters.register_dumper(str, EscapedStr)
    for name in ("text", "varchar", 705):  # 705: `unknown`, an untyped literal's result
        conn.adapters.register_loader(name, UnescapedText)


def _first_line(error: BaseException, url: str) -> str:
    text = mask_passwords(str(error), url).strip()
    return text.splitlines()[0] if text else type(error).__name__

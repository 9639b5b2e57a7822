"""The store's test suite on both backends: SQLite (the data home's file) and PostgreSQL.

A test module imports `backend` and `store_url` (pytest finds imported fixtures) and has its
`store` fixture depend on `store_url`: every test using it then runs twice, and
`SessionStore.open()` (which reads `$SOUL_STORE`) opens the backend of the run. A test about
SQLite alone (PRAGMAs, the file) is decorated `@sqlite_only`. PostgreSQL runs are skipped,
saying why, only where no server binary is installed (see tests/postgres_server.py).
"""

from __future__ import annotations

import postgres_server
import pytest

BACKENDS = ["sqlite", "postgresql"]

# Pins a test to SQLite: a direct parametrisation overrides the `backend` fixture.
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend of this run: "sqlite" or "postgresql"."""
    name: str = request.param
    if name == "postgresql" and postgres_server.binaries() is None:
        pytest.skip(postgres_server.SKIP_REASON)
    return name


@pytest.fixture
def store_url(backend: str, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """`$SOUL_STORE` for this test: a fresh PostgreSQL schema's URL, or unset for SQLite."""
    if backend == "sqlite":
        monkeypatch.delenv("SOUL_STORE", raising=False)
        return None
    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    return url

"""A real PostgreSQL for the tests: Debian's server binaries, a throwaway cluster in a temp dir.

`server()` starts one cluster per test process, on first use: `initdb` (as the `postgres`
user when running as root: PostgreSQL refuses to run as root) and `postgres` on a free port
bound to 127.0.0.1 and a unix socket in the temp dir, with durability off (fsync,
synchronous_commit: a test cluster need not survive a power cut). It stops at exit, and dies
with the test process even if that is killed (the kernel's parent-death signal). Each test
gets a schema of its own (`fresh_url()`), far cheaper than a database each.

`binaries()` is None where no server is installed: the tests that need one skip, saying why
(`SKIP_REASON`). CI installs Debian's `postgresql` package (.ci/run).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

APT_LINE = "sudo apt-get install postgresql"  # the README and .ci/run install the same package
SKIP_REASON = (
    "no PostgreSQL server binaries (initdb, postgres) in /usr/lib/postgresql/*/bin or on PATH:"
    f" {APT_LINE} (.ci/run does) to run the PostgreSQL store tests"
)
USER = "soul"
DATABASE = "soul"
_PR_SET_PDEATHSIG = 1


def binaries() -> Path | None:
    """The folder of the newest installed server's initdb and postgres, or None."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    return None


@dataclass
class Server:
    """A running cluster: where it listens and how to stop it."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        """The URL of the `soul` database (trust authentication on 127.0.0.1)."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then the temp dir is removed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


_lock = threading.Lock()
_server: Server | None = None
_schemas = itertools.count(1)


def server() -> Server:
    """The test process's cluster, started on first call (RuntimeError if it cannot start)."""
    global _server
    with _lock:
        if _server is None:
            folder = binaries()
            if folder is None:
                raise RuntimeError(SKIP_REASON)
            _server = _start(folder)
            atexit.register(_server.stop)
        return _server


def fresh_url() -> str:
    """The URL of a new, empty schema of the cluster (the connection's search_path)."""
    import psycopg

    running = server()
    name = f"t{os.getpid()}_{next(_schemas)}"
    with psycopg.connect(running.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{running.url}?options=-csearch_path%3D{name}"


def _start(folder: Path) -> Server:
    root = Path(tempfile.mkdtemp(prefix="soul-pg-"))
    demote = _demotion()
    if demote is not None:
        os.chown(root, demote[0], demote[1])
    data = root / "data"
    _run(
        [str(folder / "initdb"), "-D", str(data), "-U", USER, "-A", "trust", "-E", "UTF8",
         "--no-sync", "--locale=C"],
        demote,
    )
    port = _free_port()
    log = open(root / "server.log", "wb")  # noqa: SIM115 - the server's stderr, kept while it runs
    process = subprocess.Popen(
        [
            str(folder / "postgres"), "-D", str(data), "-p", str(port),
            "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={root}",
            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            "-c", "shared_buffers=32MB", "-c", "max_connections=100",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        # In the child: the postgres user, and the death signal (see _become).
        preexec_fn=lambda: _become(demote),
    )
    log.close()
    running = Server(root, port, process)
    try:
        _wait_ready(running)
        _run_sql(running, f"CREATE DATABASE {DATABASE}", database="postgres")
    except BaseException:
        running.stop()
        raise
    return running


def _demotion() -> tuple[int, int] | None:
    """(uid, gid) of the `postgres` user when running as root, else None."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam("postgres")
    except KeyError as error:
        raise RuntimeError(
            "running as root, and there is no `postgres` user to run PostgreSQL as"
            " (initdb refuses root): install Debian's `postgresql` package, which creates it"
        ) from error
    return entry.pw_uid, entry.pw_gid


def _become(demote: tuple[int, int] | None) -> None:
    # In the child, before exec: drop to the postgres user, then ask for SIGQUIT (immediate
    # shutdown) when the test process dies. The death signal is set after the uid change,
    # which would otherwise clear it.
    if demote is not None:
        os.setgid(demote[1])
        os.setgroups([])
        os.setuid(demote[0])
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT)


def _run(argv: list[str], demote: tuple[int, int] | None) -> None:
    done = subprocess.run(
        argv, capture_output=True, preexec_fn=lambda: _become(demote), check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {done.stderr.decode(errors='replace')[-2000:]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(running: Server, timeout: float = 60.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        if running.process.poll() is not None:
            log = (running.root / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"postgres exited with {running.process.returncode}: {log}")
        try:
            with psycopg.connect(
                f"postgresql://{USER}@127.0.0.1:{running.port}/postgres", connect_timeout=2
            ):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _run_sql(running: Server, sql: str, *, database: str = DATABASE) -> None:
    import psycopg

    url = f"postgresql://{USER}@127.0.0.1:{running.port}/{database}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)

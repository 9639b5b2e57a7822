"""Background cycles as durable workflows (DBOS on a real PostgreSQL, `soul worker`): cycles a
worker runs commit like in-process ones, and a worker killed mid-cycle loses nothing and runs
nothing twice once another worker with its executor id starts."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import postgres_server
import pytest
import yaml

import soul
from soul.errors import RunError
from soul.language.finding import builtin_folder
from soul.runtime.background.cycles import Background
from soul.runtime.background.processes import runner_choice
from soul.runtime.durable.engine import parse_rate, system_database_url, workflow_id

BUILTIN = builtin_folder()
SUB = ("<M_AND_C><mood>calm</mood><criteria>listen</criteria></M_AND_C>"
       "<S_loud></S_loud><S_quiet>a quiet note</S_quiet><trigger>false</trigger>")
CON = "<ID_quiet>a private thought</ID_quiet><ID_loud>hello there</ID_loud>"

needs_server = pytest.mark.skipif(postgres_server.binaries() is None, reason=postgres_server.SKIP_REASON)


def csd_folder(root: Path, replies: int = 2000) -> Path:
    """A csd soul whose subconscious says the same thing every cycle (a restarted worker's
    scripted replies start over, so every reply must do)."""
    folder = root / "csd"
    folder.mkdir()
    for name in ("csd.md", "csd_core.md"):
        shutil.copy(BUILTIN / name, folder / name)
    data = yaml.safe_load((BUILTIN / "csd.yaml").read_text())
    data["models"] = {"conscious": "scripted:conscious.yaml", "subconscious": "scripted:sub.yaml"}
    data["processes"]["subconscious"]["history"] = 1000  # no summary commits: one commit per cycle
    (folder / "csd.yaml").write_text(yaml.safe_dump(data))
    (folder / "conscious.yaml").write_text(json.dumps([CON] * 10))
    (folder / "sub.yaml").write_text(json.dumps([SUB] * replies))
    return folder / "csd.yaml"


# -- without a server ----------------------------------------------------------------------


def test_runner_choice_defaults_to_in_process_and_refuses_unknown_runners() -> None:
    assert runner_choice("") == "asyncio"
    assert runner_choice("DBOS") == "dbos"
    with pytest.raises(RunError, match="SOUL_RUNNER='celery' is not a runner"):
        runner_choice("celery")


def test_rate_and_urls_are_checked() -> None:
    assert parse_rate("600/60") == (600, 60.0)
    with pytest.raises(RunError, match="CYCLES/SECONDS"):
        parse_rate("fast")
    with pytest.raises(RunError, match="PostgreSQL session store"):
        system_database_url("")
    assert system_database_url("postgres://a@h/db") == "postgresql://a@h/db"
    assert workflow_id("s1", "subconscious", 7) == "soul-cycle:s1:subconscious:7"
    assert workflow_id("s1", "subconscious", 7, 2) == "soul-cycle:s1:subconscious:7:retry2"


def test_a_stored_cycle_run_again_is_a_no_op_without_a_model_call(tmp_path: Path, soul_home: Path) -> None:
    s = soul.load(csd_folder(tmp_path, replies=2), home=soul_home)
    session = s.session()
    work = Background(s.plan, s.services, s.store, session.id, lambda e: None, lambda t, r: asyncio.sleep(0))
    assert asyncio.run(work.run_cycle("subconscious", 1)) is True
    calls = s.provider_for("subconscious")[0].calls
    assert asyncio.run(work.run_cycle("subconscious", 1)) is False  # replayed: nothing runs
    assert s.provider_for("subconscious")[0].calls == calls
    with pytest.raises(RunError, match="cannot run before cycle 2"):
        asyncio.run(work.run_cycle("subconscious", 3))
    assert s.store.mind_history(session.id, "subconscious").cycles == 1
    assert [m["cycle"] for m in s.store.moods(session.id)] == [1]


def test_a_worker_without_a_reachable_database_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "SOUL_STORE": "postgresql://ann:secret@127.0.0.1:1/soul", "SOUL_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "soul.cli", "worker", "csd"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    # the store is opened first (the worker owns its id there before DBOS launches): its error
    assert "cannot reach the PostgreSQL session store" in done.stderr and "Traceback" not in done.stderr
    assert "secret" not in done.stderr and "ann:***@" in done.stderr
    env["SOUL_STORE"] = "postgresql://ann@127.0.0.1:1/soul?password=hidden-word"  # a query password too
    done = subprocess.run([sys.executable, "-m", "soul.cli", "worker", "csd"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "cannot reach the PostgreSQL session store" in done.stderr and "hidden-word" not in done.stderr
    env.pop("SOUL_STORE")
    done = subprocess.run([sys.executable, "-m", "soul.cli", "worker", "csd"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "PostgreSQL session store" in done.stderr and "Traceback" not in done.stderr


def test_session_runner_chooses_who_runs_the_loops(tmp_path: Path, soul_home: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    s = soul.load(csd_folder(tmp_path), home=soul_home)
    assert s.session(runner="dbos").work.delegated
    assert not s.session().work.delegated  # the default: in-process
    monkeypatch.setenv("SOUL_RUNNER", "dbos")
    assert s.session().work.delegated and not s.session(runner="asyncio").work.delegated
    with pytest.raises(RunError, match="not a runner"):
        s.session(runner="threads")


# -- DBOS on a real PostgreSQL ---------------------------------------------------------------


def _env(url: str, home: Path) -> dict[str, str]:
    return {**os.environ, "SOUL_STORE": url, "SOUL_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}


def _worker(blueprint: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "soul.cli", "worker", str(blueprint), "--poll", "0.05", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _cycles(url: str, session_id: str) -> dict[int, int]:
    """cycle number -> how many commits (and S_quiet messages) the store holds for it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        commits = dict(conn.execute(
            "SELECT cycle, count(*) FROM commits WHERE session_id = %s AND kind = 'cycle' GROUP BY cycle",
            (session_id,)).fetchall())
        notes = dict(conn.execute(
            "SELECT cycle, count(*) FROM messages WHERE session_id = %s AND tag = 'S_quiet' GROUP BY cycle",
            (session_id,)).fetchall())
    assert commits == notes, "a cycle's commit and its messages go together"
    return commits


def _dbos_launched(conn: Any) -> bool:
    """Whether a worker has launched DBOS on this database yet (its tables exist): a worker
    owns its id in the store before it launches, so a test can look before they do."""
    return conn.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()[0] is not None


def _pending(url: str, session_ids: list[str]) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if not _dbos_launched(conn):
            return 0
        return sum(conn.execute(
            "SELECT count(*) FROM dbos.workflow_status WHERE status = 'PENDING' AND workflow_uuid LIKE %s",
            (f"soul-cycle:{sid}:%",)).fetchone()[0] for sid in session_ids)


@needs_server
@pytest.mark.slow
def test_cycles_run_by_a_worker_commit_like_in_process_ones(tmp_path: Path, soul_home: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    blueprint = csd_folder(tmp_path)
    s = soul.load(blueprint, home=soul_home)
    session = s.session()
    done = _worker(blueprint, _env(url, soul_home), "--cycles", "3")
    _out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert _cycles(url, session.id) == {1: 1, 2: 1, 3: 1}
    assert [(m["mood"], m["cycle"]) for m in s.store.moods(session.id)] == [("calm", 1), ("calm", 2), ("calm", 3)]
    # a turn in this process (SOUL_RUNNER=dbos: no loop here) reads what the worker left
    resumed = s.session(session.id, runner="dbos")
    assert resumed.mind is not None and resumed.mind.cycle == 3 and resumed.mind.mood == "calm"
    asyncio.run(resumed.start())
    resumed.turn_sync("hi")
    asyncio.run(resumed.close())
    assert resumed.mind.cycle == 3  # no cycle ran in this process


@needs_server
@pytest.mark.slow
def test_a_worker_killed_mid_cycle_loses_nothing_and_runs_nothing_twice(tmp_path: Path, soul_home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    blueprint = csd_folder(tmp_path)
    s = soul.load(blueprint, home=soul_home)
    sessions = [s.session().id for _ in range(2)]
    env, target = _env(url, soul_home), 25
    killed_mid_cycle = 0
    for _ in range(8):  # kill until a kill lands inside a cycle (a PENDING workflow left behind)
        worker = _worker(blueprint, env, "--cycles", str(target), "--executor", "w1")
        deadline = time.monotonic() + 60
        while _pending(url, sessions) == 0 and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        worker.send_signal(signal.SIGKILL)
        worker.communicate()
        if _pending(url, sessions):
            killed_mid_cycle += 1
            break
    assert killed_mid_cycle, "no kill landed inside a cycle"
    before = {sid: _cycles(url, sid) for sid in sessions}
    final = _worker(blueprint, env, "--cycles", str(target), "--executor", "w1")
    _out, err = final.communicate(timeout=300)
    assert final.returncode == 0, err
    for sid in sessions:
        counts = _cycles(url, sid)
        assert counts == {n: 1 for n in range(1, target + 1)}, (before[sid], counts)
    assert _pending(url, sessions) == 0

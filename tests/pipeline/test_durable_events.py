"""`soul run` with the loops in `soul worker` (SOUL_RUNNER=dbos, a PostgreSQL store): the REPL
hears the workers' commits (LISTEN/NOTIFY, `soul.runtime.durable.feed`) and prints their
spontaneous replies and, with `--layers`, their cycles, unprompted, as it does for in-process
loops; `/mood` shows the workers' mood. A real PostgreSQL, a real `soul worker` subprocess and
`soul run` in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import postgres_server
import pytest
from speaking_csd import csd
from test_durable import _env
from test_run_csd import Repl

needs_server = pytest.mark.skipif(postgres_server.binaries() is None, reason=postgres_server.SKIP_REASON)


@needs_server
@pytest.mark.slow
def test_the_repl_prints_a_workers_cycle_and_spontaneous_reply_unprompted(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.fresh_url()
    blueprint = csd(tmp_path)
    monkeypatch.setenv("SOUL_STORE", url)
    monkeypatch.setenv("SOUL_RUNNER", "dbos")
    repl = Repl(str(blueprint), "--layers")
    try:
        repl.wait_for("run in `soul worker`", timeout=60)  # listening: what the workers commit shows
        worker = subprocess.run(
            [sys.executable, "-m", "soul.cli", "worker", str(blueprint), "--poll", "0.05", "--cycles", "1"],
            env=_env(url, soul_home), capture_output=True, text=True, timeout=180, check=False,
        )
        assert worker.returncode == 0, worker.stderr
        repl.wait_for("csd (unprompted)> I was thinking of the sea.", timeout=60)  # nobody typed
        repl.send("/mood")
        repl.wait_for("impulses pending")
        repl.send("/quit")
        code, out, err = repl.finish()
    finally:
        if repl.proc.poll() is None:
            repl.proc.kill()
    assert code == 0 and "Traceback" not in err, err
    cycle = out.index("[subconscious #1] quiet: a quiet note")
    mood = out.index("[subconscious #1] mood: eager · criteria: speak")
    impulse = out.index("[impulse] tell them about the sea — now (trigger)")
    reply = out.index("csd (unprompted)> I was thinking of the sea.")
    internal = out.index("[internal] the sea, then")  # the spontaneous turn's internal dialog
    assert cycle < mood < impulse < reply < internal
    assert out.count("csd (unprompted)>") == 1
    # /mood: the worker's mood and cycle; the spontaneous turn took the impulse
    assert "mood: eager\ncriteria: speak\nsubconscious · cycle 1 · 0 impulses pending" in out


@needs_server
def test_the_repl_without_workers_running_says_it_listens_prints_nothing_unasked_and_cannot_pause_them(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    monkeypatch.setenv("SOUL_RUNNER", "dbos")
    repl = Repl(str(csd(tmp_path)), "--layers")
    try:
        repl.wait_for("run in `soul worker`", timeout=60)
        repl.send("/mood")
        repl.wait_for("impulses pending")
        repl.send("/pause")
        repl.wait_for("steers loops run here only")
        repl.send("/quit")
        code, out, err = repl.finish()
    finally:
        if repl.proc.poll() is None:
            repl.proc.kill()
    assert code == 0 and "Traceback" not in err, err
    assert "unprompted" not in out and "[subconscious" not in out  # no loop ran here
    assert "subconscious · cycle 0 · 0 impulses pending" in out


def test_the_repl_with_workers_on_sqlite_says_it_cannot_hear_them(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOUL_RUNNER", "dbos")  # and no SOUL_STORE: the SQLite file
    repl = Repl(str(csd(tmp_path)))
    try:
        repl.wait_for("nothing tells this REPL what they do", timeout=60)
        repl.send("/quit")
        code, _, err = repl.finish()
    finally:
        if repl.proc.poll() is None:
            repl.proc.kill()
    assert code == 0 and "Traceback" not in err, err


@needs_server
@pytest.mark.slow
def test_in_a_terminal_a_workers_reply_clears_the_prompt_line_and_writes_the_prompt_back(
        tmp_path: Path, soul_home: Path) -> None:
    import os
    import pty
    import re
    import select
    import time

    url = postgres_server.fresh_url()
    blueprint = csd(tmp_path)
    env = {**_env(url, soul_home), "SOUL_RUNNER": "dbos", "COLUMNS": "200"}
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "soul.cli", "run", str(blueprint)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    screen = ""

    def read_until(text: str, after: str = "", timeout: float = 60.0) -> str:
        """Read the terminal until `text` shows (after the last `after`, when given)."""
        nonlocal screen
        deadline = time.monotonic() + timeout
        while text not in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.rpartition(after)[2] if after else screen):
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} did not appear; screen:\n{screen}"
            if select.select([master], [], [], left)[0]:
                screen += os.read(master, 65536).decode("utf-8", "replace")
        return screen

    try:
        read_until("you> ")  # at the prompt, listening
        worker = subprocess.run(
            [sys.executable, "-m", "soul.cli", "worker", str(blueprint), "--poll", "0.05", "--cycles", "1"],
            env=env, capture_output=True, text=True, timeout=180, check=False,
        )
        assert worker.returncode == 0, worker.stderr
        read_until("I was thinking of the sea.")
        before, _, after = read_until("you> ", after="(unprompted)", timeout=10).rpartition("(unprompted)")
        assert "\r\x1b[2K" in before[-200:]  # the prompt line was cleared first
        assert "you> " in after  # and written back after the reply
        os.write(master, b"/quit\n")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert "Traceback" not in screen

"""Ctrl-C in `soul run` (issue 12.14): at the prompt it leaves at once, mid-turn it abandons
the turn — "turn abandoned; nothing was stored" — and nothing of that turn is stored. Run in
a real pseudo-terminal, with a real (slow) model server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from wire_server import Fault, WireServer

REPLY = '<internal_monologue verb="pondered">A visitor.</internal_monologue>\n<external_dialogue verb="said">Hello there, friend.</external_dialogue>\n'


class Terminal:
    """`soul run` on a pseudo-terminal: type lines, read the screen, press Ctrl-C."""

    def __init__(self, argv: list[str], home: Path) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, "SOUL_HOME": str(home), "OPENAI_API_KEY": "", "COLUMNS": "200"}
        self.proc = subprocess.Popen([sys.executable, "-m", "soul.cli", *argv], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.screen = ""

    def read_until(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} did not appear; screen:\n{self.screen}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    self.screen += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:  # the child closed the terminal
                    break
        return self.screen

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def ctrl_c(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def reading(self, timeout: float = 30.0) -> None:
        """Wait until the process's main thread sleeps in its read of the terminal. CPython's
        readline loop checks for signals only when its select() is interrupted: a Ctrl-C landing
        between the prompt being shown and that select() is taken by Python's handler and acted
        on only after the next line — a window no hand hits, but a test pressing Ctrl-C the
        instant the prompt shows did, on a loaded machine (the process descheduled inside it)."""
        stat = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/stat")
        if not stat.exists():  # no /proc: a pause instead
            time.sleep(0.5)
            return
        deadline, asleep = time.monotonic() + timeout, 0
        while asleep < 3:  # three looks in a row, 10 ms apart: not a passing sleep
            assert time.monotonic() < deadline, "the prompt never waited for input"
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
            asleep = asleep + 1 if state == "S" else 0
            time.sleep(0.01)

    def wait(self, timeout: float = 20.0) -> int:
        code = self.proc.wait(timeout=timeout)
        with contextlib.suppress(AssertionError):
            self.read_until("\x00", timeout=0.5)  # drain what is left
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


@pytest.fixture
def terminal(tmp_path: Path) -> Callable[..., Terminal]:
    opened: list[Terminal] = []

    def open_(*argv: str) -> Terminal:
        term = Terminal(list(argv), tmp_path / "home")
        opened.append(term)
        return term

    yield open_  # type: ignore[misc]
    for term in opened:
        term.close()


def in_flight(wire: WireServer, timeout: float = 60.0) -> None:
    """Wait until the server holds the call (a fixed sleep raced a slow start under load)."""
    deadline = time.monotonic() + timeout
    while not wire.requests:
        assert time.monotonic() < deadline, "the call never reached the server"
        time.sleep(0.05)
    time.sleep(0.2)  # the request is read: the client now waits on the reply


def test_ctrl_c_at_the_prompt_leaves_at_once(terminal: Callable[..., Terminal], wire: WireServer, wired_soul: Callable[..., Path]) -> None:
    term = terminal("run", str(wired_soul("openai/gpt-test", wire.openai_url)))
    term.read_until("you> ")
    term.reading()
    started = time.monotonic()
    term.ctrl_c()
    assert term.wait() == 0
    assert time.monotonic() - started < 10  # it used to wait for Enter
    assert "Traceback" not in term.screen


def test_ctrl_c_mid_turn_abandons_it_and_stores_nothing(terminal: Callable[..., Terminal], wire: WireServer, wired_soul: Callable[..., Path], tmp_path: Path) -> None:
    wire.replies = [REPLY, REPLY]
    wire.faults = [Fault(delay=30.0)]  # the first call hangs until we press Ctrl-C
    term = terminal("run", str(wired_soul("openai/gpt-test", wire.openai_url)))
    term.read_until("you> ")
    term.type("Hello?")
    in_flight(wire)
    term.ctrl_c()
    term.read_until("turn abandoned; nothing was stored")
    term.read_until("you> ")
    term.type("Hello again")
    term.read_until("Hello there, friend.")
    term.type("/quit")
    assert term.wait() == 0
    assert "Traceback" not in term.screen
    from soul.store import SessionStore

    with SessionStore.open(tmp_path / "home") as store:
        (session,) = store.sessions()
        assert session.turns == 1  # only the second turn
        user_lines = [r.content for _, r, _ in store.messages(session.id) if r.tag == "user"]
        assert user_lines == ["Hello again"]


def test_ctrl_c_during_run_m_exits_130_without_a_traceback(terminal: Callable[..., Terminal], wire: WireServer, wired_soul: Callable[..., Path]) -> None:
    wire.faults = [Fault(delay=30.0)]
    term = terminal("run", str(wired_soul("openai/gpt-test", wire.openai_url)), "-m", "Hello?")
    in_flight(wire)
    term.ctrl_c()
    term.read_until("turn abandoned; nothing was stored")
    assert term.wait() == 130
    assert "Traceback" not in term.screen

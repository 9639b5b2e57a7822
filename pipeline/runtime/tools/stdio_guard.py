"""The guard between soul and an MCP server it starts: no server outlives the soul process.

Run as a script (`python stdio_guard.py PARENT_PID -- COMMAND ...`; it imports only the standard
library, so it starts in milliseconds), never imported by the runtime. It

- leads a process group of its own (the SDK starts it in a new session; it makes sure),
- asks Linux to send it SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`), and on
  every POSIX system watches its parent id change (a kill -9 of soul re-parents it),
- runs the server as its child, in its group, with the guard's stdin/stdout/stderr,
- and on SIGTERM or its parent's death signals the whole group (the server and anything the
  server started, such as `uvx`'s interpreter): SIGTERM, then SIGKILL after a grace period.

It exits with the server's exit code when the server ends by itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

GRACE_S = 2.0  # between SIGTERM and SIGKILL to the group
WATCH_S = 0.5  # how often the parent id is checked
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):  # no libc to call: the watcher thread still works
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop_group(child: subprocess.Popen[bytes] | None) -> None:
    """Signal every process of the guard's group, the guard last."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM reaches the guard too
    group = os.getpgrp()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while child is not None and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)  # what is left, the guard included
    os._exit(1)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: guard.py PARENT_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent = int(argv[1])
    command = argv[3:]
    if os.getpgrp() != os.getpid():
        with contextlib.suppress(OSError):
            os.setsid()
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before the guard could ask to follow it
        return 1
    child: subprocess.Popen[bytes] | None = None
    signal.signal(signal.SIGTERM, lambda *_: _stop_group(child))
    signal.signal(signal.SIGHUP, lambda *_: _stop_group(child))
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"soul: cannot start the MCP server {command[0]!r}: {exc}", file=sys.stderr)
        return 127

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:  # handled in the main thread, where handlers run
                os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv))

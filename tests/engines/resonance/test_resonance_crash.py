"""Crash safety: SIGKILL a writer at random moments; every fsync-acknowledged write survives.

A zygote subprocess (``python -c``; no fork of the test process) imports the store once and
forks one writer per trial; the writer opens the field (recovering it), appends memories under
per-append fsync and prints each id after ``add`` returns — its acknowledgement. The test kills
the writer after a random delay, reopens the field (recovery must not fail) and checks every
printed id is there. Each trial reopens the same field, so recovery also runs over the previous
trials' torn tails and dead writers. Forking from the zygote spares each trial the interpreter's
start and imports (~0.1 s of the ~0.2 s a trial took); what a trial does and where the kill
lands are as they were: a process of its own, killed at a random moment of its writes.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from soul.engines.resonance import Store

ZYGOTE = r"""
import os, sys, time, numpy as np
from soul.engines.resonance import Store
from soul.engines.resonance.store.ops import Row
path = sys.argv[1]


def write(trial):
    store = Store.open(path, durability="fsync", segment_bytes=1 << 14, compact_after=10**9)
    rng = np.random.default_rng(trial)
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    i = 0
    while True:
        mid = f"t{trial:04d}_{i:06d}"
        store.add(Row(mid, 3, 0, time.time(), 0.7, 0.04, 0, "a memory written before a crash " * 3,
                      (), None, None, None), rng.random(32, dtype=np.float32))
        if i % 7 == 3:
            store.observe(mid, 1.0)
        sys.stdout.write(mid + "\n")
        sys.stdout.flush()
        i += 1


print("zygote", flush=True)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:  # the writer: runs until it is killed
        try:
            write(int(line))
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    # after the writer is gone: every line it printed is before this one
    sys.stdout.write(f"end {status}\n")
    sys.stdout.flush()
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # The writer must import the same `soul` as this test (installed or via a path shim).
    import soul

    root = str(Path(soul.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


@contextmanager
def _zygote(path: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env(),
    )
    try:
        assert proc.stdout is not None
        started = proc.stdout.readline()
        assert started == b"zygote\n", started
        yield proc
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def _trial(zygote: subprocess.Popen[bytes], trial: int, rng: random.Random) -> set[str]:
    assert zygote.stdin is not None and zygote.stdout is not None
    zygote.stdin.write(b"%d\n" % trial)
    zygote.stdin.flush()
    ready = zygote.stdout.readline()
    assert ready.startswith(b"ready "), ready
    time.sleep(rng.uniform(0.0, 0.05))
    os.kill(int(ready.split()[1]), signal.SIGKILL)
    acked: set[str] = set()
    for line in iter(zygote.stdout.readline, b""):
        if line.startswith(b"end "):
            status = int(line.split()[1])
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            return acked
        acked.add(line.decode().rstrip("\n"))  # a fully printed line: add() had returned
    raise AssertionError("the zygote exited")


def _run(path: Path, trials: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    acked: set[str] = set()
    with _zygote(path) as zygote:
        for trial in range(trials):
            acked |= _trial(zygote, trial, rng)
            if trial % 10 == 9 or trial == trials - 1:
                # Recovery never fails, and everything acknowledged so far is there.
                with Store.open(path, compact_after=10**9) as store:
                    missing = acked - set(store.state.rows)
                    assert not missing, f"lost {len(missing)} acknowledged writes, e.g. {min(missing)}"
                    assert {i.kind for i in store.report.issues} <= {"torn_tail"}
                    if trial % 50 == 49:
                        store.compact()  # compaction among crashes too
    assert Store.check(path).ok
    return trials, len(acked)


@pytest.mark.parametrize("walker", ["python", "kernels"])
def test_sigkill_a_few_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walker: str) -> None:
    from soul.engines.resonance.store import recovery

    monkeypatch.setattr(recovery, "FAST_BYTES", 0 if walker == "kernels" else 1 << 62)
    _, acked = _run(tmp_path, 10, seed=1)
    assert acked > 0


@pytest.mark.slow
def test_sigkill_at_random_moments_200_trials(tmp_path: Path) -> None:
    trials, acked = _run(tmp_path, 200, seed=2)
    assert trials == 200 and acked > 200



"""Crash safety: SIGKILL a writer at random moments; every fsync-acknowledged write survives.

One subprocess (``python -c``, no fork of the test process) appends memories under per-append
fsync and prints each id after ``add`` returns — its acknowledgement. The test kills it after
a random delay, reopens the field (recovery must not fail) and checks every printed id is
there. Each trial reopens the same field, so recovery also runs over the previous trials' torn
tails and dead writers.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soul.engines.resonance import Store

WRITER = r"""
import sys, time, numpy as np
from soul.engines.resonance import Store
from soul.engines.resonance.store.ops import Row
path, trial = sys.argv[1], int(sys.argv[2])
store = Store.open(path, durability="fsync", segment_bytes=1 << 14, compact_after=10**9)
rng = np.random.default_rng(trial)
print("ready", flush=True)
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
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # The writer must import the same `soul` as this test (installed or via a path shim).
    import soul

    root = str(Path(soul.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _trial(path: Path, trial: int, rng: random.Random, env: dict[str, str]) -> set[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(trial)],
        stdout=subprocess.PIPE, env=env,
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert ready == b"ready\n", ready
    time.sleep(rng.uniform(0.0, 0.05))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    acked: set[str] = set()
    for line in proc.stdout.read().decode().splitlines():
        acked.add(line)  # a fully printed line: add() had returned
    proc.stdout.close()
    return acked


def _run(path: Path, trials: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    env = _env()
    acked: set[str] = set()
    for trial in range(trials):
        acked |= _trial(path, trial, rng, env)
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



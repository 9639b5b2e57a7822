"""A csd blueprint whose scripted subconscious queues an impulse with `trigger` on every
cycle, so a spontaneous reply follows each one: the soul the cross-process event tests
(tests/serve/test_events_cross_process.py, tests/pipeline/test_durable_events.py) run in
workers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from soul.language.finding import builtin_folder

LOUD = ("<M_AND_C><mood>eager</mood><criteria>speak</criteria></M_AND_C>"
        "<S_loud>tell them about the sea</S_loud><S_quiet>a quiet note</S_quiet><trigger>true</trigger>")
CON = "<ID_quiet>the sea, then</ID_quiet><ID_loud>I was thinking of the sea.</ID_loud>"


def csd(root: Path) -> Path:
    """csd (copied into `root`/csd) whose subconscious queues an impulse with `trigger` on
    every cycle; both slots scripted for 20 calls."""
    folder = root / "csd"
    folder.mkdir(parents=True)
    for name in ("csd.md", "csd_core.md"):
        shutil.copy(builtin_folder() / name, folder / name)
    data = yaml.safe_load((builtin_folder() / "csd.yaml").read_text())
    data["models"] = {"conscious": "scripted:conscious.yaml", "subconscious": "scripted:sub.yaml"}
    (folder / "csd.yaml").write_text(yaml.safe_dump(data))
    (folder / "conscious.yaml").write_text(json.dumps([CON] * 20))
    (folder / "sub.yaml").write_text(json.dumps([LOUD] * 20))
    return folder / "csd.yaml"

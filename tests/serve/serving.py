"""Helpers for the `soul serve` tests: a real server in a subprocess on a free 127.0.0.1
port with a temp data home, the system Chromium, and canned replies for claudius and csd."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
APT_LINE = "sudo apt-get install chromium"  # the README and .ci/run install the same package
SKIP_REASON = f"no Chromium found: {APT_LINE} (or set SOUL_CHROMIUM to a Chromium binary)"
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome",
                  "/usr/bin/google-chrome-stable", "/snap/bin/chromium")


def find_chromium() -> str | None:
    """SOUL_CHROMIUM, else a chromium on PATH, else the usual install paths."""
    named = os.environ.get("SOUL_CHROMIUM")
    if named:
        return named if Path(named).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return next((p for p in CHROMIUM_PATHS if Path(p).exists()), None)


SCREENSHOTS_ENV = "SOUL_SCREENSHOTS"
PNG = b"\x89PNG\r\n\x1a\n"


def screenshot(page: Any, folder: Path, name: str) -> Path:
    """Save the whole page as `folder/serve-NAME.png` and check it is a picture. The tests
    save into a temporary folder; `SOUL_SCREENSHOTS=docs/img` (a folder, relative to the
    repository) makes them refresh the screenshots the docs and the README show."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"serve-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes()[:8] == PNG, f"{path} is not a PNG"
    return path


def screenshot_folder(tmp_path: Path) -> Path:
    """$SOUL_SCREENSHOTS (relative paths from the repository's root), else `tmp_path/shots`."""
    named = os.environ.get(SCREENSHOTS_ENV)
    if not named:
        return tmp_path / "shots"
    folder = Path(named)
    return folder if folder.is_absolute() else REPO / folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def claudius_reply(text: str, thought: str = "She builds compilers; she will want precision.") -> str:
    """A fused Claudius reply: a monologue (a thought: never in the chat), the reply, checks —
    the soul-state check too, which claudius asks for on every third turn (a section it asks for
    and does not get is asked again, which would take the next scripted reply)."""
    return (
        f'<internal_monologue verb="pondered">{thought}</internal_monologue>\n'
        f'<external_dialogue verb="quipped">{text}</external_dialogue>\n'
        "<user_model_check>false</user_model_check>\n"
        "<soul_state_check>false</soul_state_check>\n"
    )


def conscious(loud: str, quiet: str) -> str:
    return f"<ID_quiet>{quiet}</ID_quiet><ID_loud>{loud}</ID_loud>"


def cycle(mood: str, criteria: str, quiet: str, loud: str = "", trigger: bool = False) -> str:
    return (f"<mood>{mood}</mood><criteria>{criteria}</criteria><S_loud>{loud}</S_loud>"
            f"<S_quiet>{quiet}</S_quiet><trigger>{str(trigger).lower()}</trigger>")


def write_script(folder: Path, data: Any, name: str = "script.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def csd_folder(folder: Path, **process: Any) -> Path:
    """The built-in csd soul copied into `folder`, its subconscious process changed by `process`."""
    import yaml

    from soul.language.finding import builtin_folder

    folder.mkdir(parents=True, exist_ok=True)
    source = builtin_folder()
    for name in ("csd.md", "csd_core.md"):
        shutil.copy(source / name, folder / name)
    data = yaml.safe_load((source / "csd.yaml").read_text())
    data["processes"]["subconscious"].update(process)
    (folder / "csd.yaml").write_text(yaml.safe_dump(data))
    return folder / "csd.yaml"


class Server:
    """`soul serve` in a subprocess; `url` once it answers. Stopped with SIGINT (as Ctrl-C)."""

    def __init__(self, soul: str, home: Path, *args: str, host: str = "127.0.0.1",
                 env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environ = {**os.environ, "SOUL_HOME": str(home), "PYTHONUNBUFFERED": "1", **(env or {})}
        environ.pop("SOUL_MODEL", None)
        self.log = home / f"serve-{self.port}.log"
        home.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "soul.cli", "serve", soul, "--host", host, "--port", str(self.port), *args],
            env=environ, stdout=self.log.open("w"), stderr=subprocess.STDOUT, cwd=str(home),
        )

    def wait(self, headers: dict[str, str] | None = None, timeout: float = 30.0) -> Server:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"soul serve exited with {self.proc.returncode}: {self.log.read_text()}")
            try:
                if httpx.get(self.url + "/", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"soul serve did not answer in {timeout} s: {self.log.read_text()}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)

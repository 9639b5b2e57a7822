"""Packaging: every package is listed, the public surface is what the docs say, and a wheel
installed into a fresh venv works from any directory."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

import soul

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"soul": "pipeline", "soul.steps": "steps", "soul.engines": "engines", "soul.templates": "templates", "soul.schemas": "schemas", "soul.blueprints": "blueprints"}


def test_every_folder_with_an_init_is_a_listed_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert config["tool"]["setuptools"]["package-dir"] == FOLDERS
    found = set()
    for package, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]) if rel.parts else package)
    assert found == listed


def test_the_public_names_are_the_documented_ones() -> None:
    readme = (ROOT / "docs" / "embedding.md").read_text()
    documented = {line.split("`")[1] for line in readme.splitlines() if line.startswith("- `soul.")}
    assert {f"soul.{name}" for name in soul.__all__ if name != "__version__"} == documented
    for name in soul.__all__:
        assert getattr(soul, name) is not None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project built as a wheel, once per run for the tests that install it. Under
    pytest-xdist the workers share it (built by the first, under a lock, in the folder their
    temp folders share: that run's alone): two builds at once in the source tree would share its
    build/ folder."""
    base = tmp_path_factory.getbasetemp()
    dist = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "soulgraph-wheel"
    dist.mkdir(exist_ok=True)
    with open(dist / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = list(dist.glob("soulgraph-*.whl"))
        if not built:
            subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)], check=True, capture_output=True)
            built = list(dist.glob("soulgraph-*.whl"))
    (wheel,) = built
    return wheel


def installed_wheel(wheel: Path, tmp_path: Path, extras: str = "") -> tuple[Path, Path]:
    """The wheel installed (with `extras`) into a fresh venv: its bin folder, and an empty
    folder elsewhere to run from. The venv gets no pip of its own (ensurepip: ~3 s) and no
    bytecode at install (~6 s of the memory extra's install): this suite's pip installs into it,
    and the first `soul` command compiles what it imports, as any interpreter does."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    bin_dir = env_dir / "bin"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q", "--no-compile",
                    f"{wheel}{extras}"], check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return bin_dir, elsewhere


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_works_from_any_directory(wheel: Path, tmp_path: Path) -> None:
    bin_dir, elsewhere = installed_wheel(wheel, tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}

    def soul_cmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / "soul"), *args], cwd=elsewhere, env=env, capture_output=True, text=True, check=False)

    assert soul_cmd("validate", "claudius", "samantha").returncode == 0
    graph = soul_cmd("graph", "claudius")
    assert graph.returncode == 0 and "fused call 2 [local]" in graph.stdout
    explain = soul_cmd("explain", "claudius", "-m", "Hello")
    assert explain.returncode == 0 and "prompt tokens in all" in explain.stdout
    assert soul_cmd("schema").stdout.startswith("{")
    assert soul_cmd("new", "x").returncode == 0
    assert soul_cmd("validate", "x.yaml").returncode == 0
    bad = soul_cmd("validate", "nope.yaml")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_a_wheel_runs_turns_a_background_cycle_and_a_dialogue(wheel: Path, tmp_path: Path) -> None:
    """The runtime's subpackages all ship: a wheel with the memory extra, in a fresh venv, runs
    claudius's turns (memory recall included), csd's subconscious cycles with a spontaneous
    reply, and the entelgia dialogue — each on scripted model replies, from another folder."""
    bin_dir, elsewhere = installed_wheel(wheel, tmp_path, "[memory]")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)} | {"SOUL_HOME": str(tmp_path / "home")}

    def soul_cmd(*args: str) -> dict:
        done = subprocess.run([str(bin_dir / "soul"), *args, "--json"], cwd=elsewhere, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    hello = ROOT / "examples" / "claudius-hello.yaml"
    first = soul_cmd("run", "claudius", "--script", str(hello), "-m", "Hello")
    again = soul_cmd("run", "claudius", "--script", str(hello), "-m", "Hello again", "--session", first["session"])
    assert first["reply"].startswith("Hello. I'm Claudius") and again["turn"] == 2
    csd = {"conscious": ["<ID_quiet>q</ID_quiet><ID_loud>Hello.</ID_loud>", "<ID_quiet>q</ID_quiet><ID_loud>And the trip?</ID_loud>"],
           "subconscious": ["<mood>calm</mood><criteria>be brief</criteria><S_loud></S_loud><S_quiet>q</S_quiet><trigger>false</trigger>",
                            "<mood>curious</mood><criteria>ask</criteria><S_loud>ask about the trip</S_loud><S_quiet>q</S_quiet><trigger>true</trigger>"]}
    (tmp_path / "csd.json").write_text(json.dumps(csd))
    ran = soul_cmd("run", "csd", "--script", str(tmp_path / "csd.json"), "-m", "hi", "--cycles", "2")
    assert ran["cycles"] == 2 and [s["reply"] for s in ran["spontaneous"]] == ["And the trip?"]
    lines = {"Socrates": ["What is freedom?", "Is it chosen?"], "Athena": ["Freedom needs limits.", "Limits we choose."],
             "Fixy": ["Name what you both accept."]}
    (tmp_path / "dialogue.json").write_text(json.dumps(lines))
    dialogue = soul_cmd("dialogue", "entelgia", "--turns", "3", "--seed", "1", "--script", str(tmp_path / "dialogue.json"))
    assert len(dialogue["transcript"]) == 3

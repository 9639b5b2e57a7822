"""`soul run` on a soul with a subconscious (the built-in `csd`): scripts per model slot,
`--cycles`, spontaneous replies, the mood history, `--layers`, `--persona-core` and the REPL."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

import soul
from soul.cli.main import main
from soul.errors import ProviderError
from soul.providers import ScriptedProvider
from soul.store import SessionStore

BLUEPRINTS = Path(__file__).resolve().parents[2] / "blueprints"


def conscious(loud: str, quiet: str) -> str:
    return f"<ID_quiet>{quiet}</ID_quiet><ID_loud>{loud}</ID_loud>"


def cycle(mood: str, criteria: str, quiet: str, loud: str = "", trigger: bool = False) -> str:
    return (f"<mood>{mood}</mood><criteria>{criteria}</criteria><S_loud>{loud}</S_loud>"
            f"<S_quiet>{quiet}</S_quiet><trigger>{str(trigger).lower()}</trigger>")


# Three cycles; the second sets `trigger`, so its impulse is voiced at once by the conscious
# slot's second reply. The quiet parts carry markers that must never reach stdout.
SCRIPT = {
    "conscious": [
        conscious("Hello, I'm Csd.", "ID_quiet_first marker"),
        conscious("By the way, how was the trip?", "ID_quiet_second marker"),
    ],
    "subconscious": [
        cycle("calm", "be brief", "S_quiet_one marker"),
        cycle("curious", "ask about the trip", "S_quiet_two marker", loud="ask about the trip", trigger=True),
        cycle("warm", "be kind", "S_quiet_three marker"),
    ],
}


def write(tmp_path: Path, data: object, name: str = "script.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_scripted_csd_run_reports_its_spontaneous_reply_and_mood_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "run", "csd", "--script", write(tmp_path, SCRIPT), "-m", "hi", "--json", "--cycles", "3")
    assert code == 0, err
    data = json.loads(out)
    assert (data["reply"], data["turn"], data["kind"]) == ("Hello, I'm Csd.", 1, "message")
    assert [s["reply"] for s in data["spontaneous"]] == ["By the way, how was the trip?"]
    spoken = data["spontaneous"][0]
    assert (spoken["turn"], spoken["trigger"], spoken["reason"], spoken["impulses"]) == (2, "speak_up", "trigger", ["ask about the trip"])
    assert data["mood_and_criteria"] == [
        {"mood": "calm", "criteria": "be brief", "cycle": 1},
        {"mood": "curious", "criteria": "ask about the trip", "cycle": 2},
        {"mood": "warm", "criteria": "be kind", "cycle": 3},
    ]
    assert data["cycles"] == 3 and data["failed_cycles"] == []
    assert "marker" not in out  # nothing of ID_quiet or S_quiet


def test_without_cycles_a_one_shot_answers_and_ends_without_the_loops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "run", "csd", "--script", write(tmp_path, SCRIPT), "-m", "hi", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["reply"] == "Hello, I'm Csd."
    assert (data["spontaneous"], data["mood_and_criteria"], data["cycles"]) == ([], [], 0)


def test_a_plain_list_still_serves_every_call_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = [conscious("One list for all.", "ID_quiet marker"), cycle("steady", "stay plain", "S_quiet marker")]
    code, out, err = run(capsys, "run", "csd", "--script", write(tmp_path, replies), "-m", "hi", "--json", "--cycles", "1")
    assert code == 0, err
    data = json.loads(out)
    assert data["reply"] == "One list for all."
    assert data["mood_and_criteria"] == [{"mood": "steady", "criteria": "stay plain", "cycle": 1}]
    assert "marker" not in out


def test_a_default_list_serves_the_slots_a_script_does_not_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = {"conscious": SCRIPT["conscious"][:1], "default": SCRIPT["subconscious"][:1]}
    code, out, err = run(capsys, "run", "csd", "--script", write(tmp_path, script), "-m", "hi", "--json", "--cycles", "1")
    assert code == 0, err
    assert json.loads(out)["mood_and_criteria"] == [{"mood": "calm", "criteria": "be brief", "cycle": 1}]


def test_a_script_missing_a_slot_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"conscious": SCRIPT["conscious"]})
    code, out, err = run(capsys, "run", "csd", "--script", path, "-m", "hi", "--json", "--cycles", "3")
    assert code == 1 and out == ""
    assert err.startswith("soul: error: ") and "Traceback" not in err
    assert path in err and "'subconscious'" in err and "it has: conscious" in err


def test_a_script_naming_no_slot_of_the_soul_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {**SCRIPT, "subconcious": ["typo"]})
    code, _, err = run(capsys, "run", "csd", "--script", path, "-m", "hi")
    assert code == 1 and "Traceback" not in err
    assert "'subconcious' is no model slot of csd" in err and "conscious, subconscious" in err


def test_a_slot_that_is_not_a_list_of_replies_names_file_and_slot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"conscious": "just one string", "subconscious": []})
    code, _, err = run(capsys, "run", "csd", "--script", path, "-m", "hi")
    assert code == 1 and f"{path}: slot 'conscious' must be a list of strings" in err


def test_each_slot_consumes_its_own_list_even_on_one_provider_spec(tmp_path: Path) -> None:
    # both slots on `local` with the same options: one provider per slot all the same
    folder = tmp_path / "csd"
    shutil.copytree(BLUEPRINTS, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    blueprint = yaml.safe_load((folder / "csd.yaml").read_text())
    blueprint["models"] = {"conscious": "local", "subconscious": "local"}
    (folder / "csd.yaml").write_text(yaml.safe_dump(blueprint))
    scripts = {slot: ScriptedProvider(replies) for slot, replies in SCRIPT.items()}
    with soul.load(folder / "csd.yaml", provider=scripts) as loaded:
        session = loaded.session()
        assert session.turn_sync("hi").reply == "Hello, I'm Csd."
    assert (scripts["conscious"].calls, scripts["subconscious"].calls) == (1, 0)


def test_a_mapping_without_the_slot_or_a_default_fails_at_load() -> None:
    with pytest.raises(ProviderError, match=r"model slot 'subconscious' \(it has: conscious\)"):
        soul.load("csd", provider={"conscious": ScriptedProvider([])})
    # a model that is no slot (claudius names a provider spec) takes `default`
    soul.load("claudius", provider={"default": ScriptedProvider([])}).close()
    with pytest.raises(ProviderError, match="'conscious' is no model slot of claudius"):
        soul.load("claudius", provider={"conscious": ScriptedProvider([])})


def test_the_plain_one_shot_prints_the_reply_then_the_unprompted_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "run", "csd", "--script", write(tmp_path, SCRIPT), "-m", "hi", "--cycles", "3")
    assert code == 0, err
    assert out.index("csd> Hello, I'm Csd.") < out.index("csd (unprompted)> By the way, how was the trip?")
    assert "marker" not in out and "[subconscious" not in out


def test_layers_show_each_stream_escaped_and_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = {
        "conscious": SCRIPT["conscious"],
        "subconscious": [
            cycle("[bold]loud[/] \x1b[2J", "be brief", "S_quiet_one"),
            *SCRIPT["subconscious"][1:],
        ],
    }
    code, out, err = run(capsys, "run", "csd", "--script", write(tmp_path, script), "-m", "hi", "--cycles", "3", "--layers")
    assert code == 0, err
    lines = out.splitlines()
    expected = [
        "csd> Hello, I'm Csd.",
        "[internal] ID_quiet_first marker",
        "[subconscious #1] quiet: S_quiet_one",
        "[subconscious #1] mood: [bold]loud[/] \\x1b[2J · criteria: be brief",  # shown, never markup
        "[subconscious #2] mood: curious · criteria: ask about the trip",
        "[impulse] ask about the trip — now (trigger)",
        "[trigger speak_up] trigger · 1 impulse",
        "csd (unprompted)> By the way, how was the trip?",
        "[internal] ID_quiet_second marker",
    ]
    positions = [lines.index(line) for line in expected]
    assert positions == sorted(positions)
    # the third cycle runs beside the spontaneous turn: after the second, in no set order with it
    assert lines.index("[subconscious #3] mood: warm · criteria: be kind") > positions[4]
    assert "\x1b" not in out


def test_persona_core_is_snapshotted_for_a_new_session_only(tmp_path: Path, capsys: pytest.CaptureFixture[str], soul_home: Path) -> None:
    core = tmp_path / "core.md"
    core.write_text("# My own core\n\nYou dream of lighthouses.\n", encoding="utf-8")
    script = write(tmp_path, SCRIPT)
    code, out, err = run(capsys, "run", "csd", "--script", script, "-m", "hi", "--json", "--persona-core", str(core))
    assert code == 0, err
    session = json.loads(out)["session"]
    with SessionStore.open(soul_home) as store:
        assert store.persona_core(session, "subconscious").text == core.read_text()
    code, _, err = run(capsys, "run", "csd", "--script", script, "-m", "hi", "--session", session, "--persona-core", str(core))
    assert code == 1 and "resumed session keeps" in err
    code, _, err = run(capsys, "run", "claudius", "--script", write(tmp_path, ["unused"]), "-m", "hi", "--persona-core", str(core))
    assert code == 1 and "no background process" in err


class Repl:
    """`soul run` as a subprocess whose output is read line by line as it comes."""

    def __init__(self, *argv: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
        self.proc = subprocess.Popen([sys.executable, "-m", "soul.cli", "run", *argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.seen):
            self.seen.append(self.lines.get(timeout=max(0.01, deadline - time.monotonic())))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self) -> tuple[int, str, str]:
        """Close its input, wait for it to leave; (exit code, all stdout, stderr)."""
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        self.reader.join(timeout=5)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code, "".join(self.seen), self.proc.stderr.read()


def test_the_repl_prints_spontaneous_replies_unasked_and_steers_the_loop(tmp_path: Path) -> None:
    repl = Repl("csd", "--script", write(tmp_path, SCRIPT), "--cycles", "3", "--layers")
    try:
        # nobody types: the loop starts with the session and its trigger speaks up
        repl.wait_for("csd (unprompted)> Hello, I'm Csd.")
        repl.wait_for("[subconscious] done")
        for command in ("/mood", "/pause", "/resume", "/quit"):
            repl.send(command)
        code, out, err = repl.finish()
    finally:
        if repl.proc.poll() is None:
            repl.proc.kill()
    assert code == 0, err
    assert "mood: warm" in out and "criteria: be kind" in out and "cycle 3" in out
    assert "background paused" in out and "background resumed" in out
    assert "Traceback" not in err


@pytest.mark.parametrize("leave", ["end of input", "Ctrl-C"])
def test_the_repl_leaves_with_its_loop_still_running(leave: str, tmp_path: Path) -> None:
    # no --cycles: the loop would cycle for ever; leaving must stop it, not hang
    repl = Repl("csd", "--script", write(tmp_path, SCRIPT))
    try:
        repl.wait_for("csd (unprompted)>")
        if leave == "Ctrl-C":
            time.sleep(0.2)  # back at the prompt
            repl.proc.send_signal(signal.SIGINT)
        code, _, err = repl.finish()
    finally:
        if repl.proc.poll() is None:
            repl.proc.kill()
    assert code == 0 and "Traceback" not in err


def test_piped_input_and_output_hold_no_prompt(tmp_path: Path) -> None:
    # `echo hi | soul run csd --layers > log`: a `you>` after every layer line was noise
    repl = Repl("csd", "--script", write(tmp_path, SCRIPT), "--cycles", "3", "--layers")
    try:
        repl.wait_for("csd (unprompted)> Hello, I'm Csd.")
        repl.wait_for("[subconscious] done")
        repl.send("/mood")
        repl.send("/quit")
        code, out, err = repl.finish()
    finally:
        if repl.proc.poll() is None:
            repl.proc.kill()
    assert code == 0, err
    assert "[subconscious #1]" in out and "mood: warm" in out  # the layers and the command were printed
    assert "you>" not in out and "you>" not in err
    assert "\n\n\n" not in out  # nor the blank line that made room for it


def test_a_prompt_only_at_a_terminal() -> None:
    import pty

    from soul.cli.repl import PROMPT, prompt_for

    master, slave = pty.openpty()
    try:
        with open(slave, "w", closefd=False) as tty, open(os.devnull, "w") as piped:
            assert prompt_for(tty, tty) == PROMPT
            assert prompt_for(tty, piped) == ""
            assert prompt_for(piped, tty) == ""
    finally:
        os.close(master)
        os.close(slave)

"""`soul run`, `soul sessions` and `soul user-model` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from souls import claudius_reply

from soul.cli.main import main


def script(tmp_path: Path, *replies: str) -> str:
    path = tmp_path / "replies.yaml"
    path.write_text(yaml.safe_dump(list(replies)))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_once_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "run", "claudius", "--script", script(tmp_path, claudius_reply()), "-m", "Hi, I'm Ada", "--json", "--user", "ada")
    assert code == 0
    data = json.loads(out)
    assert data["reply"].startswith("Hello, Ada")
    assert data["turn"] == 1 and data["steps"]["user_check"]["result"] is True
    assert data["trace"]["calls"] == 1 and data["trace"]["steps"]["state_check"] == "skipped"


# Scripted model output of the kinds real models emit, and the reply each must give.
MALFORMED = [
    ("```xml\n<internal_monologue verb=\"mused\">x</internal_monologue>\n<external_dialogue verb=\"said\">Fenced.</external_dialogue>\n<user_model_check>no</user_model_check>\n```", "Fenced."),
    ("Sure! Here you go:\n<external_dialogue verb='noted'>Prose around.</external_dialogue>\n<user_model_check>false</user_model_check>\nHope that helps.", "Prose around."),
    ("<internal_monologue>x</internal_monologue><EXTERNAL_DIALOGUE verb=said>Caps & no close<user_model_check>0</user_model_check>", "Caps & no close"),
    ("<external_dialogue>First wins.</external_dialogue><external_dialogue>Second.</external_dialogue><user_model_check>false</user_model_check>", "First wins."),
    ("<external_dialogue verb=\"shouted\">Unknown verb kept.</external_dialogue><user_model_check>false</user_model_check>", "Unknown verb kept."),
    ("<external_dialogue>a < b && c > d</external_dialogue><user_model_check>false</user_model_check>", "a < b && c > d"),
]


@pytest.mark.parametrize(("raw", "reply"), MALFORMED, ids=[f"malformed{i}" for i in range(len(MALFORMED))])
def test_run_reads_malformed_model_output(raw: str, reply: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "run", "claudius", "--script", script(tmp_path, raw, raw), "-m", "hi", "--json")
    assert code == 0
    assert json.loads(out)["reply"] == reply


def test_running_out_of_script_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "run", "claudius", "--script", script(tmp_path), "-m", "hi")
    assert code == 1
    assert err.strip().startswith("soul: error: scripted replies ran out")
    assert "Traceback" not in err


def test_a_missing_provider_says_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "run", "claudius", "-m", "hi", "--model", "anthropic/claude-x")
    assert code == 1 and "--script FILE" in err


def test_sessions_and_user_models_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = script(tmp_path, claudius_reply(), claudius_reply(model="# Ada\n\n## Persona\nBuilds compilers and parsers.", note="parsers too"))
    run(capsys, "run", "claudius", "--script", replies, "-m", "Hi, I'm Ada", "--user", "ada", "--json")
    code, out, _ = run(capsys, "sessions", "list")
    assert code == 0
    session_id = out.split()[0]
    replies2 = script(tmp_path, claudius_reply(model="# Ada\n\n## Persona\nBuilds compilers and parsers.", note="parsers too"))
    code, out, _ = run(capsys, "run", "claudius", "--script", replies2, "-m", "Parsers too", "--session", session_id[:6], "--json")
    assert code == 0 and json.loads(out)["turn"] == 2
    code, out, _ = run(capsys, "sessions", "show", session_id[:6])
    assert "Hi, I'm Ada" in out and "Parsers too" in out and "(internal_monologue)" not in out
    code, out, _ = run(capsys, "sessions", "show", session_id[:6], "--all")
    assert "(internal_monologue)" in out
    code, out, _ = run(capsys, "sessions", "export", session_id)
    assert json.loads(out)["session"]["id"] == session_id
    code, out, _ = run(capsys, "user-model", "history", "claudius", "--user", "ada")
    assert [line.split()[0] for line in out.splitlines()] == ["v1", "v2"]
    code, out, _ = run(capsys, "user-model", "diff", "claudius", "--user", "ada")
    assert "-Builds compilers." in out and "+Builds compilers and parsers." in out
    code, out, _ = run(capsys, "user-model", "revert", "claudius", "--user", "ada", "--version", "1")
    assert code == 0 and "now v3" in out
    code, out, _ = run(capsys, "user-model", "show", "claudius", "--user", "ada")
    assert "Builds compilers." in out and "parsers" not in out
    code, out, _ = run(capsys, "sessions", "delete", session_id)
    assert code == 0
    code, _, err = run(capsys, "sessions", "show", session_id)
    assert code == 1 and "no session" in err.lower()


def test_the_repl_talks_and_obeys_commands(tmp_path: Path, soul_home: Path) -> None:
    replies = script(tmp_path, claudius_reply("Hello from the REPL."))
    commands = "/thoughts\nHi there\n/state\n/user\n/nope\n/quit\n"
    proc = subprocess.run(
        [sys.executable, "-m", "soul.cli", "run", "claudius", "--script", replies, "--user", "ada"],
        input=commands, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Hello from the REPL." in proc.stdout
    assert "thoughts on" in proc.stdout
    assert "(think · ran)" in proc.stdout  # thoughts shown after the reply
    assert "# Ada" in proc.stdout  # /user
    assert "unknown command /nope" in proc.stdout


@pytest.mark.parametrize("name", ["claudius", "samantha"])
def test_the_readme_examples_answer(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / f"{name}-hello.yaml"
    code, out, _ = run(capsys, "run", name, "--script", str(example), "-m", "Hello", "--json")
    assert code == 0
    assert json.loads(out)["reply"].startswith(("Hello. I'm Claudius", "Hi! I'm Samantha"))


def test_sessions_show_takes_the_id_after_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "run", "claudius", "--script", script(tmp_path, claudius_reply()), "-m", "Hi", "--json")
    session_id = run(capsys, "sessions", "list")[1].split()[0]
    for argv in (("show", "--all", session_id[:6]), ("show", session_id[:6], "--all")):
        code, out, err = run(capsys, "sessions", *argv)
        assert code == 0 and "(internal_monologue)" in out, err
    with pytest.raises(SystemExit) as caught:  # no id: a usage error, exit 2
        main(["sessions", "show", "--all"])
    assert caught.value.code == 2


def test_user_model_diff_and_history_keep_their_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = claudius_reply(model="# Ada\nBuilds compilers.", note="first")
    second = claudius_reply(model="# Ada\nBuilds parsers.", note="two things:\nparsers\nnot compilers")
    run(capsys, "run", "claudius", "--script", script(tmp_path, first), "-m", "Hi", "--user", "ada", "--json")
    session_id = run(capsys, "sessions", "list")[1].split()[0]
    run(capsys, "run", "claudius", "--script", script(tmp_path, second), "-m", "Hi", "--user", "ada", "--session", session_id, "--json")
    code, out, _ = run(capsys, "user-model", "diff", "claudius", "--user", "ada")
    lines = out.splitlines()
    assert code == 0 and "-Builds compilers." in lines and "+Builds parsers." in lines
    code, out, _ = run(capsys, "user-model", "history", "claudius", "--user", "ada")
    assert [line.split()[0] for line in out.splitlines() if not line.startswith(" ")] == ["v1", "v2"]
    assert "    parsers" in out.splitlines()


def test_errors_print_escapes_not_terminal_controls(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "sessions", "show", "\x1b]0;pwned\x07\x1b[2J")
    assert code == 1 and "\x1b" not in err and "\\x1b]0;pwned" in err
    code, _, err = run(capsys, "validate", "/nonexistent/\x1b[2J.yaml")
    assert code == 2 and "\x1b" not in err

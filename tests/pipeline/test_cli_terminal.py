"""Escape sequences in model text, user text or stored sessions never reach the terminal as
control (issue 12.8): they are shown as visible escapes, and JSON output stays valid JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from souls import claudius_reply

from soul.cli.main import main
from soul.cli.terminal import json_text, markup_safe, shown

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
CSI8 = "\x9b31m"  # an 8-bit CSI
BIDI = "\u202eevil\u202c"
RETURN = "safe\rEVIL"
HOSTILE = f"Hi {CLEAR}{TITLE}{LINK}{CSI8}{BIDI}{RETURN} end"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\r")


def _clean(text: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} reached the output"


def test_shown_keeps_text_and_makes_controls_visible() -> None:
    out = shown(HOSTILE)
    _clean(out)
    assert out.startswith("Hi \\x1b[2J") and "\\u202eevil" in out and "safe\\x0dEVIL" in out
    assert shown("line one\n\ttabbed — ünïcode ✓") == "line one\n\ttabbed — ünïcode ✓"


def test_markup_in_text_is_not_interpreted() -> None:
    from rich.console import Console

    console = Console(record=True, width=200, color_system="truecolor", force_terminal=True)
    console.print(f"[dim]{markup_safe('[/] [bold red]x[/] [link=https://e]y[/link]')}[/]")
    assert "[/] [bold red]x[/] [link=https://e]y[/link]" in console.export_text()


@given(st.text())
def test_json_text_is_valid_json_of_the_same_value_with_no_raw_controls(text: str) -> None:
    out = json_text({"reply": text, "list": [text]})
    assert json.loads(out) == {"reply": text, "list": [text]}
    _clean(out.replace("\n", ""))


def _script(tmp_path: Path, *replies: str) -> str:
    path = tmp_path / "replies.yaml"
    path.write_text(yaml.safe_dump(list(replies), allow_unicode=True))
    return str(path)


def _hostile_reply() -> str:
    return claudius_reply(HOSTILE, model=f"# Ada {TITLE}\nLikes {BIDI}.")


def test_run_prints_a_hostile_reply_as_visible_escapes(tmp_path: Path, capsys: pytest.CaptureFixture[str], soul_home: Path) -> None:
    code = main(["run", "claudius", "--script", _script(tmp_path, _hostile_reply()), "-m", "hi", "--show-thoughts"])
    out = capsys.readouterr().out
    assert code == 0
    _clean(out)
    assert "\\x1b]0;pwned\\x07" in out


def test_run_json_keeps_the_reply_exact_and_the_output_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str], soul_home: Path) -> None:
    code = main(["run", "claudius", "--script", _script(tmp_path, _hostile_reply()), "-m", "hi", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    _clean(out)
    assert json.loads(out)["reply"] == HOSTILE


def test_sessions_and_user_models_print_stored_text_safely(tmp_path: Path, capsys: pytest.CaptureFixture[str], soul_home: Path) -> None:
    assert main(["run", "claudius", "--script", _script(tmp_path, _hostile_reply()), "-m", f"user says {CLEAR}", "--json", "--user", "ada"]) == 0
    session = json.loads(capsys.readouterr().out)["session"]
    for argv in (["sessions", "show", session], ["sessions", "export", session], ["user-model", "show", "claudius", "--user", "ada"],
                 ["user-model", "history", "claudius", "--user", "ada"], ["user-model", "diff", "claudius", "--user", "ada"]):
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        _clean(out)
    assert main(["sessions", "export", session]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert any(CLEAR in text for text in _strings(exported))  # the stored text itself is kept exact


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []

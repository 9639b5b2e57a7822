"""Every verb prints model, user and stored text through one path (soul.cli.terminal): no
terminal control — ESC sequences, the OSC 52 clipboard write, CSI, 8-bit C1 controls, BEL,
bidi overrides — reaches the terminal raw, and Rich markup in stored text prints literally."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from soul.cli.main import main

CLI = Path(__file__).resolve().parents[2] / "pipeline" / "cli"
# what a memory, a reply or a source file may carry: clipboard write (OSC 52, BEL and ST
# ended), clear screen (CSI), an 8-bit CSI and NEL (C1), a right-to-left override, markup
HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07 copied \x1b]52;c;eA==\x1b\\ \x1b[2J\x1b[H \x9b31m \x85 \u202e [bold]loud[/bold] [link=x]y[/link]"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_safe(text: str) -> None:
    found = RAW.findall(text)
    assert not found, f"raw controls reached the terminal: {found!r} in {text[:300]!r}"


def test_no_verb_prints_except_through_the_terminal_module() -> None:
    """One output path: `print`, `sys.stdout.write` and `sys.stderr.write` appear only in
    cli/terminal.py (serve.py is the serve helper's, routed when it is next touched)."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        if path.name in ("terminal.py", "serve.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "print":
                found.append(f"{path.name}:{node.lineno} print(...)")
            elif (isinstance(func, ast.Attribute) and func.attr == "write" and isinstance(func.value, ast.Attribute)
                  and func.value.attr in ("stdout", "stderr")):
                found.append(f"{path.name}:{node.lineno} {func.value.attr}.write(...)")
    assert not found, "print through soul.cli.terminal (say / say_json): " + ", ".join(found)


@pytest.fixture
def hostile_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    pytest.importorskip("onnxruntime")
    source = tmp_path / "hostile.jsonl"
    lines = [{"text": f"{HOSTILE} note number {i} about the garden and its tomatoes", "tags": ["[red]t\x1b[0m"]} for i in range(6)]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    field = str(tmp_path / "field")
    assert main(["memory", "ingest", str(source), "--field", field, "--no-context"]) == 0
    capsys.readouterr()
    return field


@pytest.mark.parametrize("argv", [
    ["memory", "recall", "garden tomatoes"],
    ["memory", "recall", "garden tomatoes", "--json"],
    ["memory", "recall", "garden tomatoes", "--explain", "--mode", "resonate"],
    ["memory", "themes"],
    ["memory", "themes", "--json"],
    ["memory", "stats"],
])
def test_memory_verbs_show_stored_controls_as_escapes_and_markup_literally(
        argv: list[str], hostile_field: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--field", hostile_field]) == 0
    out, err = capsys.readouterr()
    assert_safe(out)
    assert_safe(err)
    if "--json" in argv:
        assert all(HOSTILE in item["text"] for item in json.loads(out))  # still the same data
    elif argv[1] != "stats":
        assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in out and "[bold]loud[/bold]" in out


def test_code_verbs_show_a_hostile_source_files_text_as_escapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tree_sitter_python")
    src = tmp_path / "src"
    src.mkdir()
    (src / "evil.py").write_text(f'def evil(x="{HOSTILE}"):\n    return helper(x)\n\n\ndef helper(y):\n    return y\n')
    field = str(tmp_path / "field")
    assert main(["memory", "index-code", str(src), "--field", field]) == 0
    for argv in (["find-symbol", "evil"], ["find-symbol", "evil", "--json"], ["search-symbols", "evil"],
                 ["callees", "evil"], ["callers", "helper"]):
        capsys.readouterr()
        assert main(["memory", *argv, "--field", field]) == 0
        out, err = capsys.readouterr()
        assert_safe(out)
        assert_safe(err)

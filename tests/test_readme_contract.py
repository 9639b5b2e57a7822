"""The README's commands are the contract: CI runs them as written, and they install what the
suite needs.

`.ci/run` reads the README's two set-up commands with `.ci/readme_command.py` and runs their
steps (with its own venv folder), so there is no second copy to drift. What is checked here,
on the real files and on planted copies that break each rule:
- the test command installs the `test` extra and runs pytest; `.ci/run` installs nothing of
  its own and runs both README commands through `readme_command.py`;
- the `test` extra covers every extra but `bench` (the suite tests them all), and the quick
  start's extras;
- a test needing a Debian package skips naming `sudo apt-get install PACKAGE`, and that
  package is the one `.ci/run` installs and the README's sentence names.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import postgres_server
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "serve"))
import serving  # noqa: E402  (tests/serve/serving.py: the Chromium skip)

_spec = importlib.util.spec_from_file_location("readme_command", REPO / ".ci" / "readme_command.py")
assert _spec is not None and _spec.loader is not None
readme_command = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_command)

NOT_FOR_TESTS = {"bench"}  # comparisons with other frameworks, run by benchmarks/ only
APT_LINES = (postgres_server.APT_LINE, serving.APT_LINE)


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _extras_in(requirement: str) -> list[str]:
    found = re.search(r"\[([^\]]*)\]", requirement)
    return [e.strip() for e in found.group(1).split(",")] if found else []


def expanded(extras: list[str], pyproject: dict, seen: set[str] | None = None) -> set[str]:
    """The distributions `pip install '.[EXTRAS]'` brings (soulgraph's own extras followed)."""
    seen = set() if seen is None else seen
    own = pyproject["project"]["name"]
    table = pyproject["project"]["optional-dependencies"]
    names = {_name(r) for r in pyproject["project"]["dependencies"]}
    for extra in extras:
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in table.get(extra, ()):
            if _name(requirement) == own:
                names |= expanded(_extras_in(requirement), pyproject, seen)
            else:
                names.add(_name(requirement))
    return names


def _installed_extras(command: str) -> list[str]:
    """The extras of the command's `pip install -e '.[...]'` step."""
    for step in readme_command.steps(command):
        found = re.search(r"pip install -e '\.\[([^\]]*)\]'", step)
        if found:
            return [e.strip() for e in found.group(1).split(",")]
    return []


def problems(readme: Path, ci: Path, pyproject_file: Path) -> list[str]:
    """Every way the README's commands, CI's and the extras disagree (empty: they agree)."""
    out: list[str] = []
    pyproject = tomllib.loads(pyproject_file.read_text(encoding="utf-8"))
    table = pyproject["project"]["optional-dependencies"]
    commands = readme_command.commands(readme)
    test, start = commands["test"], commands["start"]
    if _installed_extras(test) != ["test"]:
        out.append(f"the README's test command installs {_installed_extras(test)}, not the `test` extra")
    if not readme_command.steps(test)[-1].startswith(".venv/bin/python -m pytest"):
        out.append("the README's test command does not end by running pytest")
    needed = expanded([e for e in table if e not in NOT_FOR_TESTS | {"test"}], pyproject)
    lacking = needed - expanded(["test"], pyproject)
    if lacking:
        out.append(f"the `test` extra lacks {', '.join(sorted(lacking))}")
    lacking = expanded(_installed_extras(start), pyproject) - expanded(["test"], pyproject)
    if lacking:
        out.append(f"the quick start installs {', '.join(sorted(lacking))}, which the tests do not")
    script = ci.read_text(encoding="utf-8")
    for which in ("test", "start"):
        if f"readme_command.py {which}" not in script:
            out.append(f"CI does not run the README's {which} command (.ci/readme_command.py {which})")
    if re.search(r"^[^#]*pip install", script, re.MULTILINE):
        out.append("CI installs something itself: its installs must be the README's")
    text = readme.read_text(encoding="utf-8")
    said = re.search(r"`sudo apt-get install ([a-z0-9 .+-]+)`", text)
    for line in APT_LINES:
        package = line.rsplit(" ", 1)[-1]
        if said is None or package not in said.group(1).split():
            out.append(f"the README does not name `{line}` where it says which tests skip")
        if not re.search(rf"^[^#]*apt_install {re.escape(package)}\b", script, re.MULTILINE):
            out.append(f"CI does not install {package}, which a skipped test asks for")
    return out


def test_the_readme_and_ci_agree() -> None:
    assert problems(REPO / "README.md", REPO / ".ci" / "run", REPO / "pyproject.toml") == []


def _planted(tmp_path: Path, readme: tuple[str, str] = ("", ""), ci: tuple[str, str] = ("", ""),
             pyproject: tuple[str, str] = ("", "")) -> list[str]:
    paths = []
    for (old, new), name in ((readme, "README.md"), (ci, "run"), (pyproject, "pyproject.toml")):
        source = REPO / (".ci/run" if name == "run" else name)
        text = source.read_text(encoding="utf-8")
        assert old in text
        (tmp_path / name).write_text(text.replace(old, new, 1), encoding="utf-8")
        paths.append(tmp_path / name)
    return problems(*paths)


def test_a_readme_test_command_with_other_extras_is_caught(tmp_path: Path) -> None:
    found = _planted(tmp_path, readme=("pip install -e '.[test]'", "pip install -e '.[dev,memory,local]'"))
    assert found == ["the README's test command installs ['dev', 'memory', 'local'], not the `test` extra"]


def test_a_test_extra_missing_an_extra_is_caught(tmp_path: Path) -> None:
    found = _planted(tmp_path, pyproject=("local,postgres,serve,mcp", "local,postgres,mcp"))
    assert found == ["the `test` extra lacks starlette, uvicorn, websockets"]


def test_ci_installing_on_its_own_is_caught(tmp_path: Path) -> None:
    found = _planted(tmp_path, ci=('mapfile -t start_steps', 'python -m pip install -e ".[dev]"\nmapfile -t start_steps'))
    assert found == ["CI installs something itself: its installs must be the README's"]


def test_a_skip_line_ci_does_not_install_is_caught(tmp_path: Path) -> None:
    found = _planted(tmp_path, ci=("|| apt_install chromium", "|| true"))
    assert found == ["CI does not install chromium, which a skipped test asks for"]


@pytest.mark.parametrize("line", APT_LINES)
def test_a_skipped_test_names_its_apt_line(line: str) -> None:
    reasons = (postgres_server.SKIP_REASON, serving.SKIP_REASON)
    assert any(line in reason for reason in reasons)


def test_ci_runs_each_step_with_its_own_venv() -> None:
    command = "python3 -m venv .venv && X=1 .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"
    assert readme_command.steps(command, ".venv-ci") == [
        "python3 -m venv .venv-ci",
        "X=1 .venv-ci/bin/pip install -e '.[test]'",
        ".venv-ci/bin/python -m pytest",
    ]


def _verbs() -> list[str]:
    """Every verb of the `soul` command, sub-verbs as "memory recall"."""
    import argparse

    from soul.cli.main import build_parser

    found: list[str] = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append(prefix + name)
                    walk(sub, prefix + name + " ")

    walk(build_parser(), "")
    return found


def test_the_readme_cli_table_lists_every_verb() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text.split("## The CLI", 1)[1].split("\n\n", 2)[1]
    rows = [line.replace("\\|", "|") for line in table.splitlines() if line.startswith("| `soul ")]
    missing = []
    for verb in _verbs():
        top, _, sub = verb.partition(" ")
        row = [r for r in rows if re.search(rf"`soul {re.escape(top)}\b", r)]
        if not row or (sub and not re.search(rf"[ |`]{re.escape(sub)}[ |`]", row[0])):
            missing.append(verb)
    assert missing == []

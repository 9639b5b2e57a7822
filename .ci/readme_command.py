"""The README's set-up commands, read from the README itself: CI runs these, never a copy.

The README's quick start holds two shell commands, each one line of `&&`-joined steps in a
fenced `sh` block: the first job (`start`: a venv, the install, a soul answering offline) and
the tests (`test`: a venv, the install of the `test` extra, pytest). `.ci/run` runs their
steps, with its own venv folder in place of `.venv`, so the README's commands are what CI
proves, and the two cannot drift (tests/test_readme_contract.py checks the rest).

    python3 .ci/readme_command.py test --venv .venv-ci    # the steps, one per line
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)
_VENV = re.compile(r"(?<![\w./-])\.venv(?=/|\s|$)")


def commands(readme: Path = README) -> dict[str, str]:
    """{"start": ..., "test": ...}: the README's commands that make a venv (the test command
    is the one running pytest; the first other one is the quick start)."""
    found: dict[str, str] = {}
    for block in _BLOCK.findall(readme.read_text(encoding="utf-8")):
        line = block.strip()
        if "\n" in line or not line.startswith("python3 -m venv .venv"):
            continue
        name = "test" if " -m pytest" in line else "start"
        found.setdefault(name, line)
    missing = {"start", "test"} - set(found)
    if missing:
        raise SystemExit(f"{readme}: no {' or '.join(sorted(missing))} command (a ```sh block starting "
                         "`python3 -m venv .venv`)")
    return found


def steps(command: str, venv: str = ".venv") -> list[str]:
    """The command's `&&`-joined steps, with `venv` for the README's `.venv`."""
    return [_VENV.sub(venv, step.strip()) for step in command.split(" && ")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=("start", "test"))
    parser.add_argument("--venv", default=".venv", help="the venv folder to use instead of .venv")
    args = parser.parse_args(argv)
    print("\n".join(steps(commands()[args.which], args.venv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which commands a blueprint may run: the user's allow-list, which no blueprint can write.

A blueprint's MCP entry may name a command (`mcp: mcp-server-time --local-timezone UTC`). A
blueprint is text anyone can hand you — a cloned repository is hostile input until you choose
to run it — so the command runs only when the user allowed it, in one of three places outside
every blueprint folder (the same shape as the model hosts' rule, `SOUL_ALLOW_HOSTS`):

- `SOUL_ALLOW_COMMANDS`: command lines separated by commas;
- `--allow-command COMMAND` on `soul run`, `soul dialogue`, `soul serve`, `soul worker` and
  `soul validate --tools` (`allow_commands`, for the process);
- the file `allowed-commands` in the data home (`$SOUL_HOME`, default `~/.soul`): one command
  line a line, `#` comments.

An entry is a command line split as a shell would split it (nothing expanded); it allows every
command whose arguments start with the entry's: `mcp-server-time` allows `mcp-server-time
--local-timezone UTC`, `uvx mcp-server-time` allows only that through uvx, and `python`
allows any Python program (so allow what you mean). Nothing is resolved: the entry matches the
words as the blueprint writes them, and the command runs in the blueprint's folder.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from soul.credentials import allow_list_entries, allow_list_file

ALLOW_ENV = "SOUL_ALLOW_COMMANDS"
ALLOW_FILE = "allowed-commands"

_allowed_here: list[tuple[str, ...]] = []  # --allow-command, for this process


def parse_command(entry: str) -> tuple[str, ...]:
    """An allow-list entry as its words; () for an empty or unbalanced one (it allows nothing)."""
    try:
        return tuple(shlex.split(entry))
    except ValueError:
        return ()


def allow_commands(entries: Iterable[str]) -> None:
    """Allow these commands for the rest of the process (`--allow-command`)."""
    _allowed_here.extend(words for words in map(parse_command, entries) if words)


def forget_allowed_commands() -> None:
    """Drop what `allow_commands` allowed (tests; an embedder switching users)."""
    _allowed_here.clear()


def allow_file() -> Path:
    """The data home's allow-list of commands (not created)."""
    return allow_list_file(ALLOW_FILE)


def allowed_commands() -> list[tuple[str, ...]]:
    """Every command the user allowed: the variable, the flag, the file."""
    entries = [*re.split(r",", os.environ.get(ALLOW_ENV, ""))]
    entries += allow_list_entries(ALLOW_FILE)
    return [*(words for words in map(parse_command, entries) if words), *_allowed_here]


def command_allowed(argv: Sequence[str]) -> bool:
    """Whether the user allowed running `argv` (its words start with an allowed entry's)."""
    words = tuple(argv)
    return bool(words) and any(words[: len(entry)] == entry for entry in allowed_commands())


def how_to_allow(argv: Sequence[str]) -> str:
    """The three ways to allow the command `argv` (exactly it), for messages."""
    line = shlex.join(argv) if argv else "COMMAND"
    quoted = shlex.quote(line)
    return (f"{ALLOW_ENV}={quoted}, `--allow-command {quoted}` (soul run, dialogue, serve, worker, validate --tools), "
            f"or the line `{line}` in {allow_file()}")

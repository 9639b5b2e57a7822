"""The `soul` command: `main` parses the verbs; one module per verb group (run, sessions,
memory, code, new). Each verb imports what it needs only when it runs."""

from soul.cli.main import main

__all__ = ["main"]

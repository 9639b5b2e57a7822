"""Untrusted text in prompts: user and model text made inert, so it can never become
structure (a tag, an entity, a fence) in what a model reads."""

from __future__ import annotations

import re


def escape_untrusted(text: str) -> str:
    """User text as inert data: no tag, entity or CDATA can survive into the prompt."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fence(text: str) -> str:
    """A code fence longer than any run of backticks inside the text."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}\n{text}\n{bar}"

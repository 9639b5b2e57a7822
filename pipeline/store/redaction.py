"""Keeping secret values out of everything soul writes: the store, its logs, outputs, errors.

The store redacts every text and JSON field of a commit before its transaction (so the JSONL
mirror, written from the same data, is clean too); providers redact their error messages and
cassettes; the CLI redacts what it prints. One list of secrets serves them all: values a
provider registered (`remember`, when it found its key), values of environment variables
whose names look secret (`ANTHROPIC_API_KEY`, `*_TOKEN`, ...), and strings shaped like common
API keys. It lives in the store because the store is the earliest stage every writer may use.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

from soul.records import Commit

REDACTED = "[redacted]"
_SECRET_NAME = re.compile(r"(API_KEY|_KEY$|TOKEN|SECRET|PASSWORD)")
# Each alternative consumes one bounded-class run greedily, so a scan stays linear in the text.
_KEY_SHAPES = re.compile(r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|xox[abp]-[A-Za-z0-9\-]{10,})")
_MIN_SECRET = 8  # shorter env values ("1", "true") are not secrets and would blank ordinary words

_known: set[str] = set()
_lock = threading.Lock()


def remember(secret: str | None) -> None:
    """Blank this value from now on wherever soul writes text."""
    if secret and len(secret) >= _MIN_SECRET:
        with _lock:
            _known.add(secret)


def secrets() -> list[str]:
    """The secret values known now, longest first (so a key's prefix never leaks)."""
    found = {v for k, v in os.environ.items() if _SECRET_NAME.search(k.upper()) and len(v) >= _MIN_SECRET}
    with _lock:
        found |= _known
    return sorted(found, key=len, reverse=True)


def redact(text: str, known: list[str] | None = None) -> str:
    """`text` with every known secret and key-shaped string replaced by `[redacted]`.

    `known` is a list from `secrets()`, to reuse it across many strings.
    """
    if not text:
        return text
    for secret in secrets() if known is None else known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)


def redact_data(value: Any, known: list[str] | None = None) -> Any:
    """`redact` applied to every string inside plain data (dicts and their string keys, lists,
    tuples); other values are returned as they are."""
    known = secrets() if known is None else known
    if isinstance(value, str):
        return redact(value, known)
    if isinstance(value, Mapping):
        return {(redact(k, known) if isinstance(k, str) else k): redact_data(v, known) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v, known) for v in value]
    return value


def redact_commit(commit: Commit) -> Commit:
    """`commit` with every text and JSON field redacted: messages, state, user model, working
    memory, Chetana state and trace. Identifiers (session id, kind, tags) are kept."""
    known = secrets()

    def text(value: str) -> str:
        return redact(value, known)

    def data(value: Any) -> Any:
        return redact_data(value, known) if value is not None else None

    replace = dataclasses.replace
    return replace(
        commit,
        messages=tuple(replace(m, content=text(m.content), meta=data(m.meta)) for m in commit.messages),
        state=data(commit.state),
        user_model=(
            replace(commit.user_model, text=text(commit.user_model.text), note=text(commit.user_model.note))
            if commit.user_model is not None
            else None
        ),
        memory=tuple(replace(m, content=text(m.content), meta=data(m.meta)) for m in commit.memory),
        chetana=data(commit.chetana),
        trace=data(commit.trace),
    )

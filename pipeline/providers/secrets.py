"""Keeping API keys out of everything soul writes: errors, logs, traces and cassettes.

A provider finds its key here (`find_key`), which also remembers the value so `redact` can
blank it wherever it might surface — an SDK error that echoes the request, a server's error
body, a recorded prompt. Values of environment variables whose names look secret are
blanked too, and so are strings shaped like common API keys.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"
_SECRET_NAME = re.compile(r"(API_KEY|_KEY$|TOKEN|SECRET|PASSWORD)")
_KEY_SHAPES = re.compile(r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|xox[abp]-[A-Za-z0-9\-]{10,})")
_MIN_SECRET = 8  # shorter env values ("1", "true") are not secrets and would blank ordinary words

_known: set[str] = set()
_lock = threading.Lock()


def remember(secret: str | None) -> None:
    """Blank this value from now on wherever soul writes text."""
    if secret and len(secret) >= _MIN_SECRET:
        with _lock:
            _known.add(secret)


def find_key(options: Mapping[str, Any], default_env: str | None) -> tuple[str | None, str]:
    """The API key for a slot and where it came from: `api_key` (Python API only; blueprints
    cannot hold keys), the variable named by `api_key_env`, else the SDK's default variable."""
    if options.get("api_key"):
        key = str(options["api_key"])
        remember(key)
        return key, "the api_key option"
    env = options.get("api_key_env") or default_env
    if not env:
        return None, ""
    key = os.environ.get(str(env)) or None
    remember(key)
    return key, str(env)


def _secrets() -> list[str]:
    found = {v for k, v in os.environ.items() if _SECRET_NAME.search(k.upper()) and len(v) >= _MIN_SECRET}
    with _lock:
        found |= _known
    return sorted(found, key=len, reverse=True)  # longest first, so a key's prefix never leaks


def redact(text: str) -> str:
    """`text` with every known secret and key-shaped string replaced by `[redacted]`."""
    if not text:
        return text
    for secret in _secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)


def redact_data(value: Any) -> Any:
    """`redact` applied to every string inside plain data (dicts, lists, tuples)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value

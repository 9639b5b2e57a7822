"""Keeping API keys out of everything soul writes: errors, logs, traces and cassettes.

A provider finds its key here (`find_key`), which also remembers the value so `redact` can
blank it wherever it might surface — an SDK error that echoes the request, a server's error
body, a recorded prompt. The redaction itself (`redact`, `redact_data`, `remember`) lives in
the store, the earliest stage every writer may import; it is re-exported here for providers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from soul.store import REDACTED, redact, redact_data, remember

__all__ = ["REDACTED", "find_key", "redact", "redact_data", "remember"]


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

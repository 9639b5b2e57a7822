"""Keeping API keys out of everything soul writes, and away from hosts the user did not choose.

A provider finds its key here (`find_key`), which also remembers the value so `redact` can
blank it wherever it might surface — an SDK error that echoes the request, a server's error
body, a recorded prompt. The redaction itself (`redact`, `redact_data`, `remember`) lives in
the store, the earliest stage every writer may import; it is re-exported here for providers.

`find_key` is also where the key rules hold for every built-in provider: `api_key_env` must
name a variable that looks like the provider's key (`soul.credentials`), and a key goes to a
slot's `base_url` only if that host is the provider's own or the user allowed it
(`soul.providers.hosts`); otherwise the call is made without one (`NO_KEY`), or — when the
slot names a set variable with `api_key_env`, asking for it to be sent — refused with how to
allow the host.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from soul.credentials import KEY_RULE, key_variable_problem
from soul.errors import AuthError
from soul.providers.hosts import how_to_allow, may_receive_key
from soul.store import REDACTED, redact, redact_data, remember

__all__ = ["NO_KEY", "REDACTED", "find_key", "redact", "redact_data", "remember"]

NO_KEY = "sk-no-key-needed"  # sent where no key may go: OpenAI-compatible servers want some key


def find_key(options: Mapping[str, Any], default_env: str | None, *, family: str) -> tuple[str | None, str]:
    """The API key for a slot of provider `family`, and where it came from (for messages).

    `api_key` (Python API only; blueprints cannot hold keys) is the caller's own choice and is
    used as given. Otherwise the variable named by `api_key_env` (refused with AuthError if it
    does not look like a `family` key), else `default_env` (None: the SDK's own lookup). With a
    `base_url` the user has not allowed, the key is `NO_KEY` and the source says why — or,
    when `api_key_env` names a variable that is set, AuthError saying how to allow the host."""
    if options.get("api_key"):
        key = str(options["api_key"])
        remember(key)
        return key, "the api_key option"
    named = options.get("api_key_env")
    if named is not None:
        problem = key_variable_problem(family, str(named))
        if problem is not None:
            raise AuthError(f"{family}: api_key_env {problem}; it must be {KEY_RULE} — rename the variable "
                            f"(export MY_{family.upper().replace('-', '_')}_API_KEY=…) and name that")
    env = str(named) if named else default_env
    base_url = options.get("base_url")
    if base_url and not may_receive_key(family, str(base_url)):
        if named and os.environ.get(str(named)):
            raise AuthError(f"{family}: the model slot would send {named} to {base_url}, a host the blueprint chose "
                            f"and you have not allowed — to send it, allow the host: {how_to_allow(str(base_url))}; "
                            "or drop api_key_env to call it without a key")
        what = env or "your key"
        return NO_KEY, (f"{what}: none was sent to {base_url}, a host the blueprint chose — to send it, allow the "
                        f"host: {how_to_allow(str(base_url))}")
    if not env:
        return None, ""
    key = os.environ.get(env) or None
    remember(key)
    return key, env

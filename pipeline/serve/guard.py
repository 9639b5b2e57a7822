"""What keeps `soul serve` safe by default: where it may listen, who may talk to it.

- It binds 127.0.0.1 unless told otherwise; any other host needs `SOUL_SERVE_TOKEN`, and the
  server refuses to start without it (`check_bind`).
- With a token set (always off-localhost, optionally on it), every API request and WebSocket
  must carry it: `Authorization: Bearer TOKEN`, or `?token=TOKEN` (a browser cannot set a
  WebSocket's headers). The page itself and its static files need none; they hold nothing.
- On localhost, the Host header must name a loopback host: a page from elsewhere that rebinds
  its DNS name to 127.0.0.1 gets refused (DNS rebinding).
- A WebSocket's Origin, and a state-changing request's Origin when a browser sends one, must
  be the server's own: another site's page cannot drive a session in the user's browser.
  Writes also need `Content-Type: application/json`, which a cross-site form cannot send.
- Bodies and messages have size limits with a clear error (`MAX_BODY_BYTES`, `MAX_MESSAGE_CHARS`).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from soul.errors import ServeError

TOKEN_ENV = "SOUL_SERVE_TOKEN"
MAX_BODY_BYTES = 256 * 1024  # a request body (JSON around a message)
MAX_MESSAGE_CHARS = 32 * 1024  # one user message
MAX_SOCKET_BYTES = 1 << 20  # one WebSocket frame (uvicorn refuses larger ones itself)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen off-localhost without a token (`ServeError` saying how to fix it)."""
    if not is_loopback(host) and not token:
        raise ServeError(
            f"--host {host} would let other machines talk to your souls: set {TOKEN_ENV} to a "
            f"long random value first (e.g. `export {TOKEN_ENV}=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')`), or serve on 127.0.0.1"
        )


@dataclass(frozen=True)
class Guard:
    """The checks of one server: its host and its token (None: no token asked)."""

    host: str
    token: str | None

    @classmethod
    def from_env(cls, host: str) -> Guard:
        token = os.environ.get(TOKEN_ENV) or None
        check_bind(host, token)
        return cls(host, token)

    def token_ok(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        if self.token is None:
            return True
        given = ""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        elif "token" in query:
            given = query["token"]
        return hmac.compare_digest(given.encode(), self.token.encode())

    def host_ok(self, headers: Mapping[str, str]) -> bool:
        """On localhost, the Host header must be a loopback name (DNS rebinding)."""
        if not is_loopback(self.host):
            return True
        name = _hostname(headers.get("host", ""))
        return name is not None and is_loopback(name)

    def origin_ok(self, headers: Mapping[str, str]) -> bool:
        """The Origin, when there is one, is this server (host:port compared). A browser
        always sends Origin on a WebSocket and on a cross-site write; a request without one
        comes from a non-browser client (a script, the benchmark), which the token covers."""
        origin = headers.get("origin")
        if origin is None:
            return True
        parts = urlsplit(origin)
        return bool(parts.netloc) and parts.netloc.lower() == headers.get("host", "").lower()


def _hostname(host_header: str) -> str | None:
    if not host_header:
        return None
    if host_header.startswith("["):
        end = host_header.find("]")
        return host_header[1:end] if end > 0 else None
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header

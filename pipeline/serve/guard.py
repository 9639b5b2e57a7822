"""What keeps `soul serve` safe by default: where it may listen, who may talk to it.

- It binds 127.0.0.1 unless told otherwise; any other host needs `SOUL_SERVE_TOKEN`, and the
  server refuses to start without it (`check_bind`).
- With a token set (always off-localhost, optionally on it), every API request and WebSocket
  must carry it: `Authorization: Bearer TOKEN`, or `?token=TOKEN` (a browser cannot set a
  WebSocket's headers). The page itself and its static files need none; they hold nothing.
- A token must resist guessing (`check_token`): at least 16 URL-safe characters, not a few
  characters repeated, about 64 bits or more by the characters it uses. It is compared in
  constant time (the digests of both, so not even its length shows), and an address that
  keeps sending wrong ones is locked out for a time that doubles with each failure past the
  first few (`Lockout`: 429 with Retry-After, at most five minutes; the right token waits too).
- On localhost, the Host header must name a loopback host: a page from elsewhere that rebinds
  its DNS name to 127.0.0.1 gets refused (DNS rebinding).
- A WebSocket's Origin, and a state-changing request's Origin when a browser sends one, must
  be the server's own: another site's page cannot drive a session in the user's browser.
  Writes also need `Content-Type: application/json`, which a cross-site form cannot send.
- Bodies and messages have size limits with a clear error (`MAX_BODY_BYTES`, `MAX_MESSAGE_CHARS`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from soul.errors import ServeError

TOKEN_ENV = "SOUL_SERVE_TOKEN"
MAX_BODY_BYTES = 256 * 1024  # a request body (JSON around a message)
MAX_MESSAGE_CHARS = 32 * 1024  # one user message
MAX_SOCKET_BYTES = 1 << 20  # one WebSocket frame (uvicorn refuses larger ones itself)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
MIN_TOKEN_CHARS = 16
MIN_TOKEN_BITS = 64
FREE_FAILURES = 5  # wrong tokens an address may send before it is slowed down
MAX_LOCKOUT_SECONDS = 300.0
MAKE_TOKEN = ("export SOUL_SERVE_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
_URL_SAFE = re.compile(r"[A-Za-z0-9._~-]+")


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
            f"long random value first (e.g. `{MAKE_TOKEN}`), or serve on 127.0.0.1"
        )


def check_token(token: str) -> None:
    """Refuse a token a guesser could find (`ServeError` saying why and how to make one; the
    token itself is never shown): at least MIN_TOKEN_CHARS URL-safe characters (it travels in
    `?token=`), at least 5 different ones, and about MIN_TOKEN_BITS bits by the kinds of
    characters it uses (a check of length and variety: a generated token passes it)."""
    why = None
    if len(token) < MIN_TOKEN_CHARS:
        why = f"it has {len(token)} characters; use at least {MIN_TOKEN_CHARS}"
    elif not _URL_SAFE.fullmatch(token):
        why = "use only letters, digits and - _ . ~ (it travels in URLs and headers; no spaces)"
    elif len(set(token)) < 5:
        why = "it repeats a few characters"
    elif _token_bits(token) < MIN_TOKEN_BITS:
        why = f"it is too plain for its length (under {MIN_TOKEN_BITS} bits: mix letters, digits and cases, or make it longer)"
    if why is not None:
        raise ServeError(f"{TOKEN_ENV} is too easy to guess: {why}. Make a random one: `{MAKE_TOKEN}`")


def _token_bits(token: str) -> float:
    alphabet = sum(size for kind, size in ((str.islower, 26), (str.isupper, 26), (str.isdigit, 10))
                   if any(kind(ch) for ch in token))
    alphabet += 4 if any(ch in "._~-" for ch in token) else 0
    return len(token) * math.log2(max(alphabet, 2))


@dataclass(frozen=True)
class Guard:
    """The checks of one server: its host and its token (None: no token asked)."""

    host: str
    token: str | None

    def __post_init__(self) -> None:
        if self.token is not None:
            check_token(self.token)

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
        # Digests of both: equal lengths, so the comparison shows not even the token's length.
        return hmac.compare_digest(_digest(given), _digest(self.token))

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


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class Lockout:
    """Wrong tokens per client address: after FREE_FAILURES, each further failure locks the
    address out for twice as long as the last (1 s, 2 s, 4 s, ... at most MAX_LOCKOUT_SECONDS);
    a right token clears the count; an address quiet for an hour is forgotten. It remembers at
    most `addresses` addresses, forgetting the least recently failed first."""

    FORGET_SECONDS = 3600.0

    def __init__(self, clock: Callable[[], float] = time.monotonic, addresses: int = 10_000) -> None:
        self.clock = clock
        self.addresses = addresses
        self._seen: OrderedDict[str, tuple[int, float, float]] = OrderedDict()  # failures, last, locked until

    def __len__(self) -> int:
        return len(self._seen)

    def wait(self, address: str) -> float:
        """Seconds `address` must still wait (0: it may try)."""
        entry = self._seen.get(address)
        if entry is None:
            return 0.0
        now = self.clock()
        if now - entry[1] > self.FORGET_SECONDS:
            del self._seen[address]
            return 0.0
        return max(0.0, entry[2] - now)

    def failed(self, address: str) -> None:
        now = self.clock()
        count, last, _ = self._seen.pop(address, (0, now, 0.0))
        if now - last > self.FORGET_SECONDS:
            count = 0
        count += 1
        lock = min(2.0 ** (count - FREE_FAILURES - 1), MAX_LOCKOUT_SECONDS) if count > FREE_FAILURES else 0.0
        self._seen[address] = (count, now, now + lock)
        while len(self._seen) > self.addresses:
            self._seen.popitem(last=False)

    def succeeded(self, address: str) -> None:
        self._seen.pop(address, None)


def _hostname(host_header: str) -> str | None:
    if not host_header:
        return None
    if host_header.startswith("["):
        end = host_header.find("]")
        return host_header[1:end] if end > 0 else None
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header

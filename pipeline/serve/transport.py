"""The connections under the app: a request's headers must arrive in time, and the server holds
a bounded number of connections, WebSockets included (uvicorn's h11 protocol, extended).

uvicorn times out an idle keep-alive connection, but a connection that sends nothing, or half
a request line and then a byte now and then, it holds forever, before any token check. Here
the headers of every request must be complete within `header_seconds` of its first byte (of
the connection, for the first): otherwise the server answers 408 and closes. Past
`limit_concurrency` open connections a request is answered 503 by uvicorn; a WebSocket
upgrade, which uvicorn lets through, is answered 503 too. Headers beyond h11's 16 KiB limit
are uvicorn's 400.

`uvicorn_config(app, host, port, ...)` is the configuration `soul serve` runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_SECONDS = 10.0  # a request's headers, from its first byte
KEEP_ALIVE_SECONDS = 5.0  # an idle connection between requests (uvicorn's default)
MAX_CONNECTIONS = 1000  # open connections, sockets included (`soul serve --max-connections`)
_SAID = b"the request's headers did not arrive in time\n"
_TIMEOUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(_SAID), _SAID))


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's headers and the connection
    bound applied to WebSocket upgrades too."""

    header_seconds = HEADER_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()  # a request begun, its headers not complete: the clock runs from its first byte
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _should_upgrade(self) -> bool:
        if self.limit_concurrency is not None and len(self.connections) >= self.limit_concurrency:
            return False  # answered 503 below, like any request past the bound
        return bool(super()._should_upgrade())

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.header_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.write(_TIMEOUT)
            self.transport.close()


def guarded_http(header_seconds: float = HEADER_SECONDS) -> type[GuardedH11]:
    """The protocol class with its own header deadline (tests use a short one)."""
    return type("GuardedH11", (GuardedH11,), {"header_seconds": header_seconds})


def uvicorn_config(app: Any, host: str, port: int, *, max_size: int, max_connections: int = MAX_CONNECTIONS,
                   header_seconds: float = HEADER_SECONDS, log_level: str = "warning") -> Any:
    """The uvicorn configuration of `soul serve`: the guarded protocol, the connection bound,
    the WebSocket frame limit, keep-alive timeout, lifespan on."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                          http=guarded_http(header_seconds), ws_max_size=max_size,
                          limit_concurrency=max_connections, timeout_keep_alive=KEEP_ALIVE_SECONDS)

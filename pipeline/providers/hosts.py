"""Where the user's keys may go: the provider's own host, or a host the user allowed.

A model slot's `base_url` is chosen by whoever wrote the blueprint. A key is sent there only
when the host is the provider's own (`soul.credentials.is_own_host`) or the user allowed it,
in one of three places none of which a blueprint can write:

- `SOUL_ALLOW_HOSTS`: hosts separated by commas or spaces;
- `--allow-host HOST` on `soul run`, `soul dialogue`, `soul serve` and `soul worker`
  (`allow_hosts`, for the process);
- the file `allowed-hosts` in the data home (`$SOUL_HOME`, default `~/.soul`): one host a line,
  `#` comments.

An entry is `host` (any port), `host:port`, `[::1]:port` or a URL (`http://host:port/v1`: its
host and port). Loopback hosts are no exception: another user's server on 127.0.0.1 may be
listening. A host that is not allowed is still called — without a key (`route_key`): local
servers (llama.cpp, Ollama, LM Studio, vLLM) need none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from soul.credentials import allow_list_entries, allow_list_file, host_label, is_own_host
from soul.errors import ProviderError

ALLOW_ENV = "SOUL_ALLOW_HOSTS"
ALLOW_FILE = "allowed-hosts"

_allowed_here: set[str] = set()  # --allow-host, for this process


@dataclass(frozen=True)
class Host:
    """An allow-list entry: a host name (lowercase; IPv6 in brackets) and maybe a port."""

    name: str
    port: int | None = None

    def covers(self, base_url: str) -> bool:
        label = host_label(base_url)
        if not label:
            return False
        name, port = _split(label)
        return name == self.name and (self.port is None or self.port == (port or _default_port(base_url)))


def parse_host(entry: str) -> Host:
    """An allow-list entry as a Host; ProviderError saying how to write one if it is not."""
    text = entry.strip()
    label = host_label(text) if "://" in text else host_label(f"http://{text}")
    if not label or any(c in text for c in "@ \t"):
        raise ProviderError(f"{entry!r} is not a host to allow: write host, host:port or a URL (api.example.com, 127.0.0.1:8080)")
    name, port = _split(label)
    return Host(name, port)


def allow_hosts(entries: Iterable[str]) -> None:
    """Allow these hosts for the rest of the process (`--allow-host`)."""
    hosts = [parse_host(e) for e in entries]
    _allowed_here.update(f"{h.name}:{h.port}" if h.port is not None else h.name for h in hosts)


def forget_allowed_hosts() -> None:
    """Drop what `allow_hosts` allowed (tests; an embedder switching users)."""
    _allowed_here.clear()


def allow_file() -> Path:
    """The data home's allow-list (not created)."""
    return allow_list_file(ALLOW_FILE)


def allowed_hosts() -> list[Host]:
    """Every host the user allowed: the variable, the flag, the file (bad entries skipped:
    a typo allows nothing)."""
    entries = [*re.split(r"[,\s]+", os.environ.get(ALLOW_ENV, "")), *_allowed_here]
    entries += allow_list_entries(ALLOW_FILE)
    hosts = []
    for entry in entries:
        if entry.strip():
            try:
                hosts.append(parse_host(entry))
            except ProviderError:
                continue
    return hosts


def may_receive_key(family: str, base_url: str) -> bool:
    """Whether a key for `family` may be sent to `base_url`."""
    return is_own_host(family, base_url) or any(h.covers(base_url) for h in allowed_hosts())


def how_to_allow(base_url: str) -> str:
    """The three ways to allow `base_url`'s host, for messages."""
    label = host_label(base_url) or base_url
    return (f"{ALLOW_ENV}={label}, `--allow-host {label}` (soul run, dialogue, serve, worker), "
            f"or a line `{label}` in {allow_file()}")


def _split(label: str) -> tuple[str, int | None]:
    if label.startswith("["):
        name, _, rest = label.partition("]")
        return name + "]", int(rest[1:]) if rest.startswith(":") else None
    name, _, port = label.partition(":")
    return name, int(port) if port else None


def _default_port(base_url: str) -> int | None:
    scheme = urlsplit(base_url.strip()).scheme
    return {"http": 80, "https": 443}.get(scheme)

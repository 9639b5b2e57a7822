"""Where a PostgreSQL store is (a libpq connection string), shown without its password.

libpq takes a store's place in two forms, with a password in any of these spots:

- a URL, `postgresql://USER:PASSWORD@HOST…` (or `postgres://`), the password ending at the
  first `@` or `/` and percent-encoded; and its query, `?password=…` or `?sslpassword=…`
  (keys and values percent-encoded, so `?pass%77ord=…` is a password too);
- `key=value` pairs separated by spaces, `password=…` or `sslpassword=…`, with spaces allowed
  around `=`, a value either quoted with `'` (a backslash escapes `'` and `\\`) or running
  to the next space (a backslash escapes any character).

`mask_passwords(text, locator)` is the one function every message that can carry a store's place goes
through (the store's errors and their causes, the commit listener's log): each password spot
in `text` becomes `***`, and, given the locator, the values of its passwords are blanked
wherever they stand alone, since libpq quotes a bad percent-encoded token without its key.
`passwords(locator)` lists those values (raw and decoded), which the store also hands to the
redaction (`redaction.remember`) so a traceback printed by `--debug` never shows them.
Both are one regex pass over their input.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["MASK", "mask_passwords", "passwords"]

MASK = "***"
_SECRET_KEYS = ("password", "sslpassword")
_MIN_BLANKED = 3  # a shorter password blanked alone would garble the message around it
# A URL runs to a space or a quote (messages quote it); a key=value password to its value's end.
_SPOTS = re.compile(
    r"(?P<url>\bpostgres(?:ql)?://[^\s'\"<>]*)"
    r"|(?P<key>(?<![\w%])(?:ssl)?password\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)*)",
    re.IGNORECASE | re.DOTALL,
)
_USERINFO = re.compile(r"^([^:@/]*):([^@/]*)@")
_QUERY_PAIR = re.compile(r"([?&])([^=&#?]*)=([^&#]*)")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def mask_passwords(text: str, locator: str | None = None) -> str:
    """`text` with every password of a store locator in it replaced by `***` (see the module
    doc); with `locator`, its passwords' values are blanked wherever they appear."""
    out = _SPOTS.sub(_mask_spot, text)
    if locator:
        for value in sorted(set(passwords(locator)), key=len, reverse=True):
            if len(value) >= _MIN_BLANKED and value != MASK:
                out = out.replace(value, MASK)
    return out


def passwords(locator: str) -> list[str]:
    """The password values `locator` carries, as written and as libpq reads them."""
    found: list[str] = []
    for spot in _SPOTS.finditer(locator):
        if spot.group("url") is not None:
            url = spot.group("url")
            rest = url.split("://", 1)[1]
            userinfo = _USERINFO.match(rest)
            if userinfo is not None:
                found += [userinfo.group(2), unquote(userinfo.group(2))]
            query = url.find("?")
            for pair in _QUERY_PAIR.finditer(url, query if query >= 0 else len(url)):
                if unquote(pair.group(2)).strip().lower() in _SECRET_KEYS:
                    found += [pair.group(3), unquote(pair.group(3))]
        else:
            value = spot.group("value")
            inner = value[1:-1] if len(value) > 1 and value[0] == value[-1] == "'" else value.lstrip("'")
            found += [value, inner, _ESCAPE.sub(r"\1", inner)]
    return [v for v in found if v]


def _mask_spot(spot: re.Match[str]) -> str:
    url = spot.group("url")
    if url is None:
        return f"{spot.group('key').rstrip()}{MASK}" if spot.group("value") else spot.group(0)
    scheme, rest = url.split("://", 1)
    rest = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", rest, count=1)
    query = rest.find("?")
    if query >= 0:
        rest = rest[:query] + _QUERY_PAIR.sub(_mask_pair, rest[query:])
    return f"{scheme}://{rest}"


def _mask_pair(pair: re.Match[str]) -> str:
    if unquote(pair.group(2)).strip().lower() in _SECRET_KEYS:
        return f"{pair.group(1)}{pair.group(2)}={MASK}"
    return pair.group(0)

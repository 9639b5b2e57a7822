"""Lone surrogates: text Python holds but UTF-8 cannot encode, made storable at the turn's edge.

A `str` may hold lone surrogates (U+D800–U+DFFF): `surrogateescape` decoding of invalid UTF-8
(a terminal or a file in another encoding), `\\ud83d` typed as an escape, a model or SDK that
split a pair. SQLite, the JSONL logs and a UTF-8 terminal all refuse them, so such text would
fail the commit after the reply was shown. The policy, applied to the user's message before
the turn starts and to every model reply as it arrives: each lone surrogate becomes U+FFFD
(the replacement character). The rest of the text is kept as written.
"""

from __future__ import annotations

import re

__all__ = ["REPLACEMENT", "replace_lone_surrogates"]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD; the same object when it has none."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(REPLACEMENT, text)
    return text

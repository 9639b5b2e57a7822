"""Keeping secret values out of everything soul writes: the store, its logs, outputs, errors.

The store redacts every text and JSON field of a commit before its transaction (so the JSONL
mirror, written from the same data, is clean too); providers redact their error messages and
cassettes; the CLI redacts what it prints. One list of secrets serves them all: values a
provider registered (`remember`, when it found its key), values of environment variables
whose names look secret (`ANTHROPIC_API_KEY`, `*_TOKEN`, ...), the passwords in `SOUL_STORE`
(`conninfo.passwords`), and strings shaped like common API keys and private keys
(`key_shapes`). It lives in the store because the store is the earliest stage every writer
may use.

A secret's every occurrence is blanked, overlapping ones as one `[redacted]`, so no part of
one key survives next to another. Streamed text (a reply shown as the model writes it) goes
through a `StreamRedactor`, which gives the same text as `redact` on the whole, however the
stream was cut, holding back only a tail that could still begin a secret or a key shape.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from soul.records import Commit
from soul.store.conninfo import passwords
from soul.store.key_shapes import REDACTED, ShapeStream, may_hold_key, substitute

_SECRET_NAME = re.compile(r"(API_KEY|_KEY$|TOKEN|SECRET|PASSWORD)")
_MIN_SECRET = 8  # shorter env values ("1", "true") are not secrets and would blank ordinary words

_known: set[str] = set()
_lock = threading.Lock()
# `secrets()` runs once per text written (a server: once per event sent), and reading the
# environment through `os.environ` decodes every variable each time: the list is kept, and
# made again only when the environment's raw table or `_known` changed since.
_cached: tuple[dict[bytes, bytes] | None, int, list[str]] = (None, -1, [])
_version = 0  # bumped by `remember`


def remember(secret: str | None) -> None:
    """Blank this value from now on wherever soul writes text."""
    global _version
    if secret and len(secret) >= _MIN_SECRET:
        with _lock:
            if secret not in _known:
                _known.add(secret)
                _version += 1


def secrets() -> list[str]:
    """The secret values known now, longest first (so a key's prefix never leaks)."""
    global _cached
    raw = getattr(os.environ, "_data", None)  # the environment as os.environ keeps it
    seen, version, found = _cached
    if raw is not None and version == _version and seen == raw:
        return list(found)
    with _lock:
        version = _version
        names = {v for k, v in os.environ.items() if _SECRET_NAME.search(k.upper()) and len(v) >= _MIN_SECRET}
        names.update(p for p in passwords(os.environ.get("SOUL_STORE", "")) if len(p) >= _MIN_SECRET)
        ordered = sorted(names | _known, key=len, reverse=True)
    if raw is not None:
        _cached = (dict(raw), version, ordered)
    return list(ordered)


def redact(text: str, known: list[str] | None = None) -> str:
    """`text` with every known secret and key-shaped string replaced by `[redacted]`.

    `known` is a list from `secrets()`, to reuse it across many strings.
    """
    if not text:
        return text
    return substitute(_blank_secrets(text, secrets() if known is None else known))


def _blank_secrets(text: str, known: Sequence[str]) -> str:
    """`text` with every occurrence of every secret blanked; occurrences that overlap (one key
    inside or across another) make one run, so no part of either is left."""
    spans: list[tuple[int, int]] = []
    for secret in known:
        at = text.find(secret) if secret else -1
        while at >= 0:
            spans.append((at, at + len(secret)))
            at = text.find(secret, at + 1)
    if not spans:
        return text
    spans.sort()
    parts: list[str] = []
    done = 0
    start, end = spans[0]
    for a, e in spans[1:]:
        if a < end:
            end = max(end, e)
        else:
            parts += (text[done:start], REDACTED)
            done, start, end = end, a, e
    parts += (text[done:start], REDACTED, text[end:])
    return "".join(parts)


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


def could_hold_secrets(texts: Iterable[str], known: Sequence[str], *, json_texts: Iterable[str] = ()) -> bool:
    """Whether `redact` could change any of `texts` or of the data `json_texts` encode (JSON
    from `json.dumps(..., ensure_ascii=False)`): a quick test, one substring search per secret
    and key shape, that lets a writer skip redacting what holds nothing to redact. True for
    JSON whenever a secret holds a character JSON escapes (`"`, `\\`, a control character):
    such a secret need not appear in the JSON as it is, so only `redact_data` can tell.

    The texts are searched as one, joined by newlines: a key shape's opener or a secret in any
    of them is in the whole (no opener holds a newline, so the joins add none; a secret that
    does may match across two texts, and the answer is a redaction that finds nothing)."""
    json_texts = list(json_texts)
    if json_texts and any(_JSON_ESCAPED.search(secret) for secret in known):
        return True
    whole = "\n".join([*texts, *json_texts])
    return bool(whole) and _might_hold(whole, known)


_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _might_hold(text: str, known: Sequence[str]) -> bool:
    if may_hold_key(text):  # every key shape holds one of its openers
        return True
    return any(secret and secret in text for secret in known)


def redact_commit(commit: Commit, known: list[str] | None = None) -> Commit:
    """`commit` with every text and JSON field redacted: messages, state, user model, working
    memory, Chetana state, trace, mood and criteria, summaries, and the items for the memory
    field. Identifiers (session id, kind, tags, process, a summary's layer) are kept. `known`:
    a list from `secrets()`."""
    known = secrets() if known is None else known

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
        trace=data(commit.trace if type(commit.trace) is dict else commit.trace.to_dict()),
        mood=(
            replace(commit.mood, mood=text(commit.mood.mood), criteria=text(commit.mood.criteria))
            if commit.mood is not None
            else None
        ),
        summaries=tuple(replace(s, summary=text(s.summary)) for s in commit.summaries),
        remember=tuple(data(item) for item in commit.remember) if commit.remember is not None else None,
    )


class StreamRedactor:
    """`redact` for text that arrives in pieces: `feed` each piece, `flush` at the end.

    The pieces it returns, joined with `flush()`, equal `redact` of the whole text, however the
    text was cut. It holds back only a tail that could still become a secret (at most the
    longest secret's length less one) and, before that, one that could still become a key shape
    (from a place one could open, `key_shapes.ShapeStream`: a few characters for most shapes,
    at most a JWT's two first parts); with no secrets, text that could not open a key shape
    passes at once, unchanged.
    Linear in the text. One per stream: a secret is matched across the pieces of one stream,
    never across two.
    """

    def __init__(self, known: Sequence[str] | None = None) -> None:
        known = secrets() if known is None else known
        self._secrets = _SecretStream([s for s in known if s]) if any(known) else None
        self._shapes = ShapeStream()

    def feed(self, text: str) -> str:
        """What of the text so far can be shown now, redacted."""
        if self._secrets is not None:
            text = self._secrets.feed(text)
        return self._shapes.feed(text)

    def flush(self) -> str:
        """The rest, redacted, at the end of the stream; the redactor starts afresh after."""
        tail = self._secrets.flush() if self._secrets is not None else ""
        return self._shapes.feed(tail) + self._shapes.flush()


class _SecretStream:
    """`_blank_secrets` over a stream: an Aho-Corasick automaton of the secrets.

    The state is the longest suffix of the text that is a prefix of a secret; every occurrence
    still to come starts inside the deepest such suffix that can still grow (`_live`), so all
    text before it is decided: kept, or blanked as part of a run of occurrences. A run that
    started before it is announced (`[redacted]`) at once and swallows what later overlaps it.
    """

    def __init__(self, known: Sequence[str]) -> None:
        goto: list[dict[str, int]] = [{}]
        depth = [0]
        ends = [0]  # length of the longest secret ending at this state
        for secret in known:
            node = 0
            for ch in secret:
                nxt = goto[node].get(ch)
                if nxt is None:
                    nxt = goto[node][ch] = len(goto)
                    goto.append({})
                    depth.append(depth[node] + 1)
                    ends.append(0)
                node = nxt
            ends[node] = len(secret)
        fail = [0] * len(goto)
        live = [0] * len(goto)  # depth of the deepest suffix state that can still grow
        order = deque(goto[0].values())
        while order:  # breadth first, so a state's fail state is complete before it is used
            node = order.popleft()
            ends[node] = max(ends[node], ends[fail[node]])
            live[node] = depth[node] if goto[node] else live[fail[node]]
            for ch, child in goto[node].items():
                back = fail[node]
                while back and ch not in goto[back]:
                    back = fail[back]
                fail[child] = goto[back].get(ch, 0) if node else 0
                order.append(child)
        self._goto, self._fail, self._ends, self._live = goto, fail, ends, live
        self._reset()

    def _reset(self) -> None:
        self._node = 0
        self._pos = 0  # characters fed
        self._out = 0  # text before this position is decided and given out
        self._buf = ""  # the text from `_out` on
        self._runs: deque[tuple[int, int]] = deque()  # blanked runs not yet passed, in order
        self._announced = False  # whether the first run's `[redacted]` was given out

    def feed(self, text: str) -> str:
        goto, fail, ends, runs = self._goto, self._fail, self._ends, self._runs
        node, pos = self._node, self._pos
        for ch in text:
            while node and ch not in goto[node]:
                node = fail[node]
            node = goto[node].get(ch, 0)
            pos += 1
            if ends[node]:
                start = pos - ends[node]
                while runs and runs[-1][1] > start:  # overlaps runs found before: one run
                    start = min(start, runs.pop()[0])
                runs.append((start, pos))
        self._node, self._pos = node, pos
        self._buf += text
        return self._emit(pos - self._live[node])

    def flush(self) -> str:
        tail = self._emit(self._pos)
        self._reset()
        return tail

    def _emit(self, decided: int) -> str:
        """Give out the text before `decided`; what a run blanks is given as one `[redacted]`."""
        buf, out, runs = self._buf, self._out, self._runs
        base = out
        parts: list[str] = []
        while runs and runs[0][0] < decided:
            start, end = runs[0]
            if not self._announced:
                parts += (buf[out - base : start - base], REDACTED)
                self._announced = True
            out = max(out, end)
            if end > decided:  # an occurrence still to come may overlap it
                break
            runs.popleft()
            self._announced = False
        if out < decided:
            parts.append(buf[out - base : decided - base])
            out = decided
        self._buf, self._out = buf[out - base :], out
        return "".join(parts)

"""Strings shaped like common API keys and private keys, found in whole text and in a stream.

Each shape is data (`Shape`): a guard on the character before it, its parts in order
(literals, and runs of a character class with a least and a most length), and how it ends.
From that one list come the regex `redact` substitutes (`KEY_SHAPES`), the regex that tells
whether the tail of a stream could still grow into a shape, and what a stream swallows once a
shape is certain, so the whole-text and the streamed redaction cannot drift apart.

The shapes: OpenAI and Anthropic keys (`sk-…`, `sk-ant-…`, `sk-proj-…`, `sk-svcacct-…`), AWS
access key ids (`AKIA…`), Slack tokens (`xoxb-`, `xoxa-`, `xoxp-`, `xoxo-`, `xoxs-`, `xoxr-`,
`xapp-`), GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), Google API
keys (`AIza…`), Stripe secret and restricted keys (`sk_live_`, `rk_live_`, `sk_test_`,
`rk_test_`), JSON Web Tokens (`eyJ….eyJ….signature`) and PEM private-key blocks (`-----BEGIN
… PRIVATE KEY-----` to its `-----END … PRIVATE KEY-----`, or to the end of the text when the
end line is missing: a cut key is still a key).

Every scan is linear in the text: a run is matched possessively where its class cannot hold
what follows it, the one backtracking run is at most 40 characters, a JWT may start only
where a run of its characters starts (so a hostile `eyJ-eyJ-…` is tried once), a PEM block's
body is scanned once to its end line, and a stream re-reads at most a bounded tail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KEY_SHAPES", "REDACTED", "SHAPES", "Run", "Shape", "ShapeStream", "may_hold_key", "substitute"]

REDACTED = "[redacted]"


@dataclass(frozen=True)
class Run:
    """A run of `chars` (a regex class body), `least` to `most` long (None: no limit)."""

    chars: str
    least: int
    most: int | None
    possessive: bool = True  # False only where the class can hold what follows the run


Part = str | tuple[str, ...] | Run  # a literal, one of several literals, or a run


@dataclass(frozen=True)
class Shape:
    """A key's shape: `guard` (a lookbehind, or "" for none) and its parts; `until`, a regex
    ending a block (the key is the text from the parts to it, or to the end of the text)."""

    name: str
    guard: str
    parts: tuple[Part, ...]
    until: str | None = None

    @property
    def open_run(self) -> str | None:
        """The class of a last run with no limit (a stream swallows it once the key is certain)."""
        last = self.parts[-1]
        return last.chars if isinstance(last, Run) and last.most is None and self.until is None else None

    def pattern(self) -> str:
        body = "".join(_part(p) for p in self.parts)
        if self.until is not None:  # named parts: where the head ends, whether the end line came
            return f"{self.guard}(?P<{self.name}>(?P<{self.name}_head>{body})(?s:.*?)(?:(?P<{self.name}_end>{self.until})|\\Z))"
        return f"{self.guard}(?P<{self.name}>{body})"

    def partial(self) -> str:
        """A regex whose full matches are the texts that could still grow into this shape."""
        options = []
        for i, part in enumerate(self.parts):
            done = "".join(_part(p) for p in self.parts[:i])
            if isinstance(part, Run):
                if part.most is None and i == len(self.parts) - 1 and self.until is None:
                    if part.least == 0:
                        continue  # the shape is whole without it
                    most = str(part.least - 1)  # once `least` came, the key is certain
                else:
                    most = "" if part.most is None else str(part.most)
                options.append(f"{done}[{part.chars}]{{0,{most}}}")
            else:
                words = (part,) if isinstance(part, str) else part
                options += [done + _growing(w) for w in words]
        return f"{self.guard}(?:{'|'.join(options)})"


def _growing(word: str) -> str:
    """A regex of the proper prefixes of `word` (the empty one included)."""
    return "".join(f"(?:{re.escape(ch)}" for ch in word[:-1]) + ")?" * (len(word) - 1)


def _part(part: Part) -> str:
    if isinstance(part, str):
        return re.escape(part)
    if isinstance(part, tuple):
        return f"(?:{'|'.join(re.escape(w) for w in part)})"
    most = "" if part.most is None else str(part.most)
    if part.most == part.least:
        return f"[{part.chars}]{{{part.least}}}"
    return f"[{part.chars}]{{{part.least},{most}}}{'+' if part.possessive else ''}"


def _first_char(part: Part) -> str:
    if isinstance(part, Run):
        return f"[{part.chars}]"
    words = (part,) if isinstance(part, str) else part
    return "[" + "".join(sorted({re.escape(w[0]) for w in words})) + "]"


_WORD = r"\b"
_B64URL = r"A-Za-z0-9_\-"
_PEM_LABEL = (Run("A-Z0-9 ", 0, 40, possessive=False), "PRIVATE KEY", Run("A-Z ", 0, 10), "-----")
_PEM_END = "-----END [A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}+-----"
_PEM_END_MAX = len("-----END ") + 40 + len("PRIVATE KEY") + 10 + len("-----")  # the longest end line

SHAPES: tuple[Shape, ...] = (
    Shape("openai", _WORD, ("sk-", Run(_B64URL, 16, None))),  # sk-ant-, sk-proj-, sk-svcacct- too
    Shape("stripe", _WORD, (Run("rs", 1, 1), "k_", ("live", "test"), "_", Run("0-9A-Za-z", 16, None))),
    Shape("aws", _WORD, ("AKIA", Run("0-9A-Z", 16, 16))),
    Shape("google", _WORD, ("AIza", Run(_B64URL, 35, None))),
    Shape("slack", _WORD, ("xox", Run("abposr", 1, 1), "-", Run(r"A-Za-z0-9\-", 10, None))),
    Shape("slack_app", _WORD, ("xapp-", Run(r"A-Za-z0-9\-", 10, None))),
    Shape("github", _WORD, ("gh", Run("pousr", 1, 1), "_", Run("A-Za-z0-9", 30, None))),
    Shape("github_pat", _WORD, ("github_pat_", Run("A-Za-z0-9_", 22, None))),
    Shape("jwt", r"(?<![A-Za-z0-9_\-.])",
          ("eyJ", Run(_B64URL, 8, 1000), ".eyJ", Run(_B64URL, 8, 10_000), ".", Run(_B64URL, 0, None))),
    Shape("pem", "", ("-----BEGIN ", *_PEM_LABEL), until=_PEM_END),
)

KEY_SHAPES = re.compile("|".join(s.pattern() for s in SHAPES))
# A place a shape could start: its guard, and its first character.
_STARTS = re.compile("|".join(f"{s.guard}(?={_first_char(s.parts[0])})" for s in SHAPES))
_PARTIAL = re.compile("|".join(f"(?:{s.partial()})" for s in SHAPES))
_SHAPE = {s.name: s for s in SHAPES}
_PEM_END_RE = re.compile(_PEM_END)


# The openers for a long text, as patterns that each start with one character the regex
# engine skips ahead to, rare in prose and JSON (-, x, A, J, g, _), the letters before it
# checked behind: six passes at ~5 us each over a commit's 16 KB, where the in-chain took ten
# to fifteen (two for Stripe; five more for GitHub whenever "gh" occurs, as in "thought").
# Searching a text for one character is ~20x faster than a pass: a pattern whose first
# character the text lacks is not run (a commit's JSON rarely holds a "J").
_LONG_OPENERS = tuple(re.compile(p) for p in (
    r"-(?:(?<=sk-)|(?<=xapp-)|----BEGIN )",  # sk-, xapp-, -----BEGIN
    r"x(?=ox)",  # a lookahead: the scan then skips to each "x" alone (twice as fast as "xox")
    r"A(?:KIA|Iza)",
    r"J(?<=eyJ)",
    r"g(?:h[pousr]_|ithub_pat_)",
    r"_(?<=k_)(?:live|test)_",  # sk_live_, rk_test_, ...
))


def may_hold_key(text: str) -> bool:
    """Whether `text` could hold a key shape (False: `KEY_SHAPES` finds nothing in it). Every
    shape holds one of these openers; most texts hold none and skip the scan (one `in` each is
    the fastest test for short texts, the streamed tokens; long ones, `_LONG_OPENERS`)."""
    if len(text) > 256:  # a pattern only where its first character occurs (`in`: ~0.2 us)
        return any(
            opener.pattern[0] in text and opener.search(text) is not None for opener in _LONG_OPENERS
        )
    return (
        "sk-" in text or "k_live_" in text or "k_test_" in text or "AKIA" in text or "AIza" in text
        or "xox" in text or "xapp-" in text or "eyJ" in text or "-----BEGIN " in text
        or "github_pat_" in text
        or ("gh" in text and ("ghp_" in text or "gho_" in text or "ghu_" in text or "ghs_" in text
                              or "ghr_" in text))
    )


def substitute(text: str) -> str:
    """`text` with every key shape replaced by `[redacted]` (what `redact` applies)."""
    return KEY_SHAPES.sub(REDACTED, text) if may_hold_key(text) else text


class ShapeStream:
    """`substitute` over a stream, scanning as the regex does: each place a shape could start
    is tried in order; the scan stops at the first whose outcome the text seen so far cannot
    decide, and what follows it waits. A key certain but not yet ended (an open run, a PEM
    block without its end line yet) is swallowed as it arrives."""

    def __init__(self) -> None:
        self._before = ""  # the character before `_held` (for the guards), "" at the start
        self._held = ""
        self._swallow: re.Pattern[str] | None = None  # the run of a certain, open-ended key
        self._pem_tail: str | None = None  # in a PEM block: its last characters, for the end line

    def feed(self, text: str) -> str:
        if not text:
            return ""
        if self._pem_tail is not None:
            text = self._in_pem(text)
            if not text:
                return ""
        if self._swallow is not None:
            end = self._swallow.match(text).end()  # type: ignore[union-attr]  # `*` always matches
            if end:
                self._before = text[end - 1]
            if end == len(text):
                return ""
            text, self._swallow = text[end:], None
        buf = self._before + self._held + text
        at = done = len(self._before)
        parts: list[str] = []
        while (start := _STARTS.search(buf, at)) is not None:
            at = start.start()
            shape = KEY_SHAPES.match(buf, at)
            if shape is not None:
                parts += (buf[done:at], REDACTED)
                done = at = shape.end()
                found = _SHAPE[shape.lastgroup or ""]
                if found.until is not None and shape.group(f"{found.name}_end") is None:
                    # a PEM block whose end line has not come (yet): all that follows is the key
                    self._before, self._held = "", ""
                    self._pem_tail = buf[shape.end(f"{found.name}_head"):][-_PEM_END_MAX:]
                    return "".join(parts)
                if at == len(buf) and found.open_run is not None:  # the run may go on
                    self._swallow = re.compile(f"[{found.open_run}]*")
                    break
            elif _PARTIAL.fullmatch(buf, at):  # may still become a key: wait for more
                parts.append(buf[done:at])
                self._before, self._held = buf[at - 1 : at], buf[at:]
                return "".join(parts)
            else:
                at += 1
        parts.append(buf[done:])
        self._before, self._held = buf[-1:], ""
        return "".join(parts)

    def _in_pem(self, text: str) -> str:
        """Swallow a PEM block's text up to its end line; what follows it, or "" (all swallowed)."""
        tail = self._pem_tail or ""
        seen = tail + text
        end = _PEM_END_RE.search(seen)
        if end is None:
            self._pem_tail = seen[-_PEM_END_MAX:]
            return ""
        self._pem_tail = None
        self._before = seen[end.end() - 1]
        return seen[end.end():]

    def flush(self) -> str:
        if self._pem_tail is not None:  # the block ran to the end: all of it was the key
            self._before, self._held, self._swallow, self._pem_tail = "", "", None, None
            return ""
        buf, start = self._before + self._held, len(self._before)
        self._before, self._held, self._swallow = "", "", None
        parts: list[str] = []
        done = start
        for shape in KEY_SHAPES.finditer(buf, start):
            parts += (buf[done : shape.start()], REDACTED)
            done = shape.end()
        parts.append(buf[done:])
        return "".join(parts)

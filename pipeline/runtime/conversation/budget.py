"""The token budget of one model call: counting tokens, and what a prompt may hold.

Every call has a window (its slot's context window, `soul.providers.context_window`) and a
reserve (the reply's max tokens). The prompt's fixed parts — persona, mood, soul state, user
model, steering, this turn so far, the response format and the current message — must fit
in `window - reserve`; what is left goes, in this order of priority, to the conversation
summary, to the most recent turns of the history (at most the call's declared `turns`,
within its `share` of what is left), and to working memory, region by region in the
blueprint's region order, newest entries first. Whatever does not fit is cut, oldest first,
and listed (`BudgetReport.cut`), so a call never exceeds its window; when even the fixed
parts do not fit, `BudgetExceeded` says which parts take how much and how to fix it.

Tokens are counted with the model's tokenizer where one is at hand (the bundled SmolLM2's,
for the default local model) and otherwise estimated, conservatively: every letter run of
ASCII (with the space before it) counts one token per 3 letters, rounded up; every digit,
symbol one token; a non-ASCII character one token per UTF-8 byte (a byte-level tokenizer's
worst case); any other whitespace run one token; then 10% more, plus `MESSAGE_OVERHEAD` per
message for the chat template. Real tokenizers give fewer (English prose: about one per 4
characters), so an estimate leaves the window a margin rather than overrunning it.
"""

from __future__ import annotations

import gzip
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from itertools import filterfalse
from typing import Any

from soul.errors import BudgetExceeded

MESSAGE_OVERHEAD = 8  # role markers and separators a chat template adds per message
SAFETY = 1.1  # the estimate's margin over what the rules below count
TOKENIZER = "SmolLM2 tokenizer (the bundled local model's)"
ESTIMATE = "estimate (conservative: see docs/conversation.md)"
# The pieces the rules count one token each: a letter run's 3-letter chunks (the first with
# the space or tab before it), a whitespace run, any other character; a match per token, so
# the count is `findall`'s length (no Python-level step per piece) but where a piece is not ASCII
_TOKENS = re.compile(r"[ \t]?[A-Za-z]{1,3}|\s+|.", re.DOTALL)
_SMOLLM2 = ("local", "local/smollm2", "local/smollm2-135m")


@cache
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    raw = files("soul.data").joinpath("smollm2-tokenizer.json.gz").read_bytes()
    return Tokenizer.from_str(gzip.decompress(raw).decode("utf-8"))


def count_tokens(text: str) -> int:
    """Tokens of `text` for the bundled local model (SmolLM2's tokenizer)."""
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def estimate(text: str) -> int:
    """A conservative token count of `text` (linear in its length; see the module's docstring)."""
    return math.ceil(pieces(text) * SAFETY)


def pieces(text: str) -> int:
    """What `estimate` counts before its margin. A sum over parts: where `text` splits after a
    character that is neither a letter nor whitespace (a piece of its own), the pieces of
    the two sides add up to the whole's (`Fitter.count` counts a working-memory line so)."""
    found = _TOKENS.findall(text)
    if text.isascii():
        return len(found)
    # byte-level tokenizers take at most one token per UTF-8 byte: an ASCII piece counts one,
    # another its bytes (told and joined by passes in C: a reply with one dash in it had a
    # Python step per piece, every turn it was in the history)
    wide = "".join(filterfalse(str.isascii, found))
    return sum(map(str.isascii, found)) + len(wide.encode("utf-8", "surrogatepass"))


def with_margin(counted: int) -> int:
    """`estimate`'s count of a text whose `pieces` are `counted`."""
    return math.ceil(counted * SAFETY)


@dataclass(frozen=True)
class Counter:
    """How a call's tokens are counted: `name` says with what (shown by `soul explain`)."""

    name: str
    exact: bool

    def count(self, text: str) -> int:
        if not text:
            return 0
        return count_tokens(text) if self.exact else estimate(text)

    def messages(self, contents: Sequence[str]) -> int:
        return sum(self.count(c) + MESSAGE_OVERHEAD for c in contents)


def counter_for(spec: str, provider: Any = None) -> Counter:
    """The tokenizer for the bundled SmolLM2 (a real local provider on it, or a dry run of a
    `local` slot); the conservative estimate for every other model."""
    local = spec in _SMOLLM2
    if local and (provider is None or getattr(provider, "name", None) == "local"):
        return Counter(TOKENIZER, True)
    return Counter(ESTIMATE, False)


@dataclass(frozen=True)
class Budget:
    """One call's limits: the window, the tokens kept for the reply, how tokens are counted,
    and what the call's steps declare they see of the history."""

    window: int
    reserve: int
    counter: Counter
    turns: int = 4
    share: float = 0.3

    @property
    def prompt(self) -> int:
        """The most tokens the prompt may take."""
        return self.window - self.reserve

    def fits(self, messages: Sequence[Any]) -> bool:
        """Whether `messages` (a re-ask's longer history) still leave the reply its reserve."""
        return self.counter.messages([m.content for m in messages]) <= self.prompt


@dataclass(slots=True)
class BudgetReport:
    """What a call's budget held: per part, its tokens; `cut`, what did not fit or was over
    a limit (oldest first), each `{"part", "what", "tokens", "why"}`."""

    window: int
    reserve: int
    counter: str
    fixed: int = 0
    used: int = 0
    parts: dict[str, int] = field(default_factory=dict)
    cut: list[dict[str, Any]] = field(default_factory=list)
    layout: dict[str, Any] | None = None  # where each part of the prompt lies (layout.py)

    def to_dict(self) -> dict[str, Any]:
        """As a trace keeps it (the report is done with once fitted: `parts` is shared, not copied)."""
        return {"window": self.window, "reserve": self.reserve, "counter": self.counter,
                "fixed": self.fixed, "used": self.used, "parts": self.parts}


def over_budget(budget: Budget, fixed: dict[str, int], where: str) -> BudgetExceeded:
    """The error for fixed parts that do not fit, naming the largest first."""
    total = sum(fixed.values())
    parts = ", ".join(f"{name} {tokens}" for name, tokens in sorted(fixed.items(), key=lambda kv: -kv[1]) if tokens)
    return BudgetExceeded(
        f"{where}: the parts of the prompt that cannot be cut take {total} tokens ({parts}), but the "
        f"window of {budget.window} tokens minus {budget.reserve} kept for the reply leaves {budget.prompt} "
        "— shorten the largest part (the persona file, a step's template, the user's message), give the "
        "model slot a larger `context_window` (or `n_ctx` for a local model), or lower its `max_tokens`"
    )

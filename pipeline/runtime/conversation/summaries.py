"""Folding a history into a running summary: the one code both a conversation's history
(`runtime/conversation/history.py`, folded after a turn) and a background process's histories
(`runtime/background/cycles.py`, AgentCSD's S_loud/S_quiet/ID_quiet, folded every N cycles) use.

The call reuses the `summary` step kind: its template (`summary.j2`, with `max_words`) says
what to write and its `<summary>` section is what is read back (a reply of plain text is taken
as it is; one that holds other sections is no summary). The input — the previous summary and
the entries to fold, escaped — is shortened until it fits the slot's window. When the call
fails (or no slot writes summaries), a truncation digest stands in, at most `DIGEST_CHARS`
whatever it folds: a first line saying what it holds, the start of the earlier summary or
digest (so the oldest facts survive fold after fold), a sample of the folded entries spread
evenly across them (the first included), and the most recent entries, least cut — in order.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from soul.providers import Message, Provider, Request, call_cost, context_window, reply_tokens
from soul.runtime.conversation.budget import Counter, counter_for
from soul.runtime.events import CallTrace
from soul.runtime.untrusted import escape_untrusted

DIGEST_CHARS = 2000  # a truncation digest never grows past this
ENTRY_CHARS = 160  # what a digest keeps of each of its most recent entries
SAMPLE_CHARS = 80  # what it keeps of each entry sampled across the older ones
EARLIER_CHARS = 400  # what it keeps of the start of the earlier summary or digest
RECENT_SHARE = 0.5  # of what is left after the earlier part: the most recent entries
DIGEST_MARK = "[a digest, not a summary:"  # how a digest's first line starts
SUMMARY_CHARS = 2 * DIGEST_CHARS  # a model's summary is cut here
DEFAULT_WORDS = 150  # the summary kind's default `max_words`
SUMMARY_STEP = "history.summary"  # how a summary call is named in a trace


@cache
def _summary_kind() -> Any:
    from soul.kinds import default_registry

    return default_registry().get("summary")


def instructions(env: Any, soul: Mapping[str, Any], max_words: int) -> str:
    """The summary kind's instructions (its template, rendered in the soul's environment)."""
    kind = _summary_kind()
    template = env.get_template(kind.template) if kind is not None and kind.template else None
    if template is None:
        return f"Summarise in at most {max_words} words."
    return str(template.render({"soul": soul, "params": {"max_words": max_words}})).strip()


def truncation_digest(previous: str | None, entries: Sequence[str], prefix: str = "", noun: str = "entry") -> str:
    """What stands in for a summary the model could not write, at most `DIGEST_CHARS`: a line
    saying what it holds; the start of the earlier summary or digest (`previous`, without
    `prefix` and without its own first line); a sample of `entries` spread evenly across the
    older ones; the most recent entries, least cut. Linear in what it is given."""
    plural = "entries" if noun == "entry" else f"{noun}s"
    earlier = (previous or "").removeprefix(prefix) if prefix else (previous or "")
    if earlier.startswith(DIGEST_MARK):  # the earlier digest's own first line is not kept
        earlier = earlier.partition("\n")[2]
    earlier = _cut(earlier.strip(), EARLIER_CHARS)
    header_room = 240  # the first line, worded last (it names the counts)
    room = DIGEST_CHARS - header_room - len(earlier)
    recent: list[str] = []
    used = 0
    for entry in reversed(entries):  # the most recent first, while half the room lasts
        piece = _cut(entry, ENTRY_CHARS)
        if recent and used + len(piece) + 3 > room * RECENT_SHARE:
            break
        recent.append(piece)
        used += len(piece) + 3
    recent.reverse()
    older = entries[: len(entries) - len(recent)]
    slots = max(0, int((room - used) // (SAMPLE_CHARS + 4)))
    sample = [_cut(older[i], SAMPLE_CHARS) for i in _spread(len(older), slots)]
    said = [f"the start of the earlier {'digest' if previous and previous.removeprefix(prefix).startswith(DIGEST_MARK) else 'summary'}"] if earlier else []
    if sample:
        said.append(f"{len(sample)} of {len(older)} older {plural} sampled across, cut to {SAMPLE_CHARS} characters")
    said.append(f"the last {len(recent)} of {len(entries)} {plural}, cut to {ENTRY_CHARS} characters")
    header = f"{DIGEST_MARK} {'; '.join(said)}]"
    parts = ([earlier] if earlier else []) + sample + (["…"] if len(sample) < len(older) and sample else []) + recent
    return f"{header}\n{' | '.join(parts)}"[:DIGEST_CHARS]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _spread(count: int, slots: int) -> list[int]:
    """`slots` indexes of `count` items spread evenly, the first included (all when they fit)."""
    if slots >= count:
        return list(range(count))
    if slots <= 0:
        return []
    step = count / slots
    return sorted({int(i * step) for i in range(slots)})


def read_summary(text: str) -> str:
    """The summary in a reply: its `<summary>` section, or the whole reply when it holds no
    tag at all; raises ValueError for anything else (an empty reply, other sections)."""
    from soul.sections import extract_sections, strip_tags

    tag = _summary_kind().sections[0].tag if _summary_kind() is not None else "summary"
    section = extract_sections(text, (tag,)).sections.get(tag)
    body = section.text if section is not None else None
    if body is None:
        if "<" in text and strip_tags(text).strip() != text.strip():
            raise ValueError("the reply held no <summary> section")
        body = text
    body = strip_tags(str(body)).strip()
    if not body:
        raise ValueError("the summary came back empty")
    return body[:SUMMARY_CHARS]


@dataclass(frozen=True)
class SummaryCall:
    """A model slot to summarise on: its provider, spec and options."""

    provider: Provider
    spec: str
    options: Mapping[str, Any]

    def messages(self, system: str, previous: str | None, entries: Sequence[str], counter: Counter) -> tuple[Message, ...]:
        """The call's messages, each entry shortened (halving) until they fit the window."""
        window = context_window(self.spec, self.options, self.provider)
        limit = window - reply_tokens(self.spec, self.options, window)
        cap = max((len(e) for e in entries), default=0)
        while True:
            lines = "\n".join(f"- {escape_untrusted(e[:cap])}" for e in entries)
            user = f"Previous summary: {escape_untrusted(previous or '(none)')}\n\nEntries:\n{lines}"
            messages = (Message("system", system), Message("user", user))
            if counter.messages([system, user]) <= limit or cap <= ENTRY_CHARS // 4:
                return messages
            cap //= 2

    async def run(self, system: str, previous: str | None, entries: Sequence[str]) -> tuple[str, CallTrace]:
        """The summary the model writes (raises when it cannot), and the call's trace."""
        started = time.perf_counter()
        messages = self.messages(system, previous, entries, counter_for(self.spec, self.provider))
        completion = await self.provider.complete(Request(self.spec, messages, dict(self.options)))
        trace = CallTrace(-1, self.spec, (SUMMARY_STEP,), messages, completion.text, 1,
                          completion.usage.input_tokens, completion.usage.output_tokens,
                          (time.perf_counter() - started) * 1000,
                          cache_read_tokens=completion.usage.cache_read_tokens,
                          cache_write_tokens=completion.usage.cache_write_tokens)
        u = completion.usage  # priced from the table, as a turn's calls are (runtime/turn/runner.py)
        trace.cost = call_cost(getattr(self.provider, "name", ""), self.spec, u.input_tokens, u.output_tokens,
                               u.cache_read_tokens, u.cache_write_tokens)
        return read_summary(completion.text), trace


def system_prompt(soul: str, subject: str, guide: str) -> str:
    """What a summary call is asked, for `subject` (a history's name) of `soul`."""
    return (f"You keep the running memory of {soul}'s {subject}. {guide}\n"
            "Fold the entries below into the previous summary: keep names, facts about the user, "
            "decisions and what is still open. Write the summary inside <summary></summary>, nothing else.")

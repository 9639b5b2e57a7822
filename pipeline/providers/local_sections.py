"""Section-driven decoding on a local model: the framework writes the structure, the model
writes only content.

For a call whose grammar carries a section plan (`soul.sections.grammar`: its last line,
`# soul-sections: {...}`), the reply is built section by section on one llama.cpp slot:
the framework writes `<tag`; an attribute with allowed values (a verb) is chosen under a tiny
grammar of its values; the framework writes `>`; the model writes the content — a boolean or
a choice under a grammar of its own, free text until it writes `<`, ends its turn, or spends
the section's token budget (near the budget a sentence end stops it) — and the framework
writes `</tag>` and goes on. An optional section, or the first of a step whose gate is decided
after the call, is a choice the model makes under a grammar: open it or what comes after it.
The reply therefore parses by construction; what the model says inside a section is its own.

Every piece of the prompt is evaluated once: each request's prompt (token ids) continues the
token list of the one before, and llama-server keeps the common prefix of successive requests
in its slot's KV cache (`cache_prompt`; counted in a test, see docs/providers.md). The
prompt's head (the first message: persona and instructions) is restored by
`soul.providers.local_cache` when another call used the slot in between. The prompt tokens the
call did not evaluate are its cache reads (`Decoded.cache_read_tokens`, counted once a call).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soul.errors import ProviderError
from soul.providers.local_prompt import prompt_tokens

PLAN_PREFIX = "# soul-sections: "
SOFT_END = 0.75  # past this share of a section's budget, a sentence end closes the section
_SENTENCE_ENDS = (".", "!", "?", "…", '."', '!"', '?"')
_SAFETY = 8  # tokens kept free at the end of the context window


@dataclass(frozen=True)
class PlannedSection:
    """One section the reply must hold (see `soul.sections.grammar.section_plan`)."""

    tag: str
    type: str
    attrs: tuple[tuple[str, tuple[str, ...]], ...]
    options: tuple[str, ...]
    budget: int
    required: bool
    step: int
    lead: str = ""  # words the content starts with, written by the framework for the model to continue
    ends: str = ""  # characters that end the content once it holds a visible one (left out)


@dataclass(frozen=True)
class SectionPlan:
    """The sections of a call in order, and the steps whose sections come all or none."""

    sections: tuple[PlannedSection, ...]
    gated: frozenset[int]


def read_plan(grammar: str | None) -> SectionPlan | None:
    """The section plan a grammar carries on its last line, or None (a grammar without one)."""
    if not grammar:
        return None
    last = grammar.rstrip("\n").rpartition("\n")[2]
    if not last.startswith(PLAN_PREFIX):
        return None
    try:
        data = json.loads(last[len(PLAN_PREFIX):])
        sections = tuple(
            PlannedSection(
                str(s["tag"]), str(s["type"]),
                tuple((str(k), tuple(str(v) for v in vs)) for k, vs in s.get("attrs", {}).items()),
                tuple(str(o) for o in s.get("options", ())), max(1, int(s["budget"])),
                bool(s.get("required", True)), int(s.get("step", 0)),
                str(s.get("lead", "")), str(s.get("ends", "")),
            )
            for s in data["sections"]
        )
        return SectionPlan(sections, frozenset(int(i) for i in data.get("gated", ())))
    except (ValueError, KeyError, TypeError) as exc:
        raise ProviderError(f"the call's section plan cannot be read ({exc}): the grammar's last line must be {PLAN_PREFIX}JSON") from exc


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def alternatives_grammar(values: Sequence[str], suffix: str = "", allow_nothing: bool = False) -> str:
    """GBNF for exactly one of `values` (then `suffix`); `allow_nothing`: or the end at once."""
    body = " | ".join(_literal(v + suffix) for v in values)
    return f"root ::= {body}{' | ' + _literal('') if allow_nothing else ''}\n"


@dataclass(frozen=True)
class Sampling:
    """How tokens are drawn (the slot's options: temperature, top_p, repeat_penalty)."""

    temperature: float = 0.7
    top_p: float = 0.95
    repeat_penalty: float = 1.15


# A section's first tokens: whitespace, then a visible character that is neither `<` nor `(`.
# Under it the model can neither end its turn, nor write a control token (no text) or a tag,
# before it has said something (an end is only allowed where the grammar could stop); nor open
# with a parenthesised note: the response format marks a section "(optional)" after its tag and
# gives placeholders in parentheses, and SmolLM2 copied them as the section's content (a csd
# reply "(OPTIONAL)", dropped as an echo of the instructions). From the first visible character
# on, the content is decoded free.
START_GRAMMAR = "root ::= [ \\t\\n\\r]* [^<( \\t\\n\\r] [^<]*\n"


def _char_class(chars: str) -> str:
    """`chars` as the inside of a GBNF character class after `[^...`: llama.cpp's escapes for
    the characters it needs escaped, `-` last (where it is no range)."""
    escapes = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "]": "\\]", "[": "\\[", '"': '\\"'}
    return "".join(escapes.get(c, c) for c in chars if c != "-") + ("-" if "-" in chars else "")


def start_grammar(ends: str = "") -> str:
    """`START_GRAMMAR`, whose first visible character is none of `ends` either (a section that
    ends at a comma cannot open with one)."""
    if not ends:
        return START_GRAMMAR
    banned = _char_class("".join(sorted(set(ends) - set(" \t\n\r<("))))
    return f"root ::= [ \\t\\n\\r]* [^<( \\t\\n\\r{banned}] [^<]*\n"


def _cut(piece: str, ends: str, started: bool) -> int:
    """Where a piece of content stops: at `<`, or at the first of `ends` with a visible
    character before it (in the content so far, `started`, or in the piece); -1: it goes on."""
    cut = piece.find("<")
    if ends:
        seen = started
        for i, char in enumerate(piece[: cut if cut >= 0 else len(piece)]):
            if seen and char in ends:
                return i
            seen = seen or not char.isspace()
    return cut


@dataclass(slots=True)
class Decoded:
    """The reply built, the prompt's token count, the tokens the model wrote, and how many of
    the prompt's tokens the engine did not evaluate for this call (`SectionWriter.cache_reads`)."""

    text: str
    prompt_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0


class SectionWriter:
    """One reply on one engine: call under the model's decode lock (not thread-safe).

    Each choice and each section's content is one request on the engine (two for a content:
    its start under `START_GRAMMAR`, then the rest), whose prompt is the reply so far; the
    engine's slot keeps the common prefix of successive requests, so only what was added
    since the last one is evaluated."""

    def __init__(self, model: Any, prompt: Sequence[int], sampling: Sampling,
                 on_text: Callable[[str], None], stopped: Callable[[], bool] = lambda: False,
                 seed: int | None = None) -> None:
        self.model = model  # a `local_engine.Engine`
        self.tokens = list(prompt)
        self.prompt_tokens = len(self.tokens)
        self.sampling = sampling
        self.on_text = on_text
        self.stopped = stopped
        self.seed = seed
        self.requests = 0
        self.pieces: list[str] = []
        self.pending = ""  # framework text not yet handed on: it goes with the model's next piece,
        # so the first piece a caller sees is the model's (its time is the first token's)
        self.written = 0  # tokens the model wrote
        self.prepared = 0  # prompt tokens evaluated for this call before the first request (the head)
        self.reused: int | None = None  # prompt tokens the slot held at the first request

    # the two ways text enters the reply

    def write(self, text: str, chosen: bool = False) -> None:
        """Text the model did not write token by token: structure, or (`chosen`) a value the
        model chose under a grammar."""
        if not text:
            return
        self.tokens.extend(self.model.tokenize(text, special=False))
        self.pieces.append(text)
        self.pending += text
        if chosen:
            self.flush()

    def _said(self, piece: str) -> None:
        self.pieces.append(piece)
        self.pending += piece
        self.flush()

    def flush(self) -> None:
        """Hand on what is pending."""
        if self.pending:
            text, self.pending = self.pending, ""
            self.on_text(text)

    def _room(self, budget: int) -> int:
        room = int(self.model.n_ctx) - len(self.tokens) - _SAFETY
        if room <= 0:
            raise ProviderError(f"the prompt ({self.prompt_tokens} tokens) leaves no room in the local model's window of {self.model.n_ctx} tokens: raise the slot's n_ctx or shorten the history")
        return min(budget, room)

    def _request(self, limit: int, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": list(self.tokens), "max_tokens": limit, "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p, "repeat_penalty": self.sampling.repeat_penalty, **extra,
        }
        if self.seed is not None:  # each request of the reply draws from a seed of its own
            body["seed"] = (self.seed + self.requests) % (2**31)
        self.requests += 1
        return body

    def choose(self, values: Sequence[str], suffix: str = "", allow_nothing: bool = False, keep: bool = True) -> str | None:
        """One of `values` as the model picks it under a grammar (None: it chose to end).
        `keep`: the choice becomes part of the reply (else it only steers the framework)."""
        said = ""
        count = 0
        if not self.stopped():
            longest = max(len(self.model.tokenize(v + suffix, special=False)) for v in values)
            request = self._request(self._room(4 + longest), grammar=alternatives_grammar(values, suffix, allow_nothing),
                                    repeat_penalty=1.0)
            done = self._generate(request, lambda _t, _b: False)
            said, count = done.text, len(done.tokens)
        if not said and allow_nothing:
            return None
        # the grammar admits only these; a cut-short choice still lands on one
        chosen = next((v for v in values if v + suffix == said), None)
        if chosen is None:
            chosen = next((v for v in values if (v + suffix).startswith(said)), values[0])
        if keep:
            self.written += count
            self.write(chosen + suffix, chosen=True)
        return chosen

    def content(self, budget: int, ends: str = "") -> str:
        """Free text, written by the model until `<`, its end, the budget, or (once it holds a
        visible character) one of `ends`; never empty."""
        limit = self._room(budget)
        begin = start_grammar(ends)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        said: list[str] = []
        count = 0
        started = False  # a visible character written: from then on an end or `<` may close
        closed = False  # the model ended the section (`<`, an end, the budget, a sentence end)

        def take(token: int, piece_bytes: bytes) -> bool:
            nonlocal count, started, closed
            count += 1
            if not piece_bytes:  # an end of turn or a control token: no text, the section ends
                closed = True
                return True
            piece = decoder.decode(piece_bytes)
            cut = _cut(piece, ends, started)
            if cut >= 0:  # the model would close (or open) a tag, or wrote an end: the framework closes
                before = piece[:cut]
                if before:
                    self.write(before, chosen=True)
                    said.append(before)
                closed = True
                return True
            self.tokens.append(token)
            if piece:
                self._said(piece)
                said.append(piece)
            if count >= limit or (count >= SOFT_END * limit and "".join(said[-3:]).rstrip().endswith(_SENTENCE_ENDS)):
                closed = True
                return True
            if not started and piece.strip():
                started = True
                return True  # the start is written: the rest goes free of the start's grammar
            return False

        while not closed and count < limit and not self.stopped():
            first = not started
            extra = {"grammar": begin} if first else {}
            done = self._generate(self._request(limit - count, **extra), take)
            if done.finish != "cut" and not (first and started):
                break  # the model ended its turn, or the request's budget ran out
        self.written += count
        return "".join(said)

    def text(self) -> str:
        return "".join(self.pieces)


    def _generate(self, body: dict[str, Any], on_token: Callable[[int, bytes], bool]) -> Any:
        done = self.model.generate(body, on_token=on_token, stopped=self.stopped)
        if self.reused is None:  # the call's prompt enters the slot with the first request
            self.reused = min(done.cached or 0, self.prompt_tokens)
        return done

    def cache_reads(self) -> int:
        """The prompt's tokens this call did not evaluate: those the slot held when the first
        request came (kept from an earlier request, or loaded from the engine's prompt cache or
        a saved slot), less what the call itself evaluated before it (`prepared`: the head the
        head cache made the engine evaluate). Counted once for the call: the later requests
        keep the prompt too, but that is the call reusing its own work."""
        return max(0, (self.reused or 0) - self.prepared)


def write_reply(writer: SectionWriter, plan: SectionPlan) -> Decoded:
    """Build the reply to `plan` with `writer`: every required section, in order."""
    sections = plan.sections
    i = 0
    chosen: int | None = None  # a section the model chose to open at an optional point
    while i < len(sections) and not writer.stopped():
        section = sections[i]
        first_of_step = i == 0 or sections[i - 1].step != section.step
        skippable = not section.required or (section.step in plan.gated and first_of_step)
        if skippable and chosen != i:
            after = i + 1
            if section.step in plan.gated and first_of_step:  # the whole step or none of it
                while after < len(sections) and sections[after].step == section.step:
                    after += 1
            nxt = sections[after].tag if after < len(sections) else None
            values = [section.tag] + ([nxt] if nxt is not None and nxt != section.tag else [])
            if writer.pieces:
                writer.write("\n")
            pick = writer.choose([f"<{v}" for v in values], allow_nothing=nxt is None, keep=False)
            if pick != f"<{section.tag}":
                if pick is None:
                    break
                i, chosen = after, after
                continue
        elif writer.pieces and not writer.text().endswith("\n"):
            writer.write("\n")
        _write_section(writer, section)
        i += 1
    writer.flush()
    return Decoded(writer.text(), writer.prompt_tokens, writer.written, writer.cache_reads())


def _write_section(writer: SectionWriter, section: PlannedSection) -> None:
    writer.write(f"<{section.tag}")
    for name, values in section.attrs:
        writer.write(f' {name}="')
        writer.choose(values, suffix='"')
    writer.write(">")
    if section.type == "bool":
        writer.choose(["true", "false"])
    elif section.type == "choice" and section.options:
        writer.choose(section.options)
    else:
        if section.type == "list":
            writer.write("\n- ")  # a bullet to start from: the list parser reads bullets
        if section.lead:  # the words the content starts with: the model continues them
            writer.write(section.lead)
        writer.content(section.budget, section.ends)
    writer.write(f"</{section.tag}>")
    writer.flush()  # a closed section reaches the caller at once (the stream parser closes it)


def decode_reply(model: Any, messages: Sequence[tuple[str, str]], plan: SectionPlan, sampling: Sampling, *,
                 home: Path | None, on_text: Callable[[str], None],
                 stopped: Callable[[], bool] = lambda: False, seed: int | None = None,
                 cache: str = "disk") -> Decoded:
    """The reply to `messages` built section by section on `model` (a `local_engine.Engine`).
    Call under the model's decode lock. `cache`: where the prompt head's state is kept — disk
    (and memory), memory, or off."""
    from soul.providers.local_cache import head_cache

    tokens, head = prompt_tokens(model, messages)
    if len(tokens) + _SAFETY >= model.n_ctx:
        raise ProviderError(f"the prompt ({len(tokens)} tokens) does not fit the local model's window of {model.n_ctx} tokens: raise the slot's n_ctx or shorten the history")
    writer = SectionWriter(model, tokens, sampling, on_text, stopped, seed)
    before = model.evaluated
    if cache != "off" and not stopped():  # a call cancelled while it waited evaluates nothing
        head_cache(model, home if cache == "disk" else None).prepare(tokens, head)
    writer.prepared = model.evaluated - before
    return write_reply(writer, plan)

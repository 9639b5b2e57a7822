"""Section-driven decoding on a local model: the framework writes the structure, the model
writes only content.

For a call whose grammar carries a section plan (`soul.sections.grammar`: its last line,
`# soul-sections: {...}`), the reply is built section by section on one llama.cpp context:
the framework writes `<tag`; an attribute with allowed values (a verb) is chosen under a tiny
grammar of its values; the framework writes `>`; the model writes the content — a boolean or
a choice under a grammar of its own, free text until it writes `<`, ends its turn, or spends
the section's token budget (near the budget a sentence end stops it) — and the framework
writes `</tag>` and goes on. An optional section, or the first of a step whose gate is decided
after the call, is a choice the model makes under a grammar: open it or what comes after it.
The reply therefore parses by construction; what the model says inside a section is its own.

Every piece of the prompt is evaluated once: each generation continues the token list of the
one before, and llama.cpp keeps the common prefix of successive calls in its KV cache
(`Llama.generate`'s prefix match; measured, see docs/providers.md). The prompt's head (the
first message: persona and instructions) is restored from `soul.providers.local_cache` when
another call used the context in between.
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


class _Vocabulary:
    """Per model: the tokens that end a turn, and those a section's first token may not be
    (a `<`, an end or a control token: the section would be empty)."""

    def __init__(self, model: Any) -> None:
        import numpy as np

        n = model.n_vocab()
        vocab = model._model.vocab
        from llama_cpp import llama_cpp as raw

        self.ends = {i for i in range(n) if raw.llama_vocab_is_eog(vocab, i)}
        silent = set()
        banned = []
        for i in range(n):
            piece = model.detokenize([i])
            if not piece:
                silent.add(i)
            if i in self.ends or not piece or b"<" in piece:
                banned.append(i)
        self.silent = silent  # control tokens: no text, so they end free text like an end
        self.banned = np.array(banned, dtype=np.intc)


_vocabularies: dict[int, _Vocabulary] = {}


def vocabulary(model: Any) -> _Vocabulary:
    """The model's `_Vocabulary`, worked out once (a scan of its tokens, ~0.1 s)."""
    found = _vocabularies.get(id(model))
    if found is None:
        found = _vocabularies[id(model)] = _Vocabulary(model)
    return found


@dataclass(slots=True)
class Decoded:
    """The reply built, the prompt's token count and the tokens the model wrote."""

    text: str
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int = 0  # prompt tokens the head cache served (in the context, or restored)


class SectionWriter:
    """One reply on one model: call under the model's decode lock (not thread-safe)."""

    def __init__(self, model: Any, prompt: Sequence[int], sampling: Sampling,
                 on_text: Callable[[str], None], stopped: Callable[[], bool] = lambda: False) -> None:
        self.model = model
        self.tokens = list(prompt)
        self.prompt_tokens = len(self.tokens)
        self.sampling = sampling
        self.on_text = on_text
        self.stopped = stopped
        self.vocab = vocabulary(model)
        self.pieces: list[str] = []
        self.pending = ""  # framework text not yet handed on: it goes with the model's next piece,
        # so the first piece a caller sees is the model's (its time is the first token's)
        self.written = 0  # tokens the model wrote
        self._grammars: dict[str, Any] = {}

    # the two ways text enters the reply

    def write(self, text: str, chosen: bool = False) -> None:
        """Text the model did not write token by token: structure, or (`chosen`) a value the
        model chose under a grammar."""
        if not text:
            return
        self.tokens.extend(self.model.tokenize(text.encode("utf-8"), add_bos=False, special=False))
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

    def _grammar(self, source: str) -> Any:
        grammar = self._grammars.get(source)
        if grammar is None:
            import contextlib
            import os

            from llama_cpp import LlamaGrammar

            with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
                grammar = self._grammars[source] = LlamaGrammar.from_string(source, verbose=False)
        return grammar

    def _room(self, budget: int) -> int:
        room = int(self.model.n_ctx()) - len(self.tokens) - _SAFETY
        if room <= 0:
            raise ProviderError(f"the prompt ({self.prompt_tokens} tokens) leaves no room in the local model's window of {self.model.n_ctx()} tokens: raise the slot's n_ctx or shorten the history")
        return min(budget, room)

    def choose(self, values: Sequence[str], suffix: str = "", allow_nothing: bool = False, keep: bool = True) -> str | None:
        """One of `values` as the model picks it under a grammar (None: it chose to end).
        `keep`: the choice becomes part of the reply (else it only steers the framework)."""
        grammar = self._grammar(alternatives_grammar(values, suffix, allow_nothing))
        tokens: list[int] = []
        text = b""
        limit = self._room(4 + max(len(self.model.tokenize((v + suffix).encode(), add_bos=False, special=False)) for v in values))
        generator = self.model.generate(self.tokens, temp=self.sampling.temperature, top_p=self.sampling.top_p,
                                        repeat_penalty=1.0, grammar=grammar)
        for token in generator:
            if token in self.vocab.ends or len(tokens) >= limit or self.stopped():
                break
            tokens.append(token)
            text += self.model.detokenize([token])
        generator.close()
        said = text.decode("utf-8", "replace")
        if not said and allow_nothing:
            return None
        # the grammar admits only these; a cut-short choice still lands on one
        chosen = next((v for v in values if v + suffix == said), None)
        if chosen is None:
            chosen = next((v for v in values if (v + suffix).startswith(said)), values[0])
        if keep:
            self.written += len(tokens)
            self.write(chosen + suffix, chosen=True)
        return chosen

    def content(self, budget: int) -> str:
        """Free text, written by the model until `<`, its end, or the budget; never empty."""
        import numpy as np
        from llama_cpp import LogitsProcessorList

        limit = self._room(budget)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        said: list[str] = []
        started = False  # a visible character written: from then on an end or `<` may close
        banned = self.vocab.banned

        def until_started(_ids: Any, scores: Any) -> Any:
            if not started:
                scores[banned] = -np.inf
            return scores

        generator = self.model.generate(
            self.tokens, temp=self.sampling.temperature, top_p=self.sampling.top_p,
            repeat_penalty=self.sampling.repeat_penalty, logits_processor=LogitsProcessorList([until_started]),
        )
        count = 0
        for token in generator:
            if self.stopped() or token in self.vocab.ends or token in self.vocab.silent:
                break
            piece = decoder.decode(self.model.detokenize([token]))
            count += 1
            if "<" in piece:  # the model would close (or open) a tag: the framework does
                before = piece[: piece.index("<")]
                if before:
                    self.write(before, chosen=True)
                    said.append(before)
                break
            self.tokens.append(token)
            if piece:
                self._said(piece)
                said.append(piece)
                started = started or bool(piece.strip())
            if count >= limit:
                break
            if count >= SOFT_END * limit and "".join(said[-3:]).rstrip().endswith(_SENTENCE_ENDS):
                break
        generator.close()
        self.written += count
        return "".join(said)

    def text(self) -> str:
        return "".join(self.pieces)


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
    return Decoded(writer.text(), writer.prompt_tokens, writer.written)


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
        writer.content(section.budget)
    writer.write(f"</{section.tag}>")
    writer.flush()  # a closed section reaches the caller at once (the stream parser closes it)


def decode_reply(model: Any, messages: Sequence[tuple[str, str]], plan: SectionPlan, sampling: Sampling, *,
                 home: Path | None, on_text: Callable[[str], None],
                 stopped: Callable[[], bool] = lambda: False, seed: int | None = None,
                 cache: str = "disk") -> Decoded | None:
    """The reply to `messages` built section by section (None: the model has no chat template,
    so the caller takes the whole-reply path). Call under the model's decode lock. `cache`:
    where the prompt head's state is kept — disk (and memory), memory, or off."""
    from soul.providers.local_cache import head_cache

    prompt = prompt_tokens(model, messages)
    if prompt is None:
        return None
    tokens, head = prompt
    if len(tokens) + _SAFETY >= model.n_ctx():
        raise ProviderError(f"the prompt ({len(tokens)} tokens) does not fit the local model's window of {model.n_ctx()} tokens: raise the slot's n_ctx or shorten the history")
    if seed is not None:
        model.set_seed(seed)
    cached = 0
    if cache != "off":
        saved = head_cache(model, home if cache == "disk" else None)
        saved.prepare(tokens, head)
        cached = saved.reused
    decoded = write_reply(SectionWriter(model, tokens, sampling, on_text, stopped), plan)
    decoded.cached_tokens = min(cached, decoded.prompt_tokens)
    return decoded

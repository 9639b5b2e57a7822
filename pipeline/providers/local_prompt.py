"""The local model's prompt as tokens: the model's own chat template, message text never special.

A chat endpoint renders the template and tokenizes the whole prompt with `special=True`
(llama-server's does, as llama-cpp-python's chat handler did), so text inside a message that
spells a control token (`<|im_end|>`, `<|im_start|>`) would become one: a user, a memory or
a past reply could end the turn or open a role. `prompt_tokens` renders the template twice
(the engine's `/apply-template`) — with the messages, and with a marker in place of each — to
tell the template's own text (tokenized with `special=True`) from each message's text
(tokenized with `special=False`), and the prompt goes to the engine as token ids. Both the
section-driven path (`local_sections.decode_reply`) and the whole-reply path
(`local._whole_reply`) use it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["prompt_tokens"]


def prompt_tokens(model: Any, messages: Sequence[tuple[str, str]]) -> tuple[list[int], int]:
    """The chat prompt's tokens (through the model's own chat template, ending where the
    assistant's reply begins) and how many of them are the head (the first message).
    `model` is a `local_engine.Engine`."""
    prompt = model.render(messages)
    contents = [content for _, content in messages]
    marked = model.render([(role, f"{_MARK[0]}{i}{_MARK[1]}") for i, (role, _) in enumerate(messages)])
    parts = re.split(f"{_MARK[0]}(\\d+){_MARK[1]}", marked)  # template, index, template, ...
    for shown in (_as_is, str.strip):  # what the template does to a message's text
        if "".join(p if k % 2 == 0 else shown(contents[int(p)]) for k, p in enumerate(parts)) == prompt:
            break
    else:  # a template that rewrites the text: find each message's text in order instead
        return _found_tokens(model, prompt, contents)
    # Only the template's own text may become control tokens: every message's text is
    # tokenized with special=False, so `<|im_end|>` in it — user text, a memory, a past reply,
    # whatever escaping missed — stays plain text and never ends a turn or opens a role.
    # The head ends where the first message's text does: tokenized apart, it is the same
    # tokens every turn whatever follows it.
    tokens: list[int] = []
    head = 0
    for k, part in enumerate(parts):
        if k % 2 == 0:
            tokens += model.tokenize(part, special=True)
            continue
        text = shown(contents[int(part)])
        tokens += model.tokenize(text, special=False)
        if int(part) == 0 and text:
            head = len(tokens)
    return tokens, head


_MARK = ("\ue000", "\ue001")  # private-use characters around a message's index: no template strips them


def _as_is(text: str) -> str:
    return text


def _found_tokens(model: Any, prompt: str, contents: Sequence[str]) -> tuple[list[int], int]:
    """The fallback of `prompt_tokens` for a template that rewrites messages: each message's
    text (or its stripped form), found in order, is tokenized with `special=False`; a text
    the template changed beyond stripping is tokenized as part of the template."""
    out: list[int] = []
    pos = head = 0
    for i, content in enumerate(contents):
        text = content if content in prompt[pos:] else content.strip()
        at = prompt.find(text, pos) if text else -1
        if at < 0:
            continue
        out += model.tokenize(prompt[pos:at], special=True)
        out += model.tokenize(text, special=False)
        pos = at + len(text)
        if i == 0:
            head = len(out)
    if pos < len(prompt):
        out += model.tokenize(prompt[pos:], special=True)
    return out, head

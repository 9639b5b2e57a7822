"""A model's reply as one speaker's line: small models, given a transcript, often go on to
write the other speakers' turns too, echo the prompt's "Respond now:", or label their own
line. `clean_reply` keeps what the speaker itself said.

Rules, in order: the prompt's sentences the reply opens with (its instruction, system prompt
or template, echoed: the small local models do), code fences and "Respond now:" go; the text splits at speaker labels —
a name of the dialogue's speakers (or "user", "the user", "moderator"), optionally followed by
"replied", "said", "answered", "asked", "asks", "adds" or "(…)", then ":" — where a label
opens a line or follows a sentence's end. The line is the first segment with words that is
not labelled as another speaker — the text before the first label, else the text after the
speaker's own label or a "user"/"moderator" one (the label dropped) — up to the next label:
the turns the model made up for the others are cut. A reply made only of others' turns keeps
the first (its label dropped): that is what the model said when asked. Then at most
`max_words` (150, the original's limit) words, "…" marking a cut; whitespace is collapsed
within each line. Nothing but fences and echoes gives "". One regex pass: linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_REPLY_WORDS", "clean_reply"]

MAX_REPLY_WORDS = 150
_VERBS = r"(?:[ \t]+(?:replied|replies|said|says|answered|answers|asked|asks|adds|added|continued))?"
_NOISE = re.compile(r"```[a-zA-Z]*|\bRespond now:\s*", re.IGNORECASE)
EXTRA_LABELS = ("the user", "user", "moderator")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")  # a sentence, or a line without an end mark
MIN_ECHO = 20  # shorter sentences of an instruction may be the speaker's own words


def _label_pattern(names: Iterable[str]) -> re.Pattern[str]:
    alternatives = sorted({n.strip() for n in (*names, *EXTRA_LABELS) if n.strip()}, key=len, reverse=True)
    names_re = "|".join(re.escape(n) for n in alternatives)
    # every quantifier is followed by what it cannot match, so no input backtracks quadratically
    return re.compile(rf"(?:^|(?<=\n)|(?<=[.!?…\"”]))[ \t]*\**(?P<name>{names_re})\**{_VERBS}[ \t]*"
                      rf"(?:\([^)\n]{{0,40}}\)[ \t]*)?:", re.IGNORECASE)


def _without_echoes(text: str, echoes: Iterable[str]) -> str:
    """`text` without the sentences of `echoes` (of `MIN_ECHO` characters or more) it opens
    with — sentence by sentence, since an echo is often changed towards its end; unchanged
    when nothing else would be left."""
    sentences = {s.strip() for echo in echoes for s in _SENTENCE.findall(echo) if len(s.strip()) >= MIN_ECHO}
    rest = text.lstrip()
    found = True
    while found and sentences:
        found = False
        for sentence in sentences:
            if rest.startswith(sentence):
                rest, found = rest[len(sentence):].lstrip(), True
    return rest if rest.split() else text


def clean_reply(text: str, speaker: str, speakers: Iterable[str], max_words: int = MAX_REPLY_WORDS,
                echoes: Iterable[str] = ()) -> str:
    """`text` as `speaker`'s own line (see the module docstring); `speakers` are every name of
    the dialogue. A text no rule applies to comes back as it was, but for whitespace and the
    word limit. `echoes` are prompt texts (the instruction, the system prompt, the step's
    template) a model may repeat: the sentences of theirs (20 characters or more) the reply
    opens with are removed first, unless nothing else is left."""
    text = _without_echoes(text, echoes)
    flat = _NOISE.sub(" ", text)
    labels = list(_label_pattern([speaker, *speakers]).finditer(flat))
    others = {n.strip().casefold() for n in speakers} - {speaker.strip().casefold()}
    # segments: (label or None, text); the line is the first with words not labelled as another
    # speaker, else the first with words
    segments = [(None, flat[:labels[0].start()] if labels else flat)]
    segments += [(m.group("name").casefold(), flat[m.end():labels[i + 1].start() if i + 1 < len(labels) else len(flat)])
                 for i, m in enumerate(labels)]
    said = [(name, text) for name, text in segments if text.split()]
    line = next((text for name, text in said if name not in others), said[0][1] if said else "")
    words = line.split()
    if len(words) > max_words:
        return " ".join(words[:max_words]) + "…"
    return "\n".join(" ".join(part.split()) for part in line.strip().splitlines() if part.strip())

"""The fallback reply: what of a raw reply may reach the user when its reply section is missing.

The seed falls back to the raw text with the tags stripped, but that text holds every other
section too — the soul's private monologue, its user-model verdict — and a model that forgot
or misspelt the reply tag (`<external_dialogu>`, `<thinking>`) or left a section unclosed
would have its thoughts shown and stored as the reply. So the fallback keeps only the text
outside every *section-like* element: the known sections and any other tag that is not an
HTML formatting tag (those are how models mark up prose; every other tag name is structure
the model invented). An element left open runs to the next one or to the end of the reply,
and comments are dropped whole, so nothing inside one can leak. What is left is stripped of
markup as `strip_tags` does; when nothing is left the caller uses its fixed line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from soul.sections.xmlparse import TEXT, Scanner, ascii_lower, strip_tags

__all__ = ["text_outside_sections"]

# HTML's phrasing and block formatting elements: prose markup, never a section of a reply.
PROSE_TAGS = frozenset(
    {
        "a", "abbr", "b", "bdi", "bdo", "big", "blockquote", "br", "cite", "code", "dd", "del", "dfn",
        "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd",
        "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike", "strong", "sub",
        "sup", "table", "tbody", "td", "th", "thead", "tr", "tt", "u", "ul", "var", "wbr",
    }
)
# A tag name as the scanner matches one (its pattern requires no name character to follow).
_TAG_NAME = re.compile(r"</?([A-Za-z_][\w.:-]{0,63})(?![\w.:-])", re.ASCII)
# More distinct invented tag names than this and the reply is not prose with a slip in it.
MAX_SECTION_NAMES = 64


def _section_names(raw: str, known: Sequence[str]) -> list[str] | None:
    """The known tags plus every other non-prose tag name in `raw`; None when there are too many."""
    names = {ascii_lower(tag): tag for tag in known if tag}
    for match in _TAG_NAME.finditer(raw):
        name = ascii_lower(match.group(1))
        if name not in PROSE_TAGS and name not in names:
            if len(names) >= MAX_SECTION_NAMES + len(known):
                return None
            names[name] = name
    return list(names.values())


def text_outside_sections(raw: str, known: Sequence[str]) -> str:
    """The text of `raw` outside every section-like element, markup stripped, entities decoded.

    Linear in `raw` (one pass to find tag names, one scan, one strip). Empty when the reply
    has nothing outside its sections, or is made of too many invented tags to trust.
    """
    names = _section_names(raw, known)
    if names is None:
        return ""
    scanner = Scanner(names, keep_comments=False, decode=False)
    outside = [event[2] for event in scanner.feed(raw, final=True) if event[0] == TEXT and event[1] is None]
    return strip_tags("".join(outside))

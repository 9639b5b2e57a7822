"""Reply parsing: tolerant extraction of the known XML sections from a raw model reply.

Models do not write XML; they write text with some tags in it. So only the tags the steps
declared are structure, and everything else (`<b>`, `a < b`, `AT&T`, markdown fences, prose)
is text. One scanner serves both the whole-reply parser here and the streaming parser
(`soul.sections.streaming`): it reads text in pieces, holds back only what could still become a tag,
an entity or a CDATA marker, and reports opens, texts and closes. Sharing it is what makes a
streamed section's text equal the parsed one, chunking aside.

lxml is not used at run time: libxml2's recovery mode repairs broken markup in ways that
depend on its version and cannot run incrementally, while this scanner is deterministic,
never raises, and is several times faster on a typical reply. The tests use lxml as the
oracle on well-formed replies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from html.entities import html5

__all__ = ["ParseResult", "ParsedSection", "decode_entities", "extract_sections", "strip_tags"]

# Scanner events: (OPEN, tag, attributes) | (TEXT, tag or None, text) | (CLOSE, tag, how)
OPEN, TEXT, CLOSE = 0, 1, 2
# How a section ended: its own closing tag, the next known opening tag, or the end of the reply.
BY_TAG, BY_NEXT, BY_END = "tag", "next", "end"

# Attribute text is bounded so a streaming parser never holds back more than this much.
MAX_ATTRIBUTES = 1024
_NAME_CHAR = re.compile(r"[\w.:-]", re.ASCII)
_ENTITY = re.compile(r"&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z][A-Za-z0-9]{0,31}));")
# An `&` followed by what could still grow into an entity, up to the end of the buffer.
_ENTITY_START = re.compile(r"&(?:#(?:[xX][0-9a-fA-F]{0,6}|[0-9]{0,7})|[A-Za-z][A-Za-z0-9]{0,31})?\Z")
_ATTRIBUTE = re.compile(r"""([^\s=/"'<>]+)\s*(?:=\s*(?:"([^"]*)"?|'([^']*)'?|([^\s"'>]+)))?""")
_CDATA_OPEN = "<![cdata["
_CDATA_CLOSE = "]]>"
_COMMENT_OPEN = "<!--"
_COMMENT_CLOSE = "-->"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """Lowercase A-Z only, as the ASCII case-insensitive tag pattern compares (str.lower is
    faster but maps a few non-ASCII letters, such as the Kelvin sign, to ASCII ones)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
# A markdown fence line (```xml) left at the end of a section whose closing tag never came.
FENCE_LINE = re.compile(r"[ \t]*`{3,}[\w+.-]{0,32}")
# Any tag at all, for the fallback that strips them. The comment alternative is used only on
# text that holds a `-->` after every `<!--` it is tried at (see `strip_tags`): a lazy `.*?`
# tried at each of k unterminated `<!--` would scan to the end k times.
_ANY_MARKUP = re.compile(r"<!--.*?-->|<!\[CDATA\[|\]\]>|</?[A-Za-z][^<>]{0,1024}>|<[?!][^<>]{0,1024}>", re.S | re.I)
_ANY_MARKUP_BUT_COMMENTS = re.compile(r"<!\[CDATA\[|\]\]>|</?[A-Za-z][^<>]{0,1024}>|<[?!][^<>]{0,1024}>", re.I)
_FENCE_ONLY_LINE = re.compile(r"^[ \t]*`{3,}[\w+.-]*[ \t]*$", re.M)


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class ParsedSection:
    """One known section of a reply."""

    tag: str  # canonical tag as requested (the case given in the spec)
    text: str  # inner text, entities decoded, stripped; unknown tags inside are kept as text
    attributes: dict[str, str]  # attribute names lowercased, values entity-decoded
    closed: bool  # False when the closing tag was missing and the section was repaired


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class ParseResult:
    """The known sections of a reply, the text around them, and what had to be repaired."""

    sections: dict[str, ParsedSection]  # by canonical tag; the first occurrence wins
    outside: str  # text outside all known sections, whitespace-collapsed
    repairs: tuple[str, ...]  # human-readable notes, e.g. "closed <reply> at end"
    duplicates: tuple[str, ...] = ()  # canonical tags written more than once (later ones dropped)


def _decode_one(match: re.Match[str]) -> str:
    decimal, hexadecimal, name = match.groups()
    if name is not None:
        return html5.get(name + ";", match.group(0))
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return chr(code)


def decode_entities(text: str) -> str:
    """Decode `&name;`, `&#n;` and `&#xh;`; anything else with an `&` stays as written."""
    return _ENTITY.sub(_decode_one, text) if "&" in text else text


def parse_attributes(text: str) -> dict[str, str]:
    """Attributes in any quoting (`a="x"`, `a='x'`, `a=x`, bare `a`); names lowercased, first wins."""
    attributes: dict[str, str] = {}
    for match in _ATTRIBUTE.finditer(text):
        name = match.group(1).lower()
        value = next((v for v in match.groups()[1:] if v is not None), "")
        attributes.setdefault(name, decode_entities(value))
    return attributes


def drop_fence_tail(text: str) -> str:
    """`text` (already stripped) without a final markdown fence line, as left by an unclosed section."""
    newline = text.rfind("\n")
    if newline >= 0 and FENCE_LINE.fullmatch(text, newline + 1):
        return text[:newline].rstrip()
    return text


@lru_cache(maxsize=256)
def _tag_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """An opening or closing tag of one of `names` (lowercase), any case, attributes bounded."""
    alternatives = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    return re.compile(
        rf"<(/?)({alternatives})(?![\w.:-])([^<>]{{0,{MAX_ATTRIBUTES}}})>", re.IGNORECASE | re.ASCII
    )


class Scanner:
    """The shared tag scanner: feed text in pieces, get events; `final=True` ends the reply.

    A comment (`<!-- ... -->`) is opaque: tags inside it are never structure. Its text is kept
    as text by default (inside a section it is part of the section, as any stray markup is);
    `keep_comments=False` drops it. An unterminated comment runs to the end of the reply, as
    it must when streaming (no later text can be known not to be inside it).
    `decode=False` leaves entities as written (for a caller that strips markup afterwards).
    """

    def __init__(self, tags: Sequence[str], *, keep_comments: bool = True, decode: bool = True) -> None:
        self.canonical: dict[str, str] = {}
        for tag in tags:
            if tag:  # an empty name would make every `<` a tag
                self.canonical.setdefault(ascii_lower(tag), tag)
        self._tag = _tag_pattern(tuple(self.canonical)) if self.canonical else None
        self.repairs: list[str] = []
        self.current: str | None = None  # the open section
        self.skipping = False  # the open section is a duplicate being dropped
        self.in_cdata = False
        self.in_comment = False
        self.keep_comments = keep_comments
        self.decode = decode
        self.seen: set[str] = set()
        self.duplicates: list[str] = []
        self._held = ""

    def feed(self, chunk: str, final: bool = False) -> list[tuple]:
        """Events for `chunk`; text that could still become markup is held for the next call."""
        buf = self._held + chunk if self._held else chunk
        events: list[tuple] = []
        i = self._scan(buf, final, events)
        self._held = buf[i:]
        if final:
            if self._held:  # cannot happen: a final scan consumes everything; kept as a guard
                self._text(events, self._held)
                self._held = ""
            self.in_cdata = False
            if self.in_comment:
                self.in_comment = False
                self.repairs.append("closed an unterminated comment at end")
            if self.current is not None:
                if not self.skipping:
                    events.append((CLOSE, self.current, BY_END))
                    self.repairs.append(f"closed <{self.current}> at end")
                self.current, self.skipping = None, False
        return [(TEXT, e[1], "".join(e[2])) if e[0] == TEXT else e for e in events]

    def _text(self, events: list[tuple], text: str) -> None:
        if text and not self.skipping:
            # Pieces gather in a list, joined once in `feed`: appending to a string is quadratic.
            if events and events[-1][0] == TEXT and events[-1][1] == self.current:
                events[-1][2].append(text)
            else:
                events.append((TEXT, self.current, [text]))

    def _scan(self, buf: str, final: bool, events: list[tuple]) -> int:
        """Scan `buf` into events; returns how far it got (the rest is held back)."""
        i, n = 0, len(buf)
        tag_re = self._tag
        # The next `<` and `&`, found with str.find (memchr): several times faster than a
        # regex search for either, and recomputed only once the scan has passed them.
        lt, amp = buf.find("<"), buf.find("&") if self.decode else -1
        while i < n:
            if self.in_comment:
                end = buf.find(_COMMENT_CLOSE, i)
                if end < 0:
                    # Hold back a possible start of `-->`; the rest is comment text for sure.
                    keep = 0 if final else 2 if buf.endswith("--") else 1 if buf.endswith("-") else 0
                    self._comment_text(events, buf[i : n - keep])
                    return n - keep
                self._comment_text(events, buf[i : end + 3])
                self.in_comment = False
                i = end + 3
                continue
            if self.in_cdata:
                end = buf.find(_CDATA_CLOSE, i)
                if end < 0:
                    if final:
                        self.repairs.append(f"closed unterminated CDATA in <{self.current}>")
                        self._text(events, buf[i:])
                        return n
                    keep = 2 if buf.endswith("]]") else 1 if buf.endswith("]") else 0
                    self._text(events, buf[i : n - keep])
                    return n - keep
                self._text(events, buf[i:end])
                self.in_cdata = False
                i = end + 3
                continue
            if 0 <= lt < i:
                lt = buf.find("<", i)
            if 0 <= amp < i:
                amp = buf.find("&", i)
            if lt < 0 and amp < 0:
                self._text(events, buf[i:])
                return n
            j = lt if amp < 0 or 0 <= lt < amp else amp
            if j > i:
                self._text(events, buf[i:j])
            if buf[j] == "&":
                entity = _ENTITY.match(buf, j)
                if entity is not None:
                    self._text(events, _decode_one(entity))
                    i = entity.end()
                elif not final and _ENTITY_START.match(buf, j):
                    return j
                else:
                    self._text(events, "&")
                    i = j + 1
                continue
            tag = tag_re.match(buf, j) if tag_re is not None else None
            if tag is not None:
                self._on_tag(events, tag)
                i = tag.end()
                continue
            if j + 1 == n or buf[j + 1] == "!":
                if buf.startswith(_COMMENT_OPEN, j):
                    self.in_comment = True
                    self._comment_text(events, _COMMENT_OPEN)
                    i = j + 4
                    continue
                if not final and n - j < 4 and _COMMENT_OPEN.startswith(buf[j:]):
                    return j
                if self.current is not None:
                    head = ascii_lower(buf[j : j + 9])
                    if head == _CDATA_OPEN:
                        self.in_cdata = True
                        i = j + 9
                        continue
                    if not final and len(head) < 9 and _CDATA_OPEN.startswith(head):
                        return j
            if not final and self._may_become_tag(buf, j):
                return j
            self._text(events, "<")
            i = j + 1
        return n

    def _comment_text(self, events: list[tuple], text: str) -> None:
        if self.keep_comments:
            self._text(events, text)

    def _may_become_tag(self, buf: str, j: int) -> bool:
        """Whether `buf[j:]` (starting with `<`, running to the end) is a prefix of a known tag."""
        rest = buf[j + 1 :]
        if rest.startswith("/"):
            rest = rest[1:]
        if "<" in rest or ">" in rest:
            return False
        lowered = ascii_lower(rest)
        for name in self.canonical:
            if len(lowered) <= len(name):
                if name.startswith(lowered):
                    return True
            elif lowered.startswith(name):
                after = rest[len(name) :]
                if not _NAME_CHAR.match(after) and len(after) <= MAX_ATTRIBUTES:
                    return True
        return False

    def _on_tag(self, events: list[tuple], match: re.Match[str]) -> None:
        closing, raw_name, attribute_text = match.groups()
        name = self.canonical[raw_name.lower()]  # ASCII: the pattern is
        if closing:
            if name == self.current:
                if not self.skipping:
                    events.append((CLOSE, name, BY_TAG))
                self.current, self.skipping = None, False
            else:
                self.repairs.append(f"dropped stray </{name}>")
            return
        if self.current is not None:
            if not self.skipping:
                events.append((CLOSE, self.current, BY_NEXT))
                self.repairs.append(f"closed <{self.current}> at <{name}>")
            self.current, self.skipping = None, False
        self_closing = attribute_text.rstrip().endswith("/")
        if self_closing:  # so `<x verb=said/>` gives "said", not "said/"
            attribute_text = attribute_text.rstrip()[:-1]
        if name in self.seen:
            self.repairs.append(f"dropped duplicate <{name}>")
            if name not in self.duplicates:
                self.duplicates.append(name)
            if not self_closing:
                self.current, self.skipping = name, True
            return
        self.seen.add(name)
        events.append((OPEN, name, parse_attributes(attribute_text)))
        if self_closing:
            events.append((CLOSE, name, BY_TAG))
        else:
            self.current = name


@lru_cache(maxsize=512)
def _clean_reply(tags: tuple[str, ...]) -> re.Pattern[str]:
    """The pattern of one well-formed known section (the common case of a whole reply)."""
    alternatives = "|".join(map(re.escape, tags))
    return re.compile(rf'<({alternatives})((?:\s+[A-Za-z_][\w.-]*="[^"<>&]*")*)\s*>([^<&]*)</\1>')


@lru_cache(maxsize=512)
def clean_single(tag: str) -> re.Pattern[str]:
    """The pattern of a whole clean reply of one section (a chained step's usual reply)."""
    return re.compile(rf'\s*<({re.escape(tag)})((?:\s+[A-Za-z_][\w.-]*="[^"<>&]*")*)\s*>([^<&]*)</\1>\s*')


def _fast(raw: str, tags: tuple[str, ...]) -> ParseResult | None:
    """The result for a clean reply without running the scanner; None when it is not clean.

    Exactly what the scanner gives for such a reply (a test checks both agree): no entities,
    no stray markup, each section closed, none repeated, tags written as requested.
    """
    if len(tags) == 1:  # one section, whitespace around it: one match over the whole reply
        whole = clean_single(tags[0]).fullmatch(raw)
        if whole is None:
            return None
        tag, attribute_text, text = whole.groups()
        attributes = parse_attributes(attribute_text) if attribute_text else {}
        return ParseResult({tag: ParsedSection(tag, text.strip(), attributes, True)}, "", ())
    section = _clean_reply(tags)
    sections: dict[str, ParsedSection] = {}
    end = 0
    for match in section.finditer(raw):
        start, stop = match.span()
        if start != end and not raw[end:start].isspace():
            return None  # text between sections: the scanner keeps it as `outside`
        tag, attribute_text, text = match.groups()
        if tag in sections:
            return None  # a duplicate: the scanner notes the repair
        sections[tag] = ParsedSection(tag, text.strip(), parse_attributes(attribute_text) if attribute_text else {}, True)
        end = stop
    if not sections or (end != len(raw) and not raw[end:].isspace()):
        return None
    return ParseResult(sections, "", ())


def extract_sections(raw: str, tags: Sequence[str]) -> ParseResult:
    """The sections named in `tags` found in a raw model reply; never raises.

    Only `tags` are structure, matched case-insensitively. A section without its closing tag
    ends at the next known opening tag or at the end of the reply; a duplicate is dropped
    (the first wins); `<tag/>` is an empty section; CDATA inside a section is kept as text.
    Each repair is noted in `repairs`.
    """
    names = tags if type(tags) is tuple else tuple(tags)
    if len(names) == 1 and names[0]:  # one section (a chained step's call): `_fast`'s first case, here
        whole = clean_single(names[0]).fullmatch(raw)
        if whole is not None:
            tag, attribute_text, text = whole.groups()
            attributes = parse_attributes(attribute_text) if attribute_text else {}
            return ParseResult({tag: ParsedSection(tag, text.strip(), attributes, True)}, "", ())
        return _scan_sections(raw, tags)
    fast = _fast(raw, names) if names and "" not in names else None  # an empty name: the scanner ignores it
    return fast if fast is not None else _scan_sections(raw, tags)


def _scan_sections(raw: str, tags: Sequence[str]) -> ParseResult:
    """The tolerant path: the scanner, for anything that is not a clean reply."""
    scanner = Scanner(tags)
    events = scanner.feed(raw, final=True)
    pieces: dict[str, list[str]] = {}
    attributes: dict[str, dict[str, str]] = {}
    sections: dict[str, ParsedSection] = {}
    outside: list[str] = []
    for event in events:
        kind, tag = event[0], event[1]
        if kind == TEXT:
            (pieces[tag] if tag is not None else outside).append(event[2])
        elif kind == OPEN:
            pieces[tag] = []
            attributes[tag] = event[2]
        else:
            text = "".join(pieces[tag]).strip()
            if event[2] == BY_END:
                text = drop_fence_tail(text)
            sections[tag] = ParsedSection(tag, text, attributes[tag], event[2] == BY_TAG)
    return ParseResult(sections, " ".join("".join(outside).split()), tuple(scanner.repairs), tuple(scanner.duplicates))


def strip_tags(raw: str) -> str:
    """The raw reply with every tag removed (known or not), entities decoded, whitespace tidied.

    The seed's fallback when a required section is missing: what the model wrote, minus markup
    (tags, comments, CDATA markers, fence lines). Never raises.
    """
    # Linear: up to the last `-->` every `<!--` finds its end, each match consuming what it
    # scanned; after it no comment can end, so that tail is stripped without the comment
    # alternative. No match crosses the split (it falls right after a `>`, which no
    # alternative holds inside), so this is exactly one pass of `_ANY_MARKUP` over `raw`.
    split = raw.rfind("-->") + 3 if "-->" in raw else 0
    text = _ANY_MARKUP.sub(" ", raw[:split]) + _ANY_MARKUP_BUT_COMMENTS.sub(" ", raw[split:])
    text = _FENCE_ONLY_LINE.sub("", text)
    text = decode_entities(text)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    tidy = "\n".join(lines).strip()
    return re.sub(r"\n{3,}", "\n\n", tidy)

"""Reading a file of memories for `soul memory ingest`: in pieces, every memory bounded.

A file is read PIECE_BYTES at a time (never whole, never a whole line: a 50 MB line costs
what a 64 KiB one does) and decoded incrementally as UTF-8. Text files give one memory per
non-empty line, Markdown one per paragraph (a heading line is kept in front of the
paragraphs below it), JSONL one per line (a string, or an object with `text`). A memory holds
at most MEMORY_CHARS characters: a longer line, paragraph or JSONL text becomes several
memories, split at the last whitespace before the cap (cut at the cap where there is none),
the pieces of a JSONL item keeping its other fields. A JSONL line is parsed whole, so one
longer than JSONL_LINE_BYTES is refused at its FILE:LINE. Bytes that are not UTF-8 are
refused at their FILE:LINE too.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from soul.errors import SoulError

MEMORY_CHARS = 4000  # ~1,000 tokens: a long paragraph; the embedder reads fewer anyway
JSONL_LINE_BYTES = 1 << 20  # a JSONL line is parsed whole: at most 1 MiB
PIECE_BYTES = 64 << 10  # read at most this much at a time
HEADING_CHARS = 200  # a Markdown heading kept in front of its paragraphs
_SPACES = (" ", "\t", "\n", "\r", "\u3000")
_LINE_ENDS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines splits on


def read_items(path: Path, kind: str, tags: list[str]) -> Iterator[dict[str, Any]]:
    """Memories from a file (module docstring), each at most MEMORY_CHARS characters. A file
    that is not UTF-8, or a JSONL line that is too long, not JSON or has a bad field, stops the
    reading with a `SoulError` naming FILE:LINE."""
    base = {"kind": kind, "tags": tuple(tags), "source": path.name}
    with path.open("rb") as f:
        if path.suffix in (".jsonl", ".ndjson"):
            yield from _jsonl(path, f, base)
        elif path.suffix in (".md", ".markdown"):
            yield from _markdown(path, f, base)
        else:
            for text in _text_lines(path, f):
                yield {**base, "text": text}


def split_text(text: str, cap: int = MEMORY_CHARS) -> Iterator[str]:
    """`text` (stripped) in pieces of at most `cap` characters, split at whitespace."""
    splitter = _Splitter(cap)
    yield from splitter.feed(text)
    yield from splitter.end()


class _Splitter:
    """Cuts a text that arrives in pieces into stripped chunks of at most `cap` characters,
    each cut at the last whitespace before the cap (or at the cap where there is none)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = ""

    def feed(self, piece: str) -> Iterator[str]:
        self.buf = (self.buf + piece) if self.buf else piece.lstrip()
        while len(self.buf) > self.cap:
            window = self.buf[: self.cap + 1]
            cut = max(window.rfind(c) for c in _SPACES)
            if cut <= 0:
                cut = self.cap
            chunk, self.buf = self.buf[:cut].rstrip(), self.buf[cut:].lstrip()
            if chunk:
                yield chunk

    def end(self) -> Iterator[str]:
        rest, self.buf = self.buf.strip(), ""
        if rest:
            yield rest


def _pieces(path: Path, f: BinaryIO) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, whether it ends its line): the file as decoded pieces of at most
    PIECE_BYTES, split where `str.splitlines` would split; line numbers count `\\n`s."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    number, offset = 1, 0
    while True:
        raw = f.readline(PIECE_BYTES)
        pending = decoder.getstate()[0]
        try:
            text = decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            at = offset - len(pending) + exc.start
            bad = exc.object[exc.start] if exc.start < len(exc.object) else 0
            raise SoulError(f"{path}:{number}: not UTF-8 text (byte 0x{bad:02x} at offset {at}); "
                            "convert the file to UTF-8, e.g. iconv -t UTF-8") from None
        offset += len(raw)
        for part in text.splitlines(keepends=True):
            body = part.rstrip(_LINE_ENDS)
            ended = len(body) < len(part)
            yield number, body, ended
            if part.endswith("\n"):
                number += 1
        if not raw:
            return


def _text_lines(path: Path, f: BinaryIO) -> Iterator[str]:
    """Each non-empty line's text, in chunks of at most MEMORY_CHARS."""
    splitter = _Splitter(MEMORY_CHARS)
    for _, piece, ended in _pieces(path, f):
        yield from splitter.feed(piece)
        if ended:
            yield from splitter.end()
    yield from splitter.end()


def _markdown(path: Path, f: BinaryIO, base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Paragraphs (runs of non-blank lines), each with the heading above it in front; a
    paragraph that is one line starting with `#` is the heading."""
    paragraph = _Paragraph()
    for _, piece, ended in _pieces(path, f):
        for text in paragraph.feed(piece, ended):
            yield {**base, "text": text}
    for text in paragraph.end():
        yield {**base, "text": text}


class _Paragraph:
    """The Markdown paragraph being read, fed piece by piece."""

    def __init__(self) -> None:
        self.prefix = ""  # "heading: " of the paragraphs below a heading
        self._start()

    def _start(self) -> None:
        self.splitter = _Splitter(MEMORY_CHARS - len(self.prefix))
        self.lines = 0  # its complete lines with text
        self.first = ""  # its first line (bounded), while it may be a heading
        self.spilled = False  # it gave memories already, so it is no heading
        self.lead = ""  # the current line's leading whitespace
        self.has_text = False  # the current line has text

    def feed(self, piece: str, ended: bool) -> Iterator[str]:
        if not self.has_text and not piece.strip():
            self.lead = (self.lead + piece)[-HEADING_CHARS:]
        else:
            if not self.has_text:  # the line's first text: join it to the paragraph
                piece = ("\n" if self.lines else "") + self.lead + piece
                self.has_text, self.lead = True, ""
            if self.lines == 0 and len(self.first) < HEADING_CHARS * 4:
                self.first += piece
            for chunk in self.splitter.feed(piece):
                self.spilled = True
                yield self.prefix + chunk
        if ended:
            if self.has_text:
                self.lines += 1
            elif self.lines:  # a blank line ends the paragraph
                yield from self.end()
            self.has_text, self.lead = False, ""

    def end(self) -> Iterator[str]:
        heading = self.first.strip()
        lines = self.lines + self.has_text  # the last line may have no newline
        if lines == 1 and not self.spilled and heading.startswith("#"):
            heading = heading.lstrip("# ").strip()[:HEADING_CHARS]
            self.prefix = f"{heading}: " if heading else ""
        else:
            for chunk in self.splitter.end():
                yield self.prefix + chunk
        self._start()


def _jsonl(path: Path, f: BinaryIO, base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One item per line; a long `text` in chunks that keep the item's other fields."""
    number = 0
    while True:
        raw = f.readline(JSONL_LINE_BYTES + 2)
        if not raw:
            return
        number += 1
        if len(raw.rstrip(b"\r\n")) > JSONL_LINE_BYTES:
            raise SoulError(f"{path}:{number}: a JSONL line of more than 1 MiB is not read: split its text over "
                            "several lines, or put long text in a .txt or .md file (its long lines and paragraphs "
                            f"become several memories of at most {MEMORY_CHARS:,} characters)")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SoulError(f"{path}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); "
                            "convert the file to UTF-8, e.g. iconv -t UTF-8") from None
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise SoulError(f"{path}:{number}: not JSON: {why}") from None
        item = _jsonl_item(path, number, value, base)
        for chunk in split_text(item["text"]):
            yield {**item, "text": chunk}


def _jsonl_item(path: Path, number: int, value: Any, base: dict[str, Any]) -> dict[str, Any]:
    """One JSONL line as an item, checked by the engine so a bad field names its line."""
    from soul.engines.resonance import ConfigError, check_item

    if isinstance(value, str):
        item = {**base, "text": value}
    elif isinstance(value, dict) and isinstance(value.get("text"), str):
        item = {**base, **value}
        if not value.get("tags"):
            item["tags"] = base["tags"]
    else:
        raise SoulError(f"{path}:{number}: expected a string or an object with a `text` string")
    try:
        check_item(item)
    except ConfigError as exc:
        raise SoulError(f"{path}:{number}: {exc}; fix or remove the line") from None
    return item

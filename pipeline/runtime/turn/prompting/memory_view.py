"""Working memory as a prompt shows it: per region its newest entries within the region's
limit, as labelled lines (`Fitter.line`, made once per entry), under one heading; and what
each line costs, per way of counting. A turn's calls share one view (`Fitter.memory`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from soul.records import MemoryEntry
from soul.runtime.conversation import Counter, label_of, parts, pieces, with_margin
from soul.runtime.untrusted import escape_untrusted

DEFAULT_REGION_LIMIT = 12  # entries a working-memory region shows unless the blueprint says
HEADING = "## Working Memory"
LINE_CACHE = 1024  # working-memory entries whose prompt lines are kept (a session's recur every turn)
COUNT_CACHE = 1024  # parts of lines whose estimated pieces are kept

Count = Callable[[Counter, str], int]


class MemoryLines:
    """Working-memory entries as prompt lines, each made once per entry, and the estimate of
    a line made here from its two parts, each counted once (`Fitter.count`). What it keeps
    besides each line is small: the line's label, shared by the lines that have it (a turn's
    recollections), and its memory's text as the entry already holds it."""

    __slots__ = ("_labels", "_lines", "_parts", "_pieces", "_rest_pieces")

    def __init__(self) -> None:
        self._lines: dict[int, tuple[MemoryEntry, str]] = {}  # id(entry) -> (entry, its labelled line)
        # a line -> its label (through its `]`) and its memory's escaped text, which the
        # estimate counts apart: the second is counted with the space before it
        self._parts: dict[str, tuple[str, str]] = {}
        self._labels: dict[str, str] = {}  # each label part, once
        self._pieces: dict[str, int] = {}  # the estimate's pieces of a label part
        self._rest_pieces: dict[str, int] = {}  # ... and of " " + an escaped memory text

    def line(self, entry: MemoryEntry) -> str:
        """How working memory shows `entry` — `- [turn 3 · think, internal_monologue] text`,
        escaped — made once per entry: the store hands a session's entries back as the same
        objects turn after turn (an entry is kept with its line, so its id is not reused)."""
        found = self._lines.get(id(entry))
        if found is not None and found[0] is entry:
            return found[1]
        if len(self._lines) >= LINE_CACHE:
            self._lines.clear()
            self._parts.clear()
            self._labels.clear()
        label = label_of(entry)  # "" or "[...] "
        rest = escape_untrusted(entry.content)  # the content itself when nothing is escaped
        text = f"- {label}{rest}"
        self._lines[id(entry)] = (entry, text)
        # "- [turn 5 · recall, memory.recall]" and " the memory": a turn's recollections share
        # the first, and a memory recalled again has the second counted already
        head = f"- {label[:-1]}" if label else "-"
        self._parts[text] = (self._labels.setdefault(head, head), rest)
        return text

    def estimate(self, text: str) -> int | None:
        """`budget.estimate(text)` of a line made here, as its label's pieces and the rest's
        added up (the split falls after the label's `]`, a piece of its own, so the sum is the
        whole line's); None for any other text."""
        split = self._parts.get(text)
        if split is None:
            return None
        head, rest = split
        label = self._pieces.get(head)
        if label is None:
            if len(self._pieces) >= COUNT_CACHE:
                self._pieces.clear()
            label = self._pieces[head] = pieces(head)
        tail = self._rest_pieces.get(rest)
        if tail is None:
            if len(self._rest_pieces) >= COUNT_CACHE:
                self._rest_pieces.clear()
            tail = self._rest_pieces[rest] = pieces(f" {rest}")
        return with_margin(label + tail)


class MemoryView:
    """Working memory as a prompt shows it, for one context's entries: per region (in the
    blueprint's order, then the others by name) its newest entries within its limit, as
    labelled lines (`line_of`: `Fitter.line`); the whole section's text; and, per counter,
    what each line costs."""

    __slots__ = ("_costs", "kinds", "piece", "regions", "text")

    def __init__(self, entries: Mapping[str, tuple[MemoryEntry, ...]], listed: Sequence[str], limits: Mapping[str, int],
                 line_of: Callable[[MemoryEntry], str]) -> None:
        order = [r for r in listed if entries.get(r)] + sorted(r for r in entries if r not in listed and entries[r])
        regions = []
        kinds = []  # each region's part of the context window: recalled memories or working memory
        blocks = []
        for region in order:
            found = entries[region]
            limit = limits.get(region, DEFAULT_REGION_LIMIT)
            over = len(found) - limit if len(found) > limit else 0
            shown = found[-limit:] if limit > 0 else ()
            lines = tuple(map(line_of, shown))
            title = f"### {region}"
            regions.append((region, title, lines, over, limit))
            kind = parts.RECALLED if shown and all(e.entry_type == "recollection" for e in shown) else parts.MEMORY
            kinds.append(kind)
            if lines:
                blocks.append(parts.piece(kind, f"{title}\n" + "\n".join(lines), region))
        self.regions: tuple[tuple[str, str, tuple[str, ...], int, int], ...] = tuple(regions)
        self.kinds: tuple[str, ...] = tuple(kinds)
        self.piece = parts.headed(f"{HEADING}\n", parts.join(blocks))
        self.text = self.piece.text
        self._costs: dict[bool, tuple[tuple[tuple[int, tuple[int, ...], int], ...], int]] = {}

    def costs(self, counter: Counter, count: Count) -> tuple[tuple[tuple[int, tuple[int, ...], int], ...], int]:
        """Per region (its title's cost, each line's, all its lines'), and the whole cost."""
        found = self._costs.get(counter.exact)
        if found is None:
            each = []
            for _, title, lines, _, _ in self.regions:
                line_costs = tuple(count(counter, line) + 1 for line in lines)
                each.append((count(counter, title) + 1, line_costs, sum(line_costs)))
            found = self._costs[counter.exact] = (tuple(each), sum(t + s for t, _, s in each))
        return found


def limit_cut(region: str, over: int, limit: int) -> dict[str, Any]:
    """What a report says of a region's entries over its limit."""
    return {"part": f"working memory: {region}", "what": f"{over} oldest entries",
            "entries": over, "why": f"over the region's limit of {limit}"}
